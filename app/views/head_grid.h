// What the head grid says about each per-head statistic (the threshold tau its grid starts with,
// the unit of its values) and where its cells go in a panel. Free of ImGui, for the tests.
#pragma once
#include <string>
#include <vector>

namespace kvs {

// The tau a statistic starts with (each statistic keeps its own; one shared tau of 0.5 outlined
// 263 of 270 heads on entropy): alpha, the median of the gates (DuoAttention's default sparsity
// 0.5); retrieval_score, 0.1 (Wu et al.'s retrieval heads); sink_mass and locality, 0.5 (half
// the head's attention mass); entropy and other statistics, the 90th percentile of `values`,
// outlining the top tenth of the heads.
float default_head_tau(const std::string& stat, const std::vector<float>& values);

// The unit of a statistic's values ("nats" for entropy, "" for shares of attention mass and
// scores in [0, 1]) and a one-line description for the grid's caption.
std::string head_stat_unit(const std::string& stat);
std::string head_stat_description(const std::string& stat);

// Where the grid goes in a panel with avail_w x avail_h pixels of content: below its controls
// (controls_h tall), or beside them (a column controls_w wide on its right) at the panel's full
// height, whichever gives the larger cells; never below them in cells under kMinCellBelow px
// tall. header_h: the axis titles above the cells; label_w: the layer numbers on their left. A
// panel too narrow for the column still gets the grid below, its cells shrunk (it scrolls).
// Every size in pixels is at the default text size times text_scale (the text size over the
// default): the grid is laid out alike at any text size in a panel as much larger.
struct HeadGridLayout {
  bool beside = false;
  float cell_w = 0, cell_h = 0;
};
inline constexpr float kMinCellBelow = 6.0f;
// The height of a cell when the rows share grid_h pixels: 3 to 48 px (times text_scale).
float head_cell_height(float grid_h, int rows, float text_scale);
HeadGridLayout head_grid_layout(float avail_w, float avail_h, int rows, int cols, float controls_w, float controls_h,
                                float header_h, float label_w, float text_scale);

}  // namespace kvs
