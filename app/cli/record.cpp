// record_trace(): model + prompt -> generation with the trace recorder attached -> HDF5 trace,
// with per-head statistics and the inter-layer similarity computed as the steps stream by.
#include "app/cli/record.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/kvzip_scores.h"
#include "analysis/live_run.h"
#include "analysis/policy_omnikv.h"
#include "analysis/recorder.h"
#include "analysis/run_progress.h"
#include "analysis/simulator.h"
#include "analysis/step_analyses.h"
#include "inference/bpe_merge.h"
#include "inference/chat_template.h"
#include "inference/errors.h"
#include "inference/loader.h"

namespace kvs {

namespace {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// A run whose model ended the text early (end-of-text) holds kept sets [n, L, Hkv, P + steps]
// over the positions requested; the trace it goes into ends at its own tokens, P + n.
void fit_positions(RunData& run, int requested_T) {
  const size_t T = run.tokens.size(), rows = run.kept.size() / requested_T;  // rows: n * L * Hkv
  if (static_cast<int>(T) == requested_T) return;
  std::vector<uint8_t> kept(rows * T);  // [n, L, Hkv, T]
  for (size_t i = 0; i < rows; ++i)
    std::copy_n(run.kept.begin() + i * requested_T, T, kept.begin() + i * T);
  run.kept = std::move(kept);
}

}  // namespace

void require_prompt_text(const std::string& text, const std::string& name, const std::string& what) {
  if (text.find('\0') != std::string::npos) throw input_error(name, what + "contains a NUL byte (not text)");
  if (escape_invalid_utf8(text) != text) throw input_error(name, what + "is not valid UTF-8 text");
}

std::string read_prompt_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw input_error(path, "is a directory, not a " + what);
  std::ifstream f(path, std::ios::binary);
  if (!f) throw input_error(path, "cannot read " + what);
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);  // a UTF-8 byte-order mark (Windows editors) is no text
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) throw input_error(path, what + " is empty");
  require_prompt_text(text, path, what + " ");
  return text;
}

RecordResult record_trace(const RecordRequest& r, const RecordCallbacks& cb) {
  const auto t0 = std::chrono::steady_clock::now();
  if (r.model_path.empty()) throw input_error("--model", "no model path given");
  if (r.out_path.empty()) throw input_error("--out", "no trace path given");
  if (r.prompt.empty()) throw input_error("prompt", "is empty");
  require_prompt_text(r.prompt, "prompt", "");
  require_prompt_text(r.system, "system prompt", "");
  Model model = load_model(r.model_path);
  auto tok = load_tokenizer(model, r.tokenizer_path);
  const ModelConfig& c = model.config;
  ChatPrompt chat{r.prompt, false, false, ""};
  if (r.chat) {
    const std::string chat_template = chat_template_for_model(model);
    if (chat_template.empty()) throw input_error("--chat", model.path + " has no chat format (a base model)");
    chat = chat_prompt(chat_template, *tok, r.prompt, r.system);
  }
  const std::string& text = chat.text;
  std::vector<int> prompt = tok->encode(text, chat.encode_with_bos(*tok));
  if (prompt.empty()) throw input_error("prompt", "encodes to no tokens");
  if (static_cast<int>(prompt.size()) + r.steps > c.seq_len)
    throw input_error("prompt", std::to_string(prompt.size()) + " tokens + " + std::to_string(r.steps) +
                                    " steps exceed the model's context of " + std::to_string(c.seq_len) + " tokens");

  const ModelShape shape = shape_of(c);
  // A live policy is checked before anything is written or printed.
  std::unique_ptr<Policy> policy;
  if (!r.policy.empty()) {
    PolicySpec spec = parse_policy_spec(r.policy, r.budget);
    resolve_omnikv_frac(spec, static_cast<int>(prompt.size()));
    policy = make_policy(spec, shape);
  }
  // DuoAttention's gates come from a pattern folder or are profiled from a trace's decode rows,
  // which a recording does not have yet.
  if (policy && policy->spec().name == "duoattention" && !policy->spec().params.count("pattern"))
    throw input_error("--policy duoattention", "a recording has no trace to take gates from (profiled from its rows, "
                                               "or estimated by kvscope heads --model): give pattern=DIR (e.g. "
                                               "one written by kvscope heads --alpha-out)");
  TraceMeta meta;
  meta.writer_version = KVSCOPE_VERSION;
  meta.created = utc_now();
  meta.model = c.name;
  // Without "..": a trace recorded in one clone still finds ../shared's models from another.
  meta.model_path = std::filesystem::weakly_canonical(model.path).string();
  meta.tokenizer_path = r.tokenizer_path.empty() ? "" : std::filesystem::weakly_canonical(r.tokenizer_path).string();
  meta.arch = c.arch;
  meta.shape = shape;
  meta.vocab_size = c.vocab_size;
  meta.prompt_len = static_cast<int>(prompt.size());
  meta.prompt = text;
  meta.temperature = r.sampling.temperature;
  meta.top_p = r.sampling.top_p;
  meta.seed = r.sampling.seed;
  meta.decode_dtype = r.decode_dtype;
  meta.device = device_name(r.device);
  meta.device_dtype = storage_name(model, r.device, r.gpu_dtype, r.kv_dtype);

  StepAnalyses analyses(shape, meta.prompt_len);  // may be fed on a thread of rec's: outlives rec
  TraceRecorder rec(r.out_path, meta, r.steps, r.capture_budget_bytes);
  rec.on_step = [&](int, int q_pos, std::span<const float> rows, std::span<const float> lse) {
    analyses.add(q_pos, rows, lse);
  };
  // Beside a GPU the host's cores are free: the analyses overlap the next steps and the writing.
  // A CPU decode fills every core (measured on 2 cores: 25.7 ms a step with them on the engine's
  // thread, 29.5 ms on the writing thread, SmolLM2 at 3K keys).
  rec.on_step_in_background = r.device == Device::Cuda;
  // The prompt as fed: a chat prompt with its format's markers (decoding drops special tokens).
  const std::string prompt_text = r.chat ? text : tok->decode(prompt);
  if (cb.on_prompt) cb.on_prompt(prompt_text);

  EngineOptions eo;
  eo.n_threads = r.threads;
  eo.device = r.device;
  eo.gpu_dtype = r.gpu_dtype;
  eo.kv_dtype = r.kv_dtype;
  Engine engine(model, eo);
  RecordResult res;
  std::vector<int> generated;
  int prev = prompt.back();
  std::chrono::steady_clock::time_point start, first_token, last_token;  // of a run without a policy
  auto stream = [&](int step, int token) {
    if (cb.on_token) cb.on_token(step, r.steps, tok->decode_piece(prev, token));
    prev = token;
  };

  std::string stage = "prefill";  // what runs, for a note when stopped before the first step
  try {
    if (r.policy.empty()) {
      PrefillProgress progress(cb.on_prefill_layer, cb.cancelled);
      ObserverFanout observers;  // the recorder, then the progress report
      observers.add(&rec);
      observers.add(&progress);
      const EngineAttachment attached(engine, &observers, nullptr);
      GenerateRequest req;
      req.prompt = prompt;
      req.steps = r.steps;
      req.sampling = r.sampling;
      req.end_ids = text_end_ids(model, *tok);
      GenerateCallbacks gcb;
      gcb.on_token = [&](int step, int token, std::span<const float>) {
        last_token = std::chrono::steady_clock::now();
        if (step == 0) first_token = last_token;
        stream(step, token);
      };
      gcb.cancelled = cb.cancelled;
      start = std::chrono::steady_clock::now();
      generated = generate(engine, req, gcb);
    } else {
      // Recorded under a policy from the start: the trace's attention is the policy run's own.
      const int count = policy->needs_key_scores() ? 3 : 2;  // the recorded run last
      LiveRunOptions lo;
      lo.mode = "free";
      lo.sampling = r.sampling;
      lo.keep_attention = false;
      lo.observer = &rec;
      lo.progress = {cb.on_prefill_layer, nullptr, cb.cancelled};
      // The recorder records the reference's prefill, which the policy run then starts from.
      stage = "reference run";
      ReferenceRun ref = run_reference(engine, prompt, r.steps, {}, r.sampling,
                                       pass_progress(cb.on_pass, stage, 0, count, cb.cancelled), lo.window_request,
                                       &rec);
      if (policy->needs_key_scores()) {
        KvzipOptions ko;
        ko.on = &engine;  // from the reference's prefill of the prompt
        ko.from = ref.prefill->snapshot.get();
        stage = "KVzip scoring";
        ko.progress = pass_progress(cb.on_pass, stage, 1, count, cb.cancelled);
        lo.key_scores = kvzip_key_scores(model, *tok, prompt, ko);
      }
      stage = ref.prefill->snapshot ? "policy run" : "prefill";
      std::string& note = rec.meta().capture_note;
      note += note.empty() ? "" : "; ";
      try {
        RunData run = live_run(engine, *policy, PolicyContext{}, ref, *tok, lo);
        fit_positions(run, meta.prompt_len + r.steps);
        // Its counts and bytes, as a re-run has them; recall needs full-cache rows, which a
        // trace recorded under the policy does not hold.
        add_kept_set_counts(shape, meta.prompt_len, run, SimulateOptions{}.block_size);
        generated.assign(run.tokens.begin() + meta.prompt_len, run.tokens.end());
        note += "recorded under policy " + run.name +
                (policy->spec().name == "full" ? " (the full cache: nothing evicted)" : " (real eviction)");
        if (const std::string caveat = policy->caveat(meta.prompt_len); !caveat.empty()) note += "; note: " + caveat;
        rec.meta().recorded_under = run.name;
        rec.writer().write_run(run);
        res.run_mode = run.mode;
        res.run_scalars = run.scalars;
      } catch (const RunCancelled&) {
        if (rec.steps_written() == 0) throw;
        // Cancelled: keep the steps recorded so far; the run's kept sets are incomplete, so no run.
        const auto& ids = rec.ids();
        generated.assign(ids.begin() + std::min<size_t>(ids.size(), meta.prompt_len), ids.end());
        note += "recorded under policy " + policy->spec().run_name() + ", cancelled (run not stored)";
      }
      for (size_t s = 0; s < generated.size(); ++s) stream(static_cast<int>(s), generated[s]);
    }
  } catch (const RunCancelled&) {
    // Stopped before a step was recorded: nothing to keep (the uncommitted trace is discarded
    // with the recorder).
    res.prompt_text = prompt_text;
    res.prompt_len = meta.prompt_len;
    res.cancelled_during = stage;
    res.note = "cancelled during the " + stage + ": no trace written";
    res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return res;
  }

  const bool cancelled = cb.cancelled && cb.cancelled();
  if (cancelled && rec.steps_written() < r.steps) {
    std::string& note = rec.meta().capture_note;
    note += (note.empty() ? "" : "; ") + std::string("cancelled: the trace keeps the ") +
            std::to_string(rec.steps_written()) + " of " + std::to_string(r.steps) + " steps recorded";
  }
  // The model chose end-of-text (or begin-of-text) as its first token: a trace without decode steps is one that
  // simulate, rerun, heads and layers refuse, so none is written (the recorder discards it).
  if (!cancelled && rec.steps_written() == 0) {
    const bool chat_model = !r.chat && !chat_template_for_model(model).empty();
    throw input_error("prompt", "the model ended the text at once (end-of-text or begin-of-text as its first token): no "
                                "decode step "
                                "to record" +
                                    std::string(chat_model ? "; " + model.path +
                                                                 " is a chat model: give the prompt in its chat format "
                                                                 "(--chat, the app's \"chat format\")"
                                                           : ""));
  }
  if (!cancelled && rec.steps_written() < r.steps) {
    std::string& note = rec.meta().capture_note;
    note += (note.empty() ? "" : "; ") + std::string("the model ended the text (end-of-text or begin-of-text token) after ") +
            std::to_string(rec.steps_written()) + " of " + std::to_string(r.steps) + " steps";
  }
  analyses.write(rec.writer());
  rec.finish([&](int id) { return tok->token_text(id); });

  res.prompt_text = prompt_text;
  res.generated_text = tok->decode(generated);
  res.prompt_len = meta.prompt_len;
  res.n_steps = rec.steps_written();
  res.out_path = r.out_path;
  res.note = rec.capture_note();
  res.engine = meta.device == "cuda"           ? meta.device + ", " + meta.device_dtype
               : meta.device_dtype == "fp32" ? meta.device
                                             : meta.device + ", " + meta.device_dtype + " cache";
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (r.policy.empty() && res.n_steps > 0) {
    res.prefill_seconds = std::chrono::duration<double>(first_token - start).count();
    res.decode_seconds = std::chrono::duration<double>(last_token - first_token).count();
  }
  return res;
}

std::string timing_summary(const RecordResult& res) {
  char text[200];
  // The first step's token comes from the prefill's logits: the decode time covers the others.
  if (res.prefill_seconds > 0 && res.decode_seconds > 0 && res.n_steps > 1)
    std::snprintf(text, sizeof text, "%d prompt tokens in %.2f s (%.0f tok/s) + %d steps at %.1f tok/s, %.2f s in all",
                  res.prompt_len, res.prefill_seconds, res.prompt_len / res.prefill_seconds, res.n_steps,
                  (res.n_steps - 1) / res.decode_seconds, res.seconds);
  else
    std::snprintf(text, sizeof text, "%d prompt tokens + %d steps in %.2f s", res.prompt_len, res.n_steps, res.seconds);
  if (!res.engine.empty()) return text + (" on " + res.engine);
  return text;
}

}  // namespace kvs
