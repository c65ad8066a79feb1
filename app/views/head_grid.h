// What the head grid says about each per-head statistic: the threshold tau its grid starts with
// and the unit of its values. Free of ImGui, for the tests.
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

}  // namespace kvs
