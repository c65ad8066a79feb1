// `kvscope rerun trace.h5 --policy ... --mode forced|free`: each policy enforced live on the
// trace's model and prompt (real eviction), compared step by step with the full cache; the runs
// are appended to the trace with eviction="real".
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "analysis/head_stats.h"
#include "analysis/live_run.h"
#include "analysis/run_progress.h"
#include "analysis/policy_duoattention.h"
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
                                           "--gpu-dtype"};
const std::set<std::string> kSwitchFlags = {"--json", "--rope-in-cache", "--no-attention"};

// Runs with StreamingLLM's pos-shift (positions inside the cache) get their own name and say so.
void mark_rerotated(RunData& run) {
  run.name += "_rerotated";
  const std::string entry = "\"rope\":\"in-cache\"";
  std::string& p = run.params_json;
  if (p.size() < 2 || p == "{}") p = "{" + entry + "}";
  else p.insert(p.size() - 1, "," + entry);
}

}  // namespace

std::vector<RunData> rerun_trace(const ArgList& argv, const RerunCallbacks& callbacks) {
  Args a(argv, kValueFlags, kSwitchFlags);
  if (a.positional().size() != 1) throw input_error("rerun", "expects one trace path");
  const std::string path = a.positional()[0];
  const std::string mode = a.str("--mode", "forced");
  if (mode != "forced" && mode != "free") throw input_error("--mode", "expected forced or free, got '" + mode + "'");

  std::vector<RunData> runs;
  {
    TraceReader trace(path);
    const TraceMeta& m = trace.meta();
    auto policies = build_policies(a, trace);
    const std::vector<float> alpha = alpha_from_flag(a, m.shape);
    Model model = load_model(model_path_for(a, m, "rerun"));
    const ModelConfig& c = model.config;
    if (c.n_layers != m.shape.n_layers || c.n_heads != m.shape.n_heads || c.n_kv_heads != m.shape.n_kv_heads ||
        c.head_dim != m.shape.head_dim)
      throw input_error(model.path, "model shape differs from the trace's (" + std::to_string(m.shape.n_layers) +
                                        " layers, " + std::to_string(m.shape.n_heads) + " heads)");
    auto tok = load_tokenizer(model, tokenizer_path_for(a, m));
    const auto ids = trace.token_ids();
    const std::vector<int> prompt(ids.begin(), ids.begin() + m.prompt_len);
    const std::vector<int> decoded(ids.begin() + m.prompt_len, ids.end());

    LiveRunOptions lo;
    lo.mode = mode;
    lo.sampling = {m.temperature, m.top_p, m.seed};
    lo.keep_attention = !a.has("--no-attention");
    if (any_needs_key_scores(policies)) {
      PrefillEvidence ev = trace.read_prefill();
      lo.key_scores = ev.key_scores.empty() ? kvzip_scores_for_trace(a, trace) : std::move(ev.key_scores);
    }
    EngineOptions eo;
    eo.n_threads = a.integer("--threads", 0, 0, 1024);
    eo.rope_in_cache = a.has("--rope-in-cache");
    eo.device = device_flag(a);
    eo.gpu_dtype = gpu_dtype_flag(a);
    Engine engine(model, eo);
    const int count = static_cast<int>(policies.size()) + 1;
    // Reports for run `index` named `name` (nothing when no one listens).
    auto progress_of = [&](const std::string& name, int index) {
      RunProgress out;
      out.cancelled = callbacks.cancelled;
      if (!callbacks.on_progress) return out;
      out.on_prefill_layer = [&callbacks, name, index, count](int layer, int n_layers) {
        callbacks.on_progress({name, index, count, false, layer, n_layers});
      };
      out.on_step = [&callbacks, name, index, count](int step, int total) {
        callbacks.on_progress({name, index, count, true, step + 1, total});
      };
      return out;
    };
    try {
      const ReferenceRun ref = run_reference(engine, prompt, static_cast<int>(decoded.size()), decoded, lo.sampling,
                                             progress_of("reference", 0));
      for (size_t i = 0; i < policies.size(); ++i) {
        Policy& p = *policies[i];
        PolicyContext ctx;
        if (!alpha.empty()) {
          ctx.alpha = alpha;
          ctx.alpha_source = "pattern folder " + a.str("--alpha");
        } else if (auto w = duo_profile_window(p)) {
          ctx.alpha = profile_alpha(trace, w->sink, w->recent);
          ctx.alpha_source = "profiled from trace";
        }
        lo.progress = progress_of(p.spec().run_name(), static_cast<int>(i) + 1);
        runs.push_back(live_run(engine, p, ctx, ref, *tok, lo));
        if (eo.rope_in_cache) mark_rerotated(runs.back());
      }
    } catch (const RunCancelled&) {
      throw input_error("rerun", "cancelled; nothing appended");
    }
  }
  if (callbacks.cancelled && callbacks.cancelled()) throw input_error("rerun", "cancelled; nothing appended");
  append_runs(path, runs);
  return runs;
}

int cmd_rerun(const ArgList& argv) {
  RerunCallbacks cb;
  // On a terminal, where the re-run stands on one line of stderr, erased at the end.
  const bool show = isatty(fileno(stderr));
  if (show)
    cb.on_progress = [](const RerunProgress& p) {
      std::fprintf(stderr, "\r\033[Kkvscope: run %d of %d, %s: %s %d of %d", p.index + 1, p.count, p.run.c_str(),
                   p.decode ? "step" : "prefill, layer", std::min(p.done + (p.decode ? 0 : 1), p.total), p.total);
    };
  // Ctrl-C / SIGTERM stop the runs at the next layer or step; the trace is left as it was. Once
  // the runs are appended (the signals are caught until the end), the command completes.
  const StopSignals stop;
  cb.cancelled = [] { return StopSignals::received() != 0; };
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
  print_run_summaries(runs, Args(argv, kValueFlags, kSwitchFlags).has("--json"));
  return 0;
}

}  // namespace kvs
