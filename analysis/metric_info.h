// What a run's per-step metric is, for display: its place in the order the views show metrics
// in (the most telling first), its unit, whether it is a fraction in [0, 1], a one-line
// description, and how a per-(layer, KV head) metric was reduced to one value per step.
#pragma once
#include <string>
#include <vector>

#include "analysis/trace.h"

namespace kvs {

enum class MetricUnit { kNone, kFraction, kCount, kBytes, kNats };

struct MetricInfo {
  int rank = 100;                        // display order; unknown metrics after the known ones
  MetricUnit unit = MetricUnit::kNone;
  const char* what = "";                 // what it measures, one line ("" when unknown)
  bool fraction() const { return unit == MetricUnit::kFraction; }
};

MetricInfo metric_info(const std::string& name);

// Metric names in display order: recall, topk_miss, kl, top1_agree, ref_logprob, hh_turnover,
// kept, evicted, inactive, kv_bytes, paged_bytes_freed, then unknown ones alphabetically.
void sort_metric_names(std::vector<std::string>& names);

// A metric stored per (layer, KV head) ([n_steps, L, Hkv]) rather than per step ([n_steps]): the
// views and the CLI show its mean over (layer, KV head).
inline bool per_head_metric(const NamedArray& m) { return m.dims.size() > 1; }

// How the views write a step's value: "mean per (layer, KV head)" for per-head metrics.
inline constexpr const char* kPerHeadMean = "mean per (layer, KV head)";

// A unit to show byte values in: the value / divisor, followed by `unit` ("B", "KiB", "MiB",
// "GiB"), chosen so that `max_abs` is at least 1 in it.
struct ValueScale {
  double divisor = 1.0;
  const char* unit = "";
};
ValueScale byte_scale(double max_abs);

// The scale of a metric's values (bytes: byte_scale of max_abs; others: 1, with "nats" for KL and
// log-probabilities, "" for fractions and counts).
ValueScale metric_scale(const std::string& name, double max_abs);

// Plot title / table label: "recall (attention mass on the kept keys, 0..1), mean per (layer,
// KV head)"; the unit in brackets for bytes and nats ("kv_bytes [KiB] (bytes of K and V held),
// mean per ..."). Without `describe`, no description: "recall (0..1), mean per (layer, KV head)".
std::string metric_title(const std::string& name, bool per_head, const ValueScale& scale, bool describe = true);

// A run's whole-run number (a live run's scalar, /runs/<name> attribute) as the views write it:
// bytes in KiB/MiB, first_divergence as "step N" or "none", step counts whole, others to 4
// significant digits.
std::string run_scalar_text(const std::string& name, double value);
// The scalars a live run stores, in reading order (perplexity, full_perplexity, compared_steps,
// first_divergence, then its KV bytes and ratios); block_size, every run's setting, is not one.
const std::vector<std::string>& live_run_scalar_names();
// One line on what a run scalar is ("" when unknown).
const char* run_scalar_description(const std::string& name);
// A run scalar's name for a table row ("peak KV memory, whole cache"); the name itself when unknown.
std::string run_scalar_label(const std::string& name);

}  // namespace kvs
