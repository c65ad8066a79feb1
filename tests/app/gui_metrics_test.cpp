// What the Metrics and Compare views show (no window needed): metrics in a telling order with
// their unit and reduction, fractions on 0..1, bytes scaled; the points of a plot that get a dot;
// run colours that do not depend on the other runs and stay apart from each other and from the
// lanes' state colours.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
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

// Compare's whole-run table and the CLI write a live run's scalars so: bytes scaled, divergence
// as a step or none, counts whole; every scalar a live run stores has a description.
TEST(MetricInfo, RunScalarsAreWrittenForReading) {
  EXPECT_EQ(run_scalar_text("peak_kv_bytes", 71680), "70.0 KiB");
  EXPECT_EQ(run_scalar_text("full_peak_kv_bytes", 3.5 * 1024 * 1024), "3.5 MiB");
  EXPECT_EQ(run_scalar_text("first_divergence", -1), "none");
  EXPECT_EQ(run_scalar_text("first_divergence", 7), "step 7");
  EXPECT_EQ(run_scalar_text("compared_steps", 40), "40");
  EXPECT_EQ(run_scalar_text("perplexity", 110.94), "110.9");
  EXPECT_EQ(run_scalar_text("perplexity", std::nan("")), "-");
  for (const char* s : {"perplexity", "full_perplexity", "compared_steps", "first_divergence", "peak_kv_bytes",
                        "full_peak_kv_bytes", "peak_kv_ratio", "mean_kv_ratio", "block_size"})
    EXPECT_STRNE(run_scalar_description(s), "") << s;
  EXPECT_STREQ(run_scalar_description("zzz_new"), "");
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

// CIELAB (D65) of a packed sRGB colour.
std::array<double, 3> lab(ImU32 c) {
  auto lin = [](double u) { u /= 255; return u > 0.04045 ? std::pow((u + 0.055) / 1.055, 2.4) : u / 12.92; };
  const double r = lin(c & 255), g = lin((c >> 8) & 255), bl = lin((c >> 16) & 255);
  const double X = (0.4124 * r + 0.3576 * g + 0.1805 * bl) / 0.95047, Y = 0.2126 * r + 0.7152 * g + 0.0722 * bl,
               Z = (0.0193 * r + 0.1192 * g + 0.9505 * bl) / 1.08883;
  auto f = [](double t) { return t > 0.008856 ? std::cbrt(t) : 7.787 * t + 16.0 / 116; };
  return {116 * f(Y) - 16, 500 * (f(X) - f(Y)), 200 * (f(Y) - f(Z))};
}

// CIEDE2000 colour difference (Sharma, Wu and Dalal 2005): unlike plain CIELAB distance it does
// not inflate differences between saturated colours (two magentas 52 apart in CIELAB are 16 here).
double ciede2000(const std::array<double, 3>& lab1, const std::array<double, 3>& lab2) {
  const double kPi = 3.14159265358979323846;
  auto rad = [&](double deg) { return deg * kPi / 180; };
  auto hue = [&](double b, double a) { return a == 0 && b == 0 ? 0.0 : std::fmod(std::atan2(b, a) * 180 / kPi + 360, 360); };
  const auto [L1, a1, b1] = lab1;
  const auto [L2, a2, b2] = lab2;
  const double c_mean = (std::hypot(a1, b1) + std::hypot(a2, b2)) / 2;
  const double g = 0.5 * (1 - std::sqrt(std::pow(c_mean, 7) / (std::pow(c_mean, 7) + std::pow(25.0, 7))));
  const double a1p = (1 + g) * a1, a2p = (1 + g) * a2;
  const double C1 = std::hypot(a1p, b1), C2 = std::hypot(a2p, b2);
  const double h1 = hue(b1, a1p), h2 = hue(b2, a2p);
  double dh = 0;
  if (C1 * C2 != 0) dh = h2 - h1 > 180 ? h2 - h1 - 360 : h2 - h1 < -180 ? h2 - h1 + 360 : h2 - h1;
  const double dL = L2 - L1, dC = C2 - C1, dH = 2 * std::sqrt(C1 * C2) * std::sin(rad(dh / 2));
  const double L = (L1 + L2) / 2, C = (C1 + C2) / 2;
  double h = h1 + h2;
  if (C1 * C2 != 0) h = std::fabs(h1 - h2) <= 180 ? (h1 + h2) / 2 : h1 + h2 < 360 ? (h1 + h2 + 360) / 2 : (h1 + h2 - 360) / 2;
  const double t = 1 - 0.17 * std::cos(rad(h - 30)) + 0.24 * std::cos(rad(2 * h)) + 0.32 * std::cos(rad(3 * h + 6)) -
                   0.20 * std::cos(rad(4 * h - 63));
  const double rc = 2 * std::sqrt(std::pow(C, 7) / (std::pow(C, 7) + std::pow(25.0, 7)));
  const double rt = -std::sin(rad(60 * std::exp(-std::pow((h - 275) / 25, 2)))) * rc;
  const double sl = 1 + 0.015 * (L - 50) * (L - 50) / std::sqrt(20 + (L - 50) * (L - 50));
  const double sc = 1 + 0.045 * C, sh = 1 + 0.015 * C * t;
  return std::sqrt(std::pow(dL / sl, 2) + std::pow(dC / sc, 2) + std::pow(dH / sh, 2) + rt * (dC / sc) * (dH / sh));
}
double ciede2000(ImU32 a, ImU32 b) { return ciede2000(lab(a), lab(b)); }

TEST(RunColor, Ciede2000AsSharmasTestData) {
  EXPECT_NEAR(ciede2000({50, 2.6772, -79.7751}, {50, 0, -82.7485}), 2.0425, 1e-4);
  EXPECT_NEAR(ciede2000({50, 0, 0}, {50, -1, 2}), 2.3669, 1e-4);
  EXPECT_NEAR(ciede2000({50, 2.5, 0}, {73, 25, -18}), 27.1492, 1e-4);
  EXPECT_NEAR(ciede2000({60.2574, -34.0099, 36.2677}, {60.4626, -34.1751, 39.4387}), 1.2644, 1e-4);
}

TEST(RunColor, DependsOnTheRunAloneAndShadesItsParameterSet) {
  // The colour comes from the run: the same whatever else is in the trace (it was the index).
  EXPECT_EQ(run_color("streamingllm_b64", "streamingllm", false), run_color("streamingllm_b64", "streamingllm", false));
  EXPECT_EQ(run_color("h2o_b64", "h2o", false), run_color("h2o_b16", "h2o", false));  // budget: same shade
  // The demo's pair differs in colour; a live run has its parameter set's colour (drawn dashed).
  const ImU32 sinks = run_color("streamingllm_b64", "streamingllm", false);
  const ImU32 no_sinks = run_color("streamingllm_sinks0_b64", "streamingllm", false);
  EXPECT_GE(ciede2000(sinks, no_sinks), 10.0);
  EXPECT_EQ(run_color("streamingllm_b32_free", "streamingllm", true), sinks);
  EXPECT_EQ(run_color("streamingllm_sinks0_b32_free", "streamingllm", true), no_sinks);
  RunData live;
  live.name = "h2o_b32_forced";
  live.policy = "h2o";
  live.eviction = "real";
  live.mode = "forced";
  EXPECT_EQ(run_color(live), run_color("h2o_b32", "h2o", false));
  EXPECT_TRUE(run_dashed(live));
  // OmniKV's filters, the optimizer's per trace by default, are not a parameter set of their own.
  const ImU32 omnikv = run_color("omnikv_b48", "omnikv", false);
  EXPECT_EQ(run_color("omnikv_filters0-3-12_b48", "omnikv", false), omnikv);
  EXPECT_EQ(run_color("omnikv_filters2_b16_forced", "omnikv", true), omnikv);
  EXPECT_NE(run_color("omnikv_filters0-3-12_wait2_b48", "omnikv", false), omnikv);
  EXPECT_NE(run_color("omnikv_filters1_frac0.2_b11", "omnikv", false), omnikv);
}

// Runs drawn in one colour and style get marks in order of budget; a run drawn unlike every
// other gets none (a budget sweep of one policy was three lines of one colour).
TEST(RunMarks, RunsDrawnAlikeGetDistinctMarksInOrderOfBudget) {
  auto run = [](std::string name, std::string policy, int budget, bool live = false) {
    RunData r;
    r.name = std::move(name);
    r.policy = std::move(policy);
    r.budget = budget;
    if (live) r.eviction = "real";
    return r;
  };
  const std::vector<RunData> runs = {run("h2o_b32", "h2o", 32),
                                     run("h2o_b16", "h2o", 16),
                                     run("tova_b16", "tova", 16),
                                     run("h2o_b16_forced", "h2o", 16, true),
                                     run("streamingllm_sinks0_b32", "streamingllm", 32),
                                     run("streamingllm_sinks2_b16", "streamingllm", 16),
                                     run("h2o_b64", "h2o", 64)};
  EXPECT_EQ(run_marks(runs), (std::vector<int>{2, 1, 0, 0, 2, 1, 3}));
  EXPECT_EQ(run_marks({}), std::vector<int>{});
  // Past kMarkShapes runs drawn alike the shapes repeat.
  std::vector<RunData> sweep;
  for (int b = 1; b <= kMarkShapes + 1; ++b) sweep.push_back(run("window_b" + std::to_string(b), "window", b));
  const std::vector<int> marks = run_marks(sweep);
  EXPECT_EQ(marks.front(), 1);
  EXPECT_EQ(marks[kMarkShapes - 1], kMarkShapes);
  EXPECT_EQ(marks.back(), 1);
}

TEST(RunColor, PoliciesAreClearlyApartAndNotLaneStateColours) {
  // In CIEDE2000, on the dark plot background: streamingllm's magenta and duoattention's pink were
  // 16 apart and looked alike on a projector.
  const std::vector<std::string> policies = {"full", "window", "streamingllm", "strided", "h2o", "tova",
                                             "snapkv", "pyramidkv", "adakv", "kvzip", "duoattention", "omnikv"};
  std::vector<ImU32> base;
  for (const auto& p : policies) base.push_back(run_color(p == "full" ? p : p + "_b16", p, false));
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_GE(lab(base[i])[0], 55.0) << policies[i] << " is too dark to read on the plots' background";
    for (size_t j = i + 1; j < base.size(); ++j)
      EXPECT_GE(ciede2000(base[i], base[j]), 20.0) << policies[i] << " vs " << policies[j];
    for (int s = 1; s < (int)CellState::kCount; ++s)
      EXPECT_GE(ciede2000(base[i], cell_state_color((CellState)s)), 14.0)
          << policies[i] << " vs the lanes' " << cell_state_name((CellState)s);
  }
  // A policy's run with other parameters (lighter) is not mistaken for another policy's run, with
  // its defaults or with other parameters (window's and strided's shades were 9.5 apart), nor for
  // a lane state.
  std::vector<ImU32> shades(policies.size());
  for (size_t i = 0; i < policies.size(); ++i) {
    if (policies[i] == "full") continue;  // has no parameters
    shades[i] = run_color(policies[i] + "_x1_b16", policies[i], false);
    EXPECT_GE(ciede2000(shades[i], base[i]), 10.0) << policies[i];
    for (size_t j = 0; j < base.size(); ++j) {
      if (j == i) continue;
      EXPECT_GE(ciede2000(shades[i], base[j]), 15.0) << policies[i] << "'s shade vs " << policies[j];
      if (j < i && policies[j] != "full") {
        EXPECT_GE(ciede2000(shades[i], shades[j]), 15.0) << policies[i] << "'s shade vs " << policies[j] << "'s";
      }
    }
    for (int s = 1; s < (int)CellState::kCount; ++s)
      EXPECT_GE(ciede2000(shades[i], cell_state_color((CellState)s)), 10.0)
          << policies[i] << "'s shade vs the lanes' " << cell_state_name((CellState)s);
  }
}
#endif

}  // namespace
}  // namespace kvs
