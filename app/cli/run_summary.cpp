// Summaries of simulated and live runs for the terminal.
#include "app/cli/run_summary.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "analysis/json_writer.h"

namespace kvs {

namespace {

// Mean over the finite values (a free run's comparisons stop at its first divergence); NaN
// (JSON null) when there are none.
double mean_of(const NamedArray& a) {
  double s = 0.0;
  int n = 0;
  for (float v : a.data)
    if (std::isfinite(v)) s += v, ++n;
  return n ? s / n : std::nan("");
}

}  // namespace

void print_run_summaries(const std::vector<RunData>& runs, bool json) {
  if (json) {
    std::string out = "[";
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunData& r = runs[i];
      JsonObject o;
      o.add("name", r.name).add("policy", r.policy).add("budget", r.budget).add("eviction", r.eviction)
          .add_raw("params", r.params_json.empty() ? "{}" : r.params_json);
      if (!r.mode.empty()) o.add("mode", r.mode);
      for (const auto& m : r.metrics) o.add("mean_" + m.name, mean_of(m));
      for (const auto& [k, v] : r.scalars) o.add(k, v);
      if (!r.text.empty()) o.add("text", r.text);
      if (i) out += ',';
      out += o.str();
    }
    std::printf("%s]\n", out.c_str());
    return;
  }
  for (const RunData& r : runs) {
    std::printf("%-26s %-10s budget %-5d", r.name.c_str(), r.eviction.c_str(), r.budget);
    for (const auto& m : r.metrics) {
      if (m.name == "recall" || m.name == "topk_miss" || m.name == "kept" || m.name == "inactive" ||
          m.name == "kl" || m.name == "top1_agree")
        std::printf("  %s %.4g", m.name.c_str(), mean_of(m));
    }
    for (const auto& [k, v] : r.scalars) std::printf("  %s %.4g", k.c_str(), v);
    std::printf("\n");
    // A forced run was fed the trace's tokens: its text is the trace's, not worth repeating.
    if (!r.text.empty() && r.mode != "forced") std::printf("  text: %s\n", r.text.c_str());
  }
}

}  // namespace kvs
