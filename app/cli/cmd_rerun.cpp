// `kvscope rerun trace.h5 --policy ... --mode forced|free`: each policy enforced live on the
// trace's model and prompt (real eviction), compared step by step with the full cache; the runs
// are appended to the trace with eviction="real".
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <set>

#include "analysis/head_stats.h"
#include "analysis/live_run.h"
#include "analysis/policy_duoattention.h"
#include "analysis/simulator.h"
#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/rerun.h"
#include "app/cli/stop_signals.h"
#include "app/cli/device_flag.h"
#include "app/cli/policy_setup.h"
#include "app/cli/run_summary.h"
#include "inference/errors.h"
#include "inference/loader.h"

namespace kvs {

namespace {

const std::set<std::string> kValueFlags = {"--policy", "--budget", "--mode",   "--model",
                                           "--tokenizer", "--alpha", "--threads", "--device",
                                           "--gpu-dtype", "--kv-dtype", "--attention-budget-mb"};
const std::set<std::string> kSwitchFlags = {"--json", "--rope-in-cache", "--no-attention"};

// Runs with StreamingLLM's pos-shift (positions inside the cache) get their own name and say so.
void mark_rerotated(RunData& run) {
  run.name += "_rerotated";
  const std::string entry = "\"rope\":\"in-cache\"";
  std::string& p = run.params_json;
  if (p.size() < 2 || p == "{}") p = "{" + entry + "}";
  else p.insert(p.size() - 1, "," + entry);
}

// Bytes of the runs' own decode rows, [S, L, H, T] floats a run, all held until they are appended.
std::size_t run_rows_bytes(const TraceMeta& m, std::size_t n_runs) {
  return n_runs * m.n_steps * m.shape.n_layers * m.shape.n_heads * m.total_len() * sizeof(float);
}

}  // namespace

std::vector<RunData> rerun_trace(const ArgList& argv, const RerunCallbacks& callbacks) {
  Args a(argv, kValueFlags, kSwitchFlags, {"--policy"});
  if (a.positional().size() != 1) throw input_error("rerun", "expects one trace path");
  const std::string path = a.positional()[0];
  const std::string mode = a.str("--mode", "forced");
  if (mode != "forced" && mode != "free") throw input_error("--mode", "expected forced or free, got '" + mode + "'");

  std::vector<RunData> runs;
  {
    TraceReader trace(path);
    check_appendable(path);  // before the live runs, which take minutes on a large model
    const TraceMeta& m = trace.meta();
    if (const std::string recorded = recorded_under_caveat(m); callbacks.on_caveat && !recorded.empty())
      callbacks.on_caveat(recorded + "; the reference is the full cache fed that run's tokens, so a free run's "
                          "divergence is from that run's text");
    auto policies = build_policies(a, trace);
    for (const auto& p : policies)
      if (const std::string name = p->spec().run_name() + "_" + mode; name == m.recorded_under)
        throw input_error("--policy " + p->spec().name,
                          "would replace " + name + ", the run this trace was recorded under (give another budget or "
                          "--mode)");
    const DuoGates gates = trace_duo_gates(trace);  // for gates=estimated
    Model model = load_model(model_path_for(a, m, "rerun"));
    check_model_matches(model, m);
    auto tok = load_tokenizer(model, tokenizer_path_for(a, m));
    const auto ids = trace.token_ids();
    const std::vector<int> prompt(ids.begin(), ids.begin() + m.prompt_len);
    const std::vector<int> decoded(ids.begin() + m.prompt_len, ids.end());

    // The passes: the full-cache reference, KVzip's scoring when a kvzip policy needs scores the
    // trace lacks, then each policy's run; the last two start from the reference's prefill.
    LiveRunOptions lo;
    lo.mode = mode;
    lo.sampling = {m.temperature, m.top_p, m.seed};
    lo.keep_attention = !a.has("--no-attention");
    if (a.has("--no-attention") && a.has("--attention-budget-mb"))
      throw input_error("--attention-budget-mb", "is not used: --no-attention keeps no rows");
    // Long contexts and generations make the rows outgrow memory (4K prompt + 2K steps of
    // SmolLM2: 13.6 GB a run), so past the budget they are left out, as with --no-attention.
    const std::size_t rows_budget = static_cast<std::size_t>(a.integer("--attention-budget-mb", 1024, 0, 1 << 20)) << 20;
    if (const std::size_t rows = run_rows_bytes(m, policies.size()); lo.keep_attention && rows > rows_budget) {
      lo.keep_attention = false;
      if (callbacks.on_caveat)
        callbacks.on_caveat("the runs' own attention rows (" + std::to_string(rows >> 20) +
                            " MiB) exceed the attention budget of " + std::to_string(rows_budget >> 20) +
                            " MiB (--attention-budget-mb), so they are not kept, as with --no-attention");
    }
    std::optional<PrefillEvidence> evidence;
    if (any_needs_key_scores(policies)) evidence = trace.read_prefill();
    const bool score = evidence && evidence->key_scores.empty();
    const int count = static_cast<int>(policies.size()) + 1 + (score ? 1 : 0);
    int pass = 0;
    auto next_pass = [&](const std::string& name) {
      return pass_progress(callbacks.on_progress, name, pass++, count, callbacks.cancelled);
    };
    EngineOptions eo;
    eo.n_threads = a.integer("--threads", 0, 0, 1024);
    eo.rope_in_cache = a.has("--rope-in-cache");
    eo.device = device_flag(a);
    // The recording's storage unless a flag names another: the reference and the runs then hold
    // the numbers the trace's rows came from.
    const RecordedStorage recorded = recorded_storage(m);
    eo.gpu_dtype = gpu_dtype_flag(a, recorded.gpu);
    eo.kv_dtype = kv_dtype_flag(a, eo.device, recorded.kv);
    // Said where that is not what the flags' own defaults (fp32 cache, auto) would run.
    if (const std::string ran = storage_name(model, eo.device, eo.gpu_dtype, eo.kv_dtype);
        callbacks.on_caveat && ran != storage_name(model, eo.device, gpu_dtype_flag(a), kv_dtype_flag(a, eo.device)))
      callbacks.on_caveat(eo.device == Device::Cpu
                              ? "the runs cache keys and values in " + ran + ", as the trace was recorded (--kv-dtype "
                                "fp32 for the exact cache)"
                              : "the runs store weights and cache in " + ran + ", as the trace was recorded "
                                "(--gpu-dtype to choose)");
    try {
      Engine engine(model, eo);
      const ReferenceRun ref = run_reference(engine, prompt, static_cast<int>(decoded.size()), decoded, lo.sampling,
                                             next_pass("reference run"), lo.window_request);
      if (evidence)
        lo.key_scores = score ? kvzip_scores_for_trace(model, *tok, trace, eo, next_pass("KVzip scoring"), &engine,
                                                       ref.prefill->snapshot.get())
                              : std::move(evidence->key_scores);
      for (auto& p : policies) {
        PolicyContext ctx;
        if (auto w = duo_profile_window(*p)) {
          ctx.alpha = profile_alpha(trace, w->sink, w->recent);
          ctx.alpha_source = "profiled from trace";
        } else {
          ctx.alpha = gates.alpha;
          ctx.alpha_source = gates.source;
        }
        lo.progress = next_pass(p->spec().run_name());
        runs.push_back(live_run(engine, *p, ctx, ref, *tok, lo));
        if (eo.rope_in_cache) mark_rerotated(runs.back());
      }
      if (callbacks.cancelled && callbacks.cancelled()) throw RunCancelled{};  // after the last step
      if (callbacks.on_caveat)  // after the runs: a window longer than the rows at hand is known then
        for (const std::string& c : policy_caveats(policies, m.prompt_len)) callbacks.on_caveat(c);
    } catch (const RunCancelled&) {
      throw input_error("rerun", "cancelled; nothing appended");
    }
    // Recall, top-k miss and the cache counts against the trace's rows, as simulated runs have.
    add_kept_set_metrics(trace, runs, SimulateOptions{}.block_size);
  }
  append_runs(path, runs);
  return runs;
}

int cmd_rerun(const ArgList& argv) {
  RerunCallbacks cb;
  // On a terminal, where the re-run stands on one line of stderr, erased at the end.
  const bool show = isatty(fileno(stderr));
  if (show)
    cb.on_progress = [](const PassProgress& p) { std::fprintf(stderr, "\r\033[Kkvscope: %s", describe(p).c_str()); };
  // Ctrl-C / SIGTERM stop the runs at the next layer or step; the trace is left as it was. Once
  // the runs are appended (the signals are caught until the end), the command completes.
  const StopSignals stop;
  cb.cancelled = [] { return StopSignals::received() != 0; };
  std::vector<std::string> caveats;  // printed after the progress line is gone
  cb.on_caveat = [&caveats](const std::string& c) { caveats.push_back(c); };
  std::vector<RunData> runs;
  try {
    runs = rerun_trace(argv, cb);
  } catch (const InputError&) {
    if (show) std::fputs("\r\033[K", stderr);
    if (StopSignals::received() == 0) throw;
    std::fprintf(stderr, "kvscope: interrupted; nothing appended to the trace\n");
    return 128 + StopSignals::received();
  } catch (...) {
    if (show) std::fputs("\r\033[K", stderr);
    throw;
  }
  if (show) std::fputs("\r\033[K", stderr);
  print_caveats(caveats);
  print_run_summaries(runs, Args(argv, kValueFlags, kSwitchFlags, {"--policy"}).has("--json"));
  return 0;
}

}  // namespace kvs
