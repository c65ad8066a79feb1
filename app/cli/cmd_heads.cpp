// `kvscope heads`: per-head statistics of a trace (sink mass, locality, entropy, profiled α),
// or α and retrieval scores estimated on the model itself (`--model`; α optionally written as
// a DuoAttention pattern folder, the retrieval scores into a trace given with it).
#include <cstdio>
#include <filesystem>

#include "analysis/duo_pattern.h"
#include "analysis/head_stats.h"
#include "analysis/trace.h"
#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/device_flag.h"
#include "app/cli/policy_setup.h"
#include "app/cli/heads_model.h"
#include "analysis/json_writer.h"
#include "inference/errors.h"

namespace kvs {

int cmd_heads(const ArgList& argv) {
  Args a(argv, {"--model", "--tokenizer", "--alpha-out", "--sink", "--recent", "--threads", "--kv-dtype"},
         {"--json"});
  const int sink = a.integer("--sink", 4, 0, 1 << 20);
  const int recent = a.integer("--recent", 32, 0, 1 << 20);
  if (a.has("--model")) {
    if (a.positional().size() > 1) throw input_error(a.positional()[1], "unexpected argument (one trace at most)");
    HeadsModelOptions o;
    o.model_path = a.str("--model");
    o.tokenizer_path = a.str("--tokenizer");
    o.sink = sink;
    o.recent = recent;
    o.alpha_out = a.str("--alpha-out");
    o.json = a.has("--json");
    o.threads = a.integer("--threads", 0, 0, 1024);
    o.trace_path = a.positional().empty() ? "" : a.positional()[0];
    if (a.has("--kv-dtype")) o.kv_dtype = kv_dtype_flag(a, Device::Cpu);
    return heads_from_model(o);
  }
  if (a.has("--kv-dtype")) throw input_error("--kv-dtype", "only with --model (a trace's statistics run no model)");
  if (a.positional().size() != 1) throw input_error("heads", "expects one trace path or --model M");
  TraceReader trace(a.positional()[0]);
  if (a.has("--alpha-out")) check_duo_pattern_output(a.str("--alpha-out"));
  note_recorded_under(trace.meta());
  const ModelShape shape = trace.meta().shape;
  HeadStatsOptions opt;
  opt.sinks = sink;
  const HeadStats st = head_stats(trace, opt);
  const std::vector<float> alpha = profile_alpha(trace, sink, recent);  // [L, Hkv]
  if (a.has("--alpha-out")) {
    DuoPattern p;
    p.n_layers = shape.n_layers;
    p.n_kv_heads = shape.n_kv_heads;
    p.alpha = alpha;
    p.sink_size = sink;
    p.recent_size = recent;
    write_duo_pattern(a.str("--alpha-out"), p, "profiled from trace");
  }
  if (a.has("--json")) {
    JsonObject o;
    o.add("n_layers", shape.n_layers).add("n_heads", shape.n_heads).add("n_kv_heads", shape.n_kv_heads)
        .add("steps", st.n_steps)
        .add("sink_mass", std::vector<double>(st.sink_mass.begin(), st.sink_mass.end()))
        .add("locality", std::vector<double>(st.locality.begin(), st.locality.end()))
        .add("entropy", std::vector<double>(st.entropy.begin(), st.entropy.end()))
        .add("alpha", std::vector<double>(alpha.begin(), alpha.end()))
        .add("alpha_source", "profiled from trace");
    std::printf("%s\n", o.str().c_str());
    return 0;
  }
  std::printf("per KV head over %d decode steps: sink mass (first %d keys) / locality (last 32) / "
              "entropy (nats) / alpha (mass outside %d sinks + %d recent)\n",
              st.n_steps, sink, sink, recent);
  for (int l = 0; l < shape.n_layers; ++l) {
    std::printf("layer %2d", l);
    for (int g = 0; g < shape.n_kv_heads; ++g) {
      const size_t i = static_cast<size_t>(l) * shape.n_kv_heads + g;
      std::printf("  kv%d %.2f/%.2f/%.2f/%.2f", g, st.kv_sink_mass[i], st.kv_locality[i], st.kv_entropy[i], alpha[i]);
    }
    std::printf("\n");
  }
  if (a.has("--alpha-out"))
    std::printf("alpha written to %s\n",
                (std::filesystem::path(a.str("--alpha-out")) / "full_attention_heads.tsv").lexically_normal().c_str());
  return 0;
}

}  // namespace kvs
