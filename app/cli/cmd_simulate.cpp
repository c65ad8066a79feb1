// `kvscope simulate trace.h5 --policy ... --budget N`: every policy replayed over the trace's
// recorded attention in one pass; the runs are appended to the trace atomically.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "analysis/simulator.h"
#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/pass_progress.h"
#include "app/cli/policy_setup.h"
#include "app/cli/run_summary.h"
#include "inference/errors.h"

namespace kvs {

int cmd_simulate(const ArgList& argv) {
  Args a(argv, {"--policy", "--budget", "--model", "--tokenizer", "--alpha", "--block-size", "--threads"},
         {"--json"}, {"--policy"});
  if (a.positional().size() != 1) throw input_error("simulate", "expects one trace path");
  const int threads = a.integer("--threads", 0, 0, 1024);  // for KVzip's scoring pass, when a kvzip policy needs one
  for (const char* flag : {"--model", "--tokenizer"})  // checked even when no policy needs them
    if (a.has(flag) && !std::filesystem::exists(a.str(flag)))
      throw input_error(std::string(flag) + " " + a.str(flag), "no such file or folder");
  const std::string path = a.positional()[0];
  std::vector<RunData> runs;
  std::vector<std::string> caveats;
  // On a terminal, the step the replay has reached, and then the append (a copy of the trace).
  const bool show = isatty(fileno(stderr));
  {
    TraceReader trace(path);
    check_appendable(path);  // before the work whose runs it would refuse
    note_recorded_under(trace.meta());
    auto policies = build_policies(a, trace);
    SimulateOptions opt;
    opt.block_size = a.integer("--block-size", 16, 1, 1 << 16);
    DuoGates gates = trace_duo_gates(trace);  // for gates=estimated
    opt.alpha = std::move(gates.alpha);
    opt.alpha_source = std::move(gates.source);
    const bool runs_model = any_needs_key_scores(policies) && !trace.has_array("/attention/prefill_key_scores");
    for (const char* flag : {"--model", "--tokenizer"})  // would be silently ignored, whatever model it names
      if (a.has(flag) && !runs_model)
        throw input_error(flag, "is not used: simulate runs the model only for --policy kvzip, on a trace without "
                                "its key scores");
    if (runs_model) {
      // KVzip's scores run the model over the prompt: on a terminal, where that stands.
      const bool show = isatty(fileno(stderr));
      PassReport report;
      if (show) report = [](const PassProgress& p) { std::fprintf(stderr, "\r\033[Kkvscope: %s", describe(p).c_str()); };
      opt.key_scores = kvzip_scores_for_trace(model_path_for(a, trace.meta(), "--policy kvzip"),
                                              tokenizer_path_for(a, trace.meta()), trace, threads,
                                              pass_progress(report, "KVzip scoring", 0, 1, nullptr));
      if (show) std::fputs("\r\033[K", stderr);
    }
    std::vector<Policy*> ptrs;
    for (auto& p : policies) ptrs.push_back(p.get());
    if (show)
      opt.on_step = [](int step, int total) { std::fprintf(stderr, "\r\033[Kkvscope: simulating, step %d of %d", step + 1, total); };
    runs = simulate(trace, ptrs, opt);
    if (show) std::fputs("\r\033[Kkvscope: appending the runs to the trace", stderr);
    caveats = policy_caveats(policies, trace.meta().prompt_len);
  }
  append_runs(path, runs);
  if (show) std::fputs("\r\033[K", stderr);
  print_caveats(caveats);
  print_run_summaries(runs, a.has("--json"));
  return 0;
}

}  // namespace kvs
