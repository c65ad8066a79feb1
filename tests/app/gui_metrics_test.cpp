// What the Metrics and Compare views show (no window needed): metrics in a telling order with
// their unit and reduction, fractions on 0..1, bytes scaled; the points of a plot that get a dot;
// run colours that do not depend on the other runs and stay apart from each other and from the
// lanes' state colours.
#include <gtest/gtest.h>

#include <cmath>
#include <array>
#include <limits>

#include "analysis/metric_info.h"

#ifdef KVSCOPE_GUI
#include "app/gui/widgets.h"
#endif

namespace kvs {
namespace {

TEST(MetricInfo, MostTellingFirstNotAlphabetical) {
  std::vector<std::string> names = {"evicted", "hh_turnover", "inactive", "kept", "kl", "kv_bytes",
                                    "paged_bytes_freed", "recall", "ref_logprob", "top1_agree", "topk_miss", "zzz_new"};
  sort_metric_names(names);
  EXPECT_EQ(names, (std::vector<std::string>{"recall", "topk_miss", "kl", "top1_agree", "ref_logprob", "hh_turnover",
                                             "kept", "evicted", "inactive", "kv_bytes", "paged_bytes_freed", "zzz_new"}));
}

TEST(MetricInfo, FractionsAndUnits) {
  for (const char* f : {"recall", "topk_miss", "top1_agree", "hh_turnover", "peak_kv_ratio"})
    EXPECT_TRUE(metric_info(f).fraction()) << f;
  for (const char* f : {"kl", "kept", "kv_bytes", "ref_logprob"}) EXPECT_FALSE(metric_info(f).fraction()) << f;
  EXPECT_STREQ(byte_scale(512).unit, "B");
  EXPECT_STREQ(byte_scale(4096).unit, "KiB");
  EXPECT_DOUBLE_EQ(byte_scale(4096).divisor, 1024.0);
  EXPECT_STREQ(byte_scale(3.0 * 1024 * 1024).unit, "MiB");
  EXPECT_STREQ(metric_scale("kv_bytes", 4096).unit, "KiB");
  EXPECT_STREQ(metric_scale("kl", 1).unit, "nats");
  EXPECT_STREQ(metric_scale("recall", 1).unit, "");
}

TEST(MetricInfo, TitlesSayTheReductionAndUnit) {
  const std::string recall = metric_title("recall", true, {});
  EXPECT_NE(recall.find("mean per (layer, KV head)"), std::string::npos) << recall;
  EXPECT_NE(recall.find("0..1"), std::string::npos) << recall;
  const std::string bytes = metric_title("kv_bytes", true, byte_scale(8192), false);
  EXPECT_EQ(bytes, "kv_bytes [KiB], mean per (layer, KV head)");
  // kl is stored per step: no reduction to mention.
  EXPECT_EQ(metric_title("kl", false, metric_scale("kl", 1), false), "kl [nats]");
  NamedArray per_head{"recall", {3, 2, 2}, std::vector<float>(12)}, per_step{"kl", {3}, std::vector<float>(3)};
  EXPECT_TRUE(per_head_metric(per_head));
  EXPECT_FALSE(per_head_metric(per_step));
}

#ifdef KVSCOPE_GUI
const float nan = std::numeric_limits<float>::quiet_NaN();

// A free-mode live run compared at one step only: one finite value among NaNs. It was drawn
// nowhere (dots only for series of length 1); now it gets a dot.
TEST(LinePlot, IsolatedFinitePointsGetADot) {
  EXPECT_EQ(isolated_points({nan, 0.7f, nan, nan}, 1), std::vector<size_t>{1});
  EXPECT_EQ(isolated_points({0.7f, nan, nan}, 1), std::vector<size_t>{0});
  EXPECT_EQ(isolated_points({nan, nan, 0.5f}, 1), std::vector<size_t>{2});
  EXPECT_EQ(isolated_points({0.5f}, 1), std::vector<size_t>{0});
  EXPECT_TRUE(isolated_points({0.5f, 0.6f, nan, nan}, 1).empty());  // a line
  EXPECT_TRUE(isolated_points({nan, nan}, 1).empty());
  EXPECT_EQ(isolated_points({0.1f, 0.2f, nan, 0.4f, nan}, 1), std::vector<size_t>{3});
  // Decimated (every 2nd drawn): 0 and 2 are joined; 5 is alone off the grid; 6 is alone on it.
  EXPECT_EQ(isolated_points({0.1f, nan, 0.3f, nan, nan, 0.5f, 0.6f, nan, nan}, 2), (std::vector<size_t>{6}));
  EXPECT_EQ(isolated_points({0.1f, nan, 0.3f, nan, nan, 0.5f, nan, nan, nan}, 2), (std::vector<size_t>{5}));
}

double lab_distance(ImU32 a, ImU32 b) {
  auto lab = [](ImU32 c) {
    auto lin = [](double u) { u /= 255; return u > 0.04045 ? std::pow((u + 0.055) / 1.055, 2.4) : u / 12.92; };
    const double r = lin(c & 255), g = lin((c >> 8) & 255), bl = lin((c >> 16) & 255);
    const double X = (0.4124 * r + 0.3576 * g + 0.1805 * bl) / 0.95047, Y = 0.2126 * r + 0.7152 * g + 0.0722 * bl,
                 Z = (0.0193 * r + 0.1192 * g + 0.9505 * bl) / 1.08883;
    auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116; };
    return std::array<double, 3>{116 * f(Y) - 16, 500 * (f(X) - f(Y)), 200 * (f(Y) - f(Z))};
  };
  const auto x = lab(a), y = lab(b);
  return std::sqrt((x[0] - y[0]) * (x[0] - y[0]) + (x[1] - y[1]) * (x[1] - y[1]) + (x[2] - y[2]) * (x[2] - y[2]));
}

TEST(RunColor, DependsOnTheRunAloneAndShadesItsParameterSet) {
  // The colour comes from the run: the same whatever else is in the trace (it was the index).
  EXPECT_EQ(run_color("streamingllm_b64", "streamingllm", false), run_color("streamingllm_b64", "streamingllm", false));
  EXPECT_EQ(run_color("h2o_b64", "h2o", false), run_color("h2o_b16", "h2o", false));  // budget: same shade
  // The demo's pair differs in colour; a live run has its parameter set's colour (drawn dashed).
  const ImU32 sinks = run_color("streamingllm_b64", "streamingllm", false);
  const ImU32 no_sinks = run_color("streamingllm_sinks0_b64", "streamingllm", false);
  EXPECT_GT(lab_distance(sinks, no_sinks), 15.0);
  EXPECT_EQ(run_color("streamingllm_b32_free", "streamingllm", true), sinks);
  EXPECT_EQ(run_color("streamingllm_sinks0_b32_free", "streamingllm", true), no_sinks);
  RunData live;
  live.name = "h2o_b32_forced";
  live.policy = "h2o";
  live.eviction = "real";
  live.mode = "forced";
  EXPECT_EQ(run_color(live), run_color("h2o_b32", "h2o", false));
  EXPECT_TRUE(run_dashed(live));
}

TEST(RunColor, PoliciesAreClearlyApartAndNotLaneStateColours) {
  const std::vector<std::string> policies = {"full", "window", "streamingllm", "strided", "h2o", "tova",
                                             "snapkv", "pyramidkv", "adakv", "kvzip", "duoattention", "omnikv"};
  std::vector<ImU32> base;
  for (const auto& p : policies) base.push_back(run_color(p == "full" ? p : p + "_b16", p, false));
  for (size_t i = 0; i < base.size(); ++i) {
    for (size_t j = i + 1; j < base.size(); ++j)
      EXPECT_GT(lab_distance(base[i], base[j]), 35.0) << policies[i] << " vs " << policies[j];
    for (int s = 1; s < (int)CellState::kCount; ++s)
      EXPECT_GT(lab_distance(base[i], cell_state_color((CellState)s)), 35.0)
          << policies[i] << " vs the lanes' " << cell_state_name((CellState)s);
  }
  // A policy's run with other parameters (lighter) is not mistaken for another policy's run.
  for (size_t i = 0; i < policies.size(); ++i) {
    if (policies[i] == "full") continue;  // has no parameters
    const ImU32 shade = run_color(policies[i] + "_x1_b16", policies[i], false);
    EXPECT_GT(lab_distance(shade, base[i]), 10.0) << policies[i];
    for (size_t j = 0; j < base.size(); ++j)
      if (j != i) EXPECT_GT(lab_distance(shade, base[j]), 15.0) << policies[i] << "'s shade vs " << policies[j];
  }
}
#endif

}  // namespace
}  // namespace kvs
