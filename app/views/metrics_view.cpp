// Metrics: per run over decode steps (recall, top-k misses, KL, KV bytes, paged bytes, ... as the
// trace stores them under /runs/<name>/metrics), one plot per metric with a line per run, legend
// and hover values; clicking a plot moves the timeline.
#include <imgui.h>

#include <algorithm>

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
    // Legend: one colour per run, wrapped to the window; click to hide/show.
    const float right = ImGui::GetWindowContentRegionMax().x;
    for (size_t r = 0; r < t.runs.size(); ++r) {
      const float w = ImGui::GetTextLineHeight() + ImGui::GetStyle().ItemInnerSpacing.x +
                      ImGui::CalcTextSize(t.runs[r].name.c_str()).x;
      if (r > 0) {
        ImGui::SameLine(0, 14);
        if (ImGui::GetCursorPosX() + w > right) ImGui::NewLine();
      }
      if (legend_toggle(t.runs[r].name.c_str(), category_color((int)r), !hidden_[r])) hidden_[r] = !hidden_[r];
    }
    const int cols = ImGui::GetContentRegionAvail().x > 700 ? 2 : 1;
    const int rows = ((int)names_.size() + cols - 1) / cols;
    const float plot_h = std::max(70.0f, (ImGui::GetContentRegionAvail().y - rows * ImGui::GetTextLineHeightWithSpacing()) / rows - 6);
    const float plot_w = ImGui::GetContentRegionAvail().x / cols - 8;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (i % cols) ImGui::SameLine();
      ImGui::BeginGroup();
      ImGui::TextUnformatted(names_[i].c_str());
      std::vector<Series> series;
      for (size_t r = 0; r < t.runs.size(); ++r)
        if (!hidden_[r] && !values_[r][i].empty())
          series.push_back(Series{t.runs[r].name, category_color((int)r), values_[r][i]});
      const int clicked = line_plot(names_[i].c_str(), series, ImVec2(plot_w, plot_h), app.step, nullptr);
      if (clicked >= 0) app.set_step(clicked);
      ImGui::EndGroup();
    }
  }

  CsvTable csv(const AppState& app) const override {
    CsvTable c;
    c.header = {"run", "metric", "step", "value"};
    if (!app.trace) return c;
    for (size_t r = 0; r < values_.size(); ++r)
      for (size_t i = 0; i < names_.size(); ++i)
        for (size_t s = 0; s < values_[r][i].size(); ++s)
          c.add({app.trace->runs[r].name, names_[i], std::to_string(s), csv_number(values_[r][i][s])});
    return c;
  }

 private:
  void refresh(const AppState& app) {
    if (generation_ == app.generation) return;
    generation_ = app.generation;
    const TraceSnapshot& t = *app.trace;
    names_.clear();
    for (const RunData& r : t.runs)
      for (const NamedArray& m : r.metrics)
        if (std::find(names_.begin(), names_.end(), m.name) == names_.end()) names_.push_back(m.name);
    values_.assign(t.runs.size(), std::vector<std::vector<float>>(names_.size()));
    hidden_.assign(t.runs.size(), false);
    for (size_t r = 0; r < t.runs.size(); ++r)
      for (const NamedArray& m : t.runs[r].metrics) {
        const size_t i = std::find(names_.begin(), names_.end(), m.name) - names_.begin();
        values_[r][i] = per_step_series(m);
      }
  }

  int generation_ = -1;
  std::vector<std::string> names_;                       // metric names, union over runs
  std::vector<std::vector<std::vector<float>>> values_;  // [runs][metrics][n_steps]
  std::vector<bool> hidden_;                             // [runs]
};

}  // namespace

std::unique_ptr<View> make_metrics_view() { return std::make_unique<MetricsView>(); }

}  // namespace kvs
