// Per-statistic defaults of the head grid, and the placement of its cells.
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
  if (stat == "alpha") return "DuoAttention gate: how much a head needs its full cache (high: retrieval head)";
  if (stat == "retrieval_score") return "retrieval score: share of needle tokens copied by attending them";
  return "";
}

float head_cell_height(float grid_h, int rows, float text_scale) {
  return std::clamp(grid_h / (float)std::max(rows, 1), 3.0f * text_scale, 48.0f * text_scale);
}

HeadGridLayout head_grid_layout(float avail_w, float avail_h, int rows, int cols, float controls_w, float controls_h,
                                float header_h, float label_w, float text_scale) {
  const float s = text_scale;
  cols = std::max(cols, 1);
  // Cells fill the space (wider than tall when there are more layers than heads), within limits;
  // beside the controls no wider than 40 px, leaving the controls what the panel has to spare.
  const float below_h = avail_h - controls_h - header_h;
  const HeadGridLayout below{false, std::clamp((avail_w - label_w) / (float)cols, 4.0f * s, 64.0f * s),
                             head_cell_height(below_h, rows, s)};
  const float beside_w = (avail_w - label_w - controls_w) / (float)cols;
  if (beside_w < 8.0f * s) return below;
  const HeadGridLayout beside{true, std::min(beside_w, 40.0f * s), head_cell_height(avail_h - header_h, rows, s)};
  // The larger cells, but never below the controls in cells under kMinCellBelow px tall.
  const bool below_fits = below_h / (float)std::max(rows, 1) >= kMinCellBelow * s;
  return below_fits && below.cell_w * below.cell_h >= beside.cell_w * beside.cell_h ? below : beside;
}

}  // namespace kvs
