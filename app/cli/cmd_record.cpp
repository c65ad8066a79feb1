// `kvscope record`: run a model on a prompt and save its attention evidence as an HDF5 trace.
#include <unistd.h>

#include <cstdio>

#include "analysis/policy.h"
#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/device_flag.h"
#include "app/cli/policy_setup.h"
#include "app/cli/record.h"
#include "app/cli/run_summary.h"
#include "app/cli/stop_signals.h"
#include "inference/errors.h"
#include "inference/loader.h"

namespace kvs {
namespace {

// --model, or without it the default model (SmolLM2-135M-Instruct, the app's Run view's first
// model) where scripts/fetch-model.sh put it in the model cache, said on stderr.
std::string model_flag(const Args& a, bool quiet) {
  if (a.has("--model")) return a.str("--model");
  const std::string def = default_model_path();
  if (def.empty())
    throw input_error("--model", "is required (the default, SmolLM2-135M-Instruct, is not in the model cache: "
                                 "bash scripts/fetch-model.sh fetches it)");
  if (!quiet) std::fprintf(stderr, "kvscope: no --model given: the default, %s\n", def.c_str());
  return def;
}

}  // namespace

int cmd_record(const ArgList& argv) {
  Args a(argv,
         {"--model", "--tokenizer", "--prompt", "--prompt-file", "--steps", "--temperature", "--top-p",
          "--seed", "--out", "--policy", "--budget", "--decode-dtype", "--capture-budget-mb", "--threads",
          "--device", "--gpu-dtype", "--kv-dtype", "--system"},
         {"--chat", "--quiet"});
  if (!a.positional().empty()) throw input_error(a.positional()[0], "unexpected argument");
  for (const char* flag : {"--model", "--tokenizer", "--prompt-file", "--out", "--policy"})
    if (a.has(flag) && a.str(flag).empty()) throw input_error(flag, "is empty");
  if (a.has("--budget") && !a.has("--policy"))
    throw input_error("--budget", "applies to the policy of --policy, and none is given");
  RecordRequest r;
  r.model_path = model_flag(a, a.has("--quiet"));
  r.tokenizer_path = a.str("--tokenizer");
  if (a.has("--prompt") == a.has("--prompt-file"))
    throw input_error("--prompt", "give exactly one of --prompt TEXT or --prompt-file F");
  r.prompt = a.has("--prompt") ? a.str("--prompt") : read_prompt_file(a.str("--prompt-file"));
  r.chat = a.has("--chat");
  if (a.has("--system")) {
    if (!r.chat) throw input_error("--system", "applies to --chat's format, and --chat is not given");
    r.system = a.str("--system");
    if (r.system.empty()) throw input_error("--system", "is empty");
    require_prompt_text(r.system, "--system", "");
  }
  r.steps = a.integer("--steps", 64, 1, 1 << 20);
  r.sampling.temperature = static_cast<float>(a.number("--temperature", 0.0, 0.0, 100.0));
  r.sampling.top_p = static_cast<float>(a.number("--top-p", 1.0, 1e-6, 1.0));
  r.sampling.seed = static_cast<uint64_t>(a.integer("--seed", 42, 0, 2147483647));
  r.out_path = a.required("--out");
  r.policy = a.str("--policy");
  if (!r.policy.empty()) {
    r.budget = a.integer("--budget", 0, 1, 1 << 30);
    // --budget, unless full, budget=N or frac=F
    if (!a.has("--budget") && takes_budget_flag(r.policy))
      throw input_error("--budget", "is required (tokens kept per head) for --policy " + r.policy);
    if (a.has("--budget") && !takes_budget_flag(r.policy))
      throw input_error("--budget", "--policy " + r.policy + " does not use it (" + own_budget(r.policy) + ")");
  }
  r.decode_dtype = a.str("--decode-dtype", "float32");
  if (r.decode_dtype != "float32" && r.decode_dtype != "float16")
    throw input_error("--decode-dtype", "expected float32 or float16, got '" + r.decode_dtype + "'");
  r.capture_budget_bytes = static_cast<std::size_t>(a.integer("--capture-budget-mb", 256, 0, 1 << 20)) << 20;
  r.threads = a.integer("--threads", 0, 0, 1024);
  r.device = device_flag(a);
  r.gpu_dtype = gpu_dtype_flag(a);
  r.kv_dtype = kv_dtype_flag(a, r.device);
  const bool quiet = a.has("--quiet");

  RecordCallbacks cb;
  bool printed = false;  // the prompt went to stdout (its line is not ended yet)
  cb.on_prompt = [&](const std::string& text) {
    if (!quiet) std::fputs(text.c_str(), stdout);
    printed = !quiet;
  };
  cb.on_token = [&](int, int, const std::string& piece) {
    if (quiet) return;
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
  };
  // On a terminal, the prefill's layer count on one line of stderr, erased when the prompt is
  // through (a long prompt's prefill takes a minute on two cores).
  const bool show_progress = !quiet && ::isatty(STDERR_FILENO);
  if (show_progress) {
    cb.on_prefill_layer = [](int layer, int n_layers) {
      if (layer < n_layers)
        std::fprintf(stderr, "\r\033[Kkvscope: prefill, layer %d of %d", layer + 1, n_layers);
      else
        std::fputs("\r\033[K", stderr);
    };
    // Under --policy, the passes before the recorded one (the full-cache reference run, KVzip's
    // scoring).
    cb.on_pass = [](const PassProgress& p) { std::fprintf(stderr, "\r\033[Kkvscope: %s", describe(p).c_str()); };
  }
  // Ctrl-C / SIGTERM stop the decode loop; the trace is committed with the steps done so far.
  cb.cancelled = [] { return StopSignals::received() != 0; };
  RecordResult res;
  int stopped_by = 0;
  {
    const StopSignals stop;
    try {
      res = record_trace(r, cb);
    } catch (...) {
      // The error line on stderr starts a line of its own after the prompt's text on stdout.
      if (printed) std::printf("\n");
      std::fflush(stdout);
      throw;
    }
    stopped_by = StopSignals::received();
  }
  if (!quiet) std::printf("\n");
  std::fflush(stdout);  // the text's last line before the summary on stderr
  if (stopped_by != 0) {
    if (show_progress) std::fputs("\r\033[K", stderr);  // the progress line
    if (res.out_path.empty())
      std::fprintf(stderr, "kvscope: interrupted during the %s; no trace written\n", res.cancelled_during.c_str());
    else
      std::fprintf(stderr, "kvscope: interrupted; trace %s holds the %d of %d steps recorded so far\n",
                   res.out_path.c_str(), res.n_steps, r.steps);
    return 128 + stopped_by;
  }
  if (quiet) return 0;
  std::fprintf(stderr, "kvscope: %s; trace %s%s%s\n", timing_summary(res).c_str(), res.out_path.c_str(),
               res.note.empty() ? "" : "; ", res.note.c_str());
  if (!res.run_scalars.empty()) {  // under --policy: what its evictions did, against the full cache
    RunData run;
    run.mode = res.run_mode;
    run.scalars = res.run_scalars;
    print_live_scalars(run, stderr);
  }
  return 0;
}

}  // namespace kvs
