// Summaries of simulated and live runs for the terminal.
#include "app/cli/run_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "analysis/json_writer.h"
#include "analysis/metric_info.h"

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

// The metrics a run's line shows, in the views' order.
bool shown_in_line(const std::string& name) {
  return name == "recall" || name == "topk_miss" || name == "kept" || name == "inactive" || name == "kl" ||
         name == "top1_agree" || name == "hh_turnover";
}

bool has_nan(const NamedArray& a) {
  return std::any_of(a.data.begin(), a.data.end(), [](float v) { return !std::isfinite(v); });
}

std::string joined(std::vector<std::string> names) {
  sort_metric_names(names);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

// What the numbers of the lines below are: means over the decode steps, and over (layer, KV head)
// for the metrics stored per (layer, KV head). A free run's comparisons with the trace (NaN once
// its text leaves the trace's) are means over its compared steps only, its counts over all its
// steps: the heading names the metrics so restricted. "" when no line shows a metric.
std::string means_heading(const std::vector<RunData>& runs) {
  std::vector<std::string> shown, per_head, compared_only;
  for (const RunData& r : runs)
    for (const auto& m : r.metrics) {
      if (!shown_in_line(m.name)) continue;
      if (r.mode == "free" && has_nan(m) &&
          std::find(compared_only.begin(), compared_only.end(), m.name) == compared_only.end())
        compared_only.push_back(m.name);
      if (std::find(shown.begin(), shown.end(), m.name) != shown.end()) continue;
      shown.push_back(m.name);
      if (per_head_metric(m)) per_head.push_back(m.name);
    }
  if (shown.empty()) return "";
  std::string out = "metrics: means over the decode steps";
  if (!per_head.empty()) out += "; " + joined(per_head) + " also over (layer, KV head)";
  if (!compared_only.empty())
    out += "; a free run's " + joined(compared_only) + " only over its compared steps (before its text left the trace's)";
  return out;
}

// A scalar of the run, or NaN when it has none.
double scalar_of(const RunData& r, const char* key) {
  for (const auto& [k, v] : r.scalars)
    if (k == key) return v;
  return std::nan("");
}

}  // namespace

// The scalars a live run stores, as two readable lines: what its evictions did to the output
// (perplexity of the reference continuation beside the full cache's on the same steps, the first
// divergence) and to memory (peak and mean against the full cache). Scalars these lines do not
// know follow on a third, as name value.
void print_live_scalars(const RunData& r, FILE* f) {
  const double ppl = scalar_of(r, "perplexity"), full_ppl = scalar_of(r, "full_perplexity");
  const double compared = scalar_of(r, "compared_steps"), div = scalar_of(r, "first_divergence");
  const double peak = scalar_of(r, "peak_kv_bytes"), full_peak = scalar_of(r, "full_peak_kv_bytes");
  const double peak_ratio = scalar_of(r, "peak_kv_ratio"), mean_ratio = scalar_of(r, "mean_kv_ratio");
  if (std::isfinite(ppl) || std::isfinite(compared)) {
    if (!std::isfinite(ppl)) {  // NaN: no step compared
      std::fprintf(f, "  output: no step compared with the full cache");
    } else {
      std::fprintf(f, "  output: perplexity %.4g", ppl);
      if (std::isfinite(full_ppl)) std::fprintf(f, " (full cache %.4g)", full_ppl);
      if (std::isfinite(compared)) std::fprintf(f, " over %.0f compared step%s", compared, compared == 1 ? "" : "s");
    }
    if (std::isfinite(div)) {
      const char* what = r.mode == "free" ? "its generated token" : "its top-1";  // against the full cache's
      if (div < 0) std::fprintf(f, "; %s never differs from the full cache's", what);
      else std::fprintf(f, "; %s first differs from the full cache's at step %.0f", what, div);
    }
    std::fprintf(f, "\n");
  }
  if (std::isfinite(peak)) {
    std::fprintf(f, "  memory: peak %s", run_scalar_text("peak_kv_bytes", peak).c_str());
    if (std::isfinite(full_peak)) std::fprintf(f, " (full cache %s", run_scalar_text("full_peak_kv_bytes", full_peak).c_str());
    if (std::isfinite(full_peak) && std::isfinite(peak_ratio)) std::fprintf(f, ", ratio %.3g", peak_ratio);
    if (std::isfinite(full_peak)) std::fprintf(f, ")");
    if (std::isfinite(mean_ratio)) std::fprintf(f, "; after each step %.3g of the full cache's on average", mean_ratio);
    std::fprintf(f, "\n");
  }
  bool other = false;
  for (const auto& [k, v] : r.scalars) {
    const std::vector<std::string>& known = live_run_scalar_names();
    if (k == "block_size" || std::find(known.begin(), known.end(), k) != known.end()) continue;  // block_size: a setting
    std::fprintf(f, "%s%s %.4g", other ? "  " : "  also: ", k.c_str(), v);
    other = true;
  }
  if (other) std::fprintf(f, "\n");
}

void print_run_summaries(const std::vector<RunData>& runs, bool json) {
  if (json) {
    std::string out = "[";
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunData& r = runs[i];
      JsonObject o;
      o.add("name", r.name).add("policy", r.policy).add("budget", r.budget).add("eviction", r.eviction)
          .add_raw("params", r.params_json.empty() ? "{}" : r.params_json);
      if (!r.mode.empty()) o.add("mode", r.mode);
      if (!r.device.empty()) o.add("device", r.device).add("device_dtype", r.device_dtype);
      for (const auto& m : r.metrics) o.add("mean_" + m.name, mean_of(m));
      for (const auto& [k, v] : r.scalars) o.add(k, v);
      if (!r.text.empty()) o.add("text", r.text);
      if (i) out += ',';
      out += o.str();
    }
    std::printf("%s]\n", out.c_str());
    return;
  }
  if (const std::string heading = means_heading(runs); !heading.empty()) std::printf("%s\n", heading.c_str());
  // Columns as wide as their longest entry, so that long run names keep the metrics aligned.
  int name_w = 0, budget_w = 0;
  auto budget_of = [](const RunData& r) { return r.budget > 0 ? std::to_string(r.budget) : "-"; };  // full has none
  for (const RunData& r : runs) {
    name_w = std::max(name_w, (int)r.name.size());
    budget_w = std::max(budget_w, (int)budget_of(r).size());
  }
  for (const RunData& r : runs) {
    std::printf("%-*s  %-10s budget %-*s", name_w, r.name.c_str(), r.eviction.c_str(), budget_w,
                budget_of(r).c_str());
    std::vector<const NamedArray*> shown;
    for (const auto& m : r.metrics)
      if (shown_in_line(m.name)) shown.push_back(&m);
    std::stable_sort(shown.begin(), shown.end(), [](const NamedArray* x, const NamedArray* y) {
      return metric_info(x->name).rank < metric_info(y->name).rank;
    });
    for (const NamedArray* m : shown) std::printf("  %s %.4g", m->name.c_str(), mean_of(*m));
    std::printf("\n");
    print_live_scalars(r, stdout);
    // A forced run was fed the trace's tokens: its text is the trace's, not worth repeating.
    if (!r.text.empty() && r.mode != "forced") std::printf("  text: %s\n", r.text.c_str());
  }
}

}  // namespace kvs
