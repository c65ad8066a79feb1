// Per-statistic defaults of the head grid.
#include "app/views/head_grid.h"

#include <algorithm>
#include <cmath>

namespace kvs {
namespace {

// The q-quantile of `values` (linear interpolation, NumPy's default); 0 when empty.
float quantile(std::vector<float> values, double q) {
  std::erase_if(values, [](float v) { return !std::isfinite(v); });
  if (values.empty()) return 0.0f;
  std::sort(values.begin(), values.end());
  const double pos = q * (double)(values.size() - 1);
  const size_t i = (size_t)std::floor(pos);
  const double f = pos - (double)i;
  if (i + 1 >= values.size()) return values.back();
  return (float)(values[i] + f * (values[i + 1] - values[i]));
}

}  // namespace

float default_head_tau(const std::string& stat, const std::vector<float>& values) {
  if (stat == "alpha") return quantile(values, 0.5);
  if (stat == "retrieval_score") return 0.1f;
  if (stat == "sink_mass" || stat == "locality") return 0.5f;
  return quantile(values, 0.9);
}

std::string head_stat_unit(const std::string& stat) { return stat == "entropy" ? "nats" : ""; }

std::string head_stat_description(const std::string& stat) {
  if (stat == "sink_mass") return "share of a decode row's attention mass on the first tokens";
  if (stat == "locality") return "share of a decode row's attention mass on the last keys";
  if (stat == "entropy") return "entropy of the decode rows, in nats (high: diffuse attention)";
  if (stat == "alpha") return "DuoAttention gate: share of mass outside sinks + recent (high: retrieval head)";
  if (stat == "retrieval_score") return "retrieval score: share of needle tokens copied by attending them";
  return "";
}

}  // namespace kvs
