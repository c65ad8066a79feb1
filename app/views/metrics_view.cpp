// Metrics: per run over decode steps (recall, top-k misses, KL, KV bytes, paged bytes, ... as the
// trace stores them under /runs/<name>/metrics), one plot per metric with a line per run, legend
// and hover values; clicking a plot moves the timeline. Metrics stored per (layer, KV head) are
// shown as their mean over (layer, KV head); fractions on a fixed 0..1 axis; bytes in B, KiB or
// MiB; the most telling metrics first (metric_info.h).
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "analysis/metric_info.h"
#include "app/gui/fonts.h"
#include "app/gui/widgets.h"
#include "app/views/view.h"

namespace kvs {
namespace {

class MetricsView : public View {
 public:
  const char* id() const override { return "metrics"; }
  const char* title() const override { return "Metrics"; }

  void draw(AppState& app) override {
    if (!app.trace) {
      ImGui::TextDisabled("No trace open.");
      return;
    }
    refresh(app);
    if (names_.empty()) {
      ImGui::TextWrapped("No per-step metrics: simulate or re-run policies to compare them here.");
      return;
    }
    const TraceSnapshot& t = *app.trace;
    // Legend: one colour per run (runs drawn in one colour carry marks), wrapped to the window;
    // click to hide/show.
    const float right = ImGui::GetWindowContentRegionMax().x;
    for (size_t r = 0; r < t.runs.size(); ++r) {
      const float w = legend_toggle_width(t.runs[r].name.c_str(), marks_[r]);
      if (r > 0) {
        ImGui::SameLine(0, ui_px(14));
        if (ImGui::GetCursorPosX() + w > right) ImGui::NewLine();
      }
      if (legend_toggle(t.runs[r].name.c_str(), run_color(t.runs[r]), !hidden_[r], run_dashed(t.runs[r]), marks_[r]))
        hidden_[r] = !hidden_[r];
    }
    const int cols = ImGui::GetContentRegionAvail().x > ui_px(700) ? 2 : 1;
    const int rows = ((int)names_.size() + cols - 1) / cols;
    const float plot_h =
        std::max(ui_px(70), (ImGui::GetContentRegionAvail().y - rows * ImGui::GetTextLineHeightWithSpacing()) / rows -
                                ui_px(6));
    const float plot_w = ImGui::GetContentRegionAvail().x / cols - 8;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (i % cols) ImGui::SameLine();
      ImGui::BeginGroup();
      // Name, unit or range, reduction; what it measures on hover (long titles were clipped).
      const std::string title = metric_title(names_[i], per_head_[i], scales_[i], false);
      ImGui::TextUnformatted(title.c_str());
      if (ImGui::IsItemHovered()) title_tooltip(i);
      std::vector<Series> series;
      for (size_t r = 0; r < t.runs.size(); ++r)
        if (!hidden_[r] && !values_[r][i].empty()) {
          Series s{t.runs[r].name, run_color(t.runs[r]), values_[r][i], run_dashed(t.runs[r]), marks_[r]};
          for (float& v : s.y) v = (float)(v / scales_[i].divisor);
          series.push_back(std::move(s));
        }
      PlotAxis axis;
      axis.unit = scales_[i].unit;
      const MetricUnit unit = metric_info(names_[i]).unit;
      if (unit == MetricUnit::kFraction) axis.lo = 0.0f, axis.hi = 1.0f;
      else if (unit == MetricUnit::kCount || unit == MetricUnit::kBytes) axis.lo = 0.0f;  // from 0
      const int clicked = line_plot(names_[i].c_str(), series, ImVec2(plot_w, plot_h), app.step, nullptr, axis);
      if (clicked >= 0) app.set_step(clicked);
      ImGui::EndGroup();
    }
  }

  CsvTable csv(const AppState& app) const override {
    CsvTable c;
    c.header = {"run", "metric", "step", "value"};  // per-head metrics: the mean per (layer, KV head), in bytes etc.
    if (!app.trace) return c;
    for (size_t r = 0; r < values_.size(); ++r)
      for (size_t i = 0; i < names_.size(); ++i)
        for (size_t s = 0; s < values_[r][i].size(); ++s)
          c.add({app.trace->runs[r].name, names_[i], std::to_string(s), csv_number(values_[r][i][s])});
    return c;
  }

 private:
  void title_tooltip(size_t i) const {
    const MetricInfo info = metric_info(names_[i]);
    ImGui::BeginTooltip();
    ImGui::Text("%s: %s", names_[i].c_str(), *info.what ? info.what : "a per-step metric of the runs");
    if (per_head_[i])
      ImGui::TextUnformatted("Stored per (layer, KV head) for each step: the plot shows the mean over the layers\n"
                             "and KV heads. A policy can do well on average and still fail some heads (Lanes, Heads).");
    if (info.fraction()) ImGui::TextUnformatted("A fraction: the axis is fixed at 0..1.");
    if (info.unit == MetricUnit::kCount || info.unit == MetricUnit::kBytes) ImGui::TextUnformatted("The axis starts at 0.");
    if (info.unit == MetricUnit::kBytes)
      ImGui::Text("In %s per (layer, KV head) (the model's cache is this times layers x KV heads).", scales_[i].unit);
    ImGui::EndTooltip();
  }

  void refresh(const AppState& app) {
    if (generation_ == app.generation) return;
    generation_ = app.generation;
    const TraceSnapshot& t = *app.trace;
    names_.clear();
    for (const RunData& r : t.runs)
      for (const NamedArray& m : r.metrics)
        if (std::find(names_.begin(), names_.end(), m.name) == names_.end()) names_.push_back(m.name);
    sort_metric_names(names_);
    values_.assign(t.runs.size(), std::vector<std::vector<float>>(names_.size()));
    hidden_.assign(t.runs.size(), false);
    marks_ = run_marks(t.runs);
    per_head_.assign(names_.size(), false);
    std::vector<double> max_abs(names_.size(), 0.0);
    for (size_t r = 0; r < t.runs.size(); ++r)
      for (const NamedArray& m : t.runs[r].metrics) {
        const size_t i = std::find(names_.begin(), names_.end(), m.name) - names_.begin();
        values_[r][i] = per_step_series(m);
        per_head_[i] = per_head_[i] || per_head_metric(m);
        for (float v : values_[r][i])
          if (std::isfinite(v)) max_abs[i] = std::max(max_abs[i], (double)std::fabs(v));
      }
    scales_.clear();
    for (size_t i = 0; i < names_.size(); ++i) scales_.push_back(metric_scale(names_[i], max_abs[i]));
  }

  int generation_ = -1;
  std::vector<std::string> names_;                       // metric names, union over runs
  std::vector<std::vector<std::vector<float>>> values_;  // [runs][metrics][n_steps]
  std::vector<bool> hidden_;                             // [runs]
  std::vector<int> marks_;                               // [runs] run_marks: runs drawn alike told apart
  std::vector<bool> per_head_;                           // [metrics] stored per (layer, KV head)
  std::vector<ValueScale> scales_;                       // [metrics] unit the plot shows
};

}  // namespace

std::unique_ptr<View> make_metrics_view() { return std::make_unique<MetricsView>(); }

}  // namespace kvs
