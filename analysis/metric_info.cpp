// Display facts about the per-step metrics of simulated and live runs (docs/policies.md, Metrics;
// docs/trace-format.md for the live runs' kl, top1_agree and ref_logprob).
#include "analysis/metric_info.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace kvs {

MetricInfo metric_info(const std::string& name) {
  using U = MetricUnit;
  if (name == "recall") return {0, U::kFraction, "attention mass on the kept keys"};
  if (name == "topk_miss") return {1, U::kFraction, "share of the full row's top-k keys evicted"};
  if (name == "kl") return {2, U::kNats, "KL(full cache || run) of the next-token distribution"};
  if (name == "top1_agree") return {3, U::kFraction, "1 when the run's top-1 token is the full cache's"};
  if (name == "ref_logprob") return {4, U::kNats, "log-prob of the recorded next token under the run"};
  if (name == "hh_turnover") return {5, U::kFraction, "Jaccard distance of consecutive heavy-hitter sets"};
  if (name == "kept") return {6, U::kCount, "entries held at attention, the new token's included: budget + 1"};
  if (name == "evicted") return {7, U::kCount, "context entries not held"};
  if (name == "inactive") return {8, U::kCount, "entries held but not attended"};
  if (name == "kv_bytes") return {9, U::kBytes, "bytes of K and V held at attention (kept x bytes an entry)"};
  if (name == "paged_bytes_freed") return {10, U::kBytes, "bytes freed under paged allocation"};
  if (name.size() > 6 && name.compare(name.size() - 6, 6, "_ratio") == 0) return {100, U::kFraction, ""};
  return {};
}

void sort_metric_names(std::vector<std::string>& names) {
  std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return std::make_tuple(metric_info(a).rank, a) < std::make_tuple(metric_info(b).rank, b);
  });
}

ValueScale byte_scale(double max_abs) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB"};
  ValueScale s{1.0, units[0]};
  for (int i = 1; i < 4 && std::isfinite(max_abs) && max_abs >= s.divisor * 1024.0; ++i) s = {s.divisor * 1024.0, units[i]};
  return s;
}

ValueScale metric_scale(const std::string& name, double max_abs) {
  switch (metric_info(name).unit) {
    case MetricUnit::kBytes: return byte_scale(max_abs);
    case MetricUnit::kNats: return {1.0, "nats"};
    default: return {};
  }
}

std::string metric_title(const std::string& name, bool per_head, const ValueScale& scale, bool describe) {
  MetricInfo info = metric_info(name);
  if (!describe) info.what = "";
  std::string out = name;
  if (*scale.unit) out += std::string(" [") + scale.unit + "]";
  if (*info.what || info.fraction()) {
    out += " (";
    out += info.what;
    if (info.fraction()) out += *info.what ? ", 0..1" : "0..1";
    out += ")";
  }
  if (per_head) out += std::string(", ") + kPerHeadMean;
  return out;
}

const std::vector<std::string>& live_run_scalar_names() {
  static const std::vector<std::string> names = {"perplexity",    "full_perplexity",    "compared_steps",
                                                 "first_divergence", "peak_kv_bytes", "full_peak_kv_bytes",
                                                 "peak_kv_ratio", "mean_kv_ratio"};
  return names;
}

std::string run_scalar_text(const std::string& name, double value) {
  char buf[64];
  if (!std::isfinite(value)) return "-";
  if (name == "first_divergence") {
    if (value < 0) return "none";
    std::snprintf(buf, sizeof buf, "step %.0f", value);
  } else if (name == "compared_steps") {
    std::snprintf(buf, sizeof buf, "%.0f", value);
  } else if (name.size() > 6 && name.compare(name.size() - 6, 6, "_bytes") == 0) {
    const ValueScale s = byte_scale(std::fabs(value));
    std::snprintf(buf, sizeof buf, "%.1f %s", value / s.divisor, s.unit);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", value);
  }
  return buf;
}

const char* run_scalar_description(const std::string& name) {
  if (name == "perplexity") return "perplexity of the reference continuation under this run, over its compared steps";
  if (name == "full_perplexity") return "the same tokens' perplexity under the full cache, over the same steps";
  if (name == "compared_steps") return "steps whose logits compare with the full cache's (free runs: until the texts part)";
  if (name == "first_divergence")
    return "first step whose choice of the next token differs from the full cache's (forced: top-1; free: the token generated)";
  if (name == "peak_kv_bytes")
    return "the engine's peak KV-cache bytes, every layer and KV head together (the prompt held whole during prefill "
           "included)";
  if (name == "full_peak_kv_bytes")
    return "the full cache's peak KV-cache bytes over the same steps, every layer and KV head";
  if (name == "peak_kv_ratio") return "peak_kv_bytes over the full cache's";
  if (name == "mean_kv_ratio") return "bytes held after each decode step over the full cache's, averaged over the steps";
  if (name == "block_size") return "the paged-allocation block of paged_bytes_freed, in tokens";
  return "";
}

std::string run_scalar_label(const std::string& name) {
  if (name == "perplexity") return "perplexity";
  if (name == "full_perplexity") return "full cache's perplexity";
  if (name == "compared_steps") return "compared steps";
  if (name == "first_divergence") return "first divergence";
  if (name == "peak_kv_bytes") return "peak KV memory, whole cache";
  if (name == "full_peak_kv_bytes") return "full cache's peak, whole cache";
  if (name == "peak_kv_ratio") return "peak / full cache's";
  if (name == "mean_kv_ratio") return "held / full cache's, mean";
  return name;
}

}  // namespace kvs
