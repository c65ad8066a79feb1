// Head grid: layers x heads coloured by a per-head statistic (alpha, sink mass, locality, entropy,
// retrieval score); a tau slider splits retrieval from streaming heads; a click selects the head
// in every view; a panel too short for the grid below its controls gets it beside them. Statistics
// come from /heads/* in the trace, else are computed from its decode rows in the background
// (analysis/head_stats.h); the retrieval score, which needs the model, is computed on the
// trace's model on request and stored in the trace.
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include <filesystem>
#include <map>
#include <optional>
#include <utility>

#include "analysis/head_stats.h"
#include "app/cli/device_flag.h"
#include "app/cli/heads_model.h"
#include "app/cli/policy_setup.h"
#include "inference/loader.h"
#include "app/gui/fonts.h"
#include "app/gui/colormap.h"
#include "app/gui/script.h"
#include "app/gui/widgets.h"
#include "app/views/head_grid.h"
#include "app/views/view.h"

namespace kvs {
namespace {

struct HeadGrid {
  std::string name;
  std::string source;      // "Stored in the trace[: <its source attribute>]" or "Computed from the decode rows"
  int rows = 0, cols = 0;  // layers x (query or KV) heads
  std::vector<float> v;    // [rows, cols]
};

// The smallest and largest value of a grid, the ends of its colour scale.
std::pair<float, float> value_range(const HeadGrid& g) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (float x : g.v) lo = std::min(lo, x), hi = std::max(hi, x);
  return {lo, hi};
}

// Width of the statistic combo and, in a column beside the grid, of every control (their labels
// inside them or in their hovers); the gap between the grid and that column. Stacked above the
// grid: the tau slider's and the colour scale's widths, the gap between the scale and the counts,
// and the least room beside the scale for them (narrower, they go below it: wrapped in a narrow
// strip they took nine lines at 1024x768 and pushed the grid out of the panel). Pixels at the
// default text size (ui_px).
constexpr float kControlsWidth = 150.0f, kColumnGap = 12.0f;
constexpr float kTauWidth = 140.0f, kScaleWidth = 160.0f, kCountsGap = 12.0f, kCountsMinWidth = 200.0f;

// The width of a framed item `width` wide with its label on its right.
float labelled_width(float width, const char* label) {
  return width + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x;
}

// The mark of the heads at or above tau.
const ImU32 kTauColor = IM_COL32(255, 80, 80, 255);

class HeadsView : public View {
 public:
  const char* id() const override { return "heads"; }
  const char* title() const override { return "Head grid"; }

  void draw(AppState& app) override {
    if (!app.trace) {
      ImGui::TextDisabled("No trace open.");
      return;
    }
    refresh(app);
    if (grids_.empty()) {
      ImGui::TextDisabled(computing_ ? "Computing head statistics..." : "No head statistics (the trace has no decode steps).");
      return;
    }
    for (int i = 0; i < (int)grids_.size() && !want_stat_.empty(); ++i)
      if (grids_[i].name == want_stat_) stat_ = i, want_stat_.clear();
    stat_ = std::clamp(stat_, 0, (int)grids_.size() - 1);
    const HeadGrid& g = grids_[stat_];
    const float label_w = std::max(ui_px(28), ImGui::CalcTextSize("layer").x + ui_px(6));
    const float header_h = 2 * ImGui::GetTextLineHeight() + ui_px(4);
    const float controls_w = ui_px(kColumnGap) + column_width(g);
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    // The controls' height stacked above the grid: as measured when last drawn so at this width,
    // else as estimated.
    const bool measured = stacked_.width == avail.x && stacked_.stat == g.name;
    const float controls_h = measured ? stacked_.height : stacked_controls_height(g, avail.x);
    HeadGridLayout layout = head_grid_layout(avail.x, avail.y, g.rows, g.cols, controls_w, controls_h, header_h, label_w,
                                               ui_px(1));
    if (!layout.beside) {
      const float y0 = ImGui::GetCursorPosY();
      draw_controls(app, g, false);
      stacked_ = {avail.x, g.name, ImGui::GetCursorPosY() - y0};
      // The cells take the height the controls left (the estimate above only placed the grid).
      layout.cell_h = head_cell_height(ImGui::GetContentRegionAvail().y - header_h, g.rows, ui_px(1));
      draw_grid(app, g, layout, label_w, header_h);
      return;
    }
    // A short panel: the grid at its full height on the left, the controls in a column beside it.
    ImGui::BeginGroup();
    draw_grid(app, g, layout, label_w, header_h);
    ImGui::EndGroup();
    ImGui::SameLine(0, ui_px(kColumnGap));
    ImGui::BeginGroup();
    draw_controls(app, g, true);
    ImGui::EndGroup();
  }

  CsvTable csv(const AppState& app) const override {
    CsvTable c;
    c.header = {"statistic", "layer", "head", "value", "source"};
    for (const HeadGrid& g : grids_)
      for (int l = 0; l < g.rows; ++l)
        for (int h = 0; h < g.cols; ++h)
          c.add({g.name, std::to_string(l), std::to_string(h), csv_number(g.v[(size_t)l * g.cols + h]), g.source});
    return c;
  }

  bool command(AppState& app, const std::string& verb, const std::string& arg) override {
    if (verb == "tau") {  // the statistic shown (or the first, while they are computed)
      const float v = script_number(verb, arg, -1e30f, 1e30f);
      if (!grids_.empty()) tau_for(grids_[std::clamp(stat_, 0, (int)grids_.size() - 1)]) = v;
      else pending_tau_ = v;
      return true;
    }
    if (verb == "retrieval") {
      script_trace(app, verb, arg);
      score_retrieval(app);
      return true;
    }
    if (verb == "stat") {
      script_trace(app, verb, arg);  // refresh reads the trace
      refresh(app);
      app.engine.wait_idle();
      app.engine.drain();
      std::string names;
      for (int i = 0; i < (int)grids_.size(); ++i) {
        if (grids_[i].name == arg) {
          stat_ = i;
          return true;
        }
        names += (names.empty() ? "" : ", ") + grids_[i].name;
      }
      throw script_error(verb, arg, "names no statistic of the trace (" + (names.empty() ? std::string("none") : names) + ")");
    }
    return false;
  }

 private:
  void refresh(AppState& app) {
    if (generation_ == app.generation) return;
    generation_ = app.generation;
    grids_.clear();
    if (app.trace->path != taus_path_) taus_.clear(), taus_path_ = app.trace->path;  // a reload keeps them
    const TraceSnapshot& t = *app.trace;
    const ModelShape& m = t.meta.shape;
    for (size_t i = 0; i < t.head_stats.size(); ++i) {
      const NamedArray& a = t.head_stats[i];
      const int cols = (int)a.dims[1];
      if ((int)a.dims[0] != m.n_layers || (cols != m.n_heads && cols != m.n_kv_heads)) continue;
      const std::string& source = t.head_stat_sources[i];
      grids_.push_back(HeadGrid{a.name, source.empty() ? "Stored in the trace" : "Stored in the trace: " + source,
                                (int)a.dims[0], cols, a.data});
    }
    if (t.n_steps() == 0 || !app.reader) return;
    // Compute what the trace lacks from its decode rows, in the background.
    computing_ = true;
    auto reader = app.reader;
    const int gen = app.generation;
    app.engine.submit("head-stats", "Computing head statistics", [this, &app, reader, gen, m](JobContext& ctx) {
      std::vector<HeadGrid> extra;
      try {
        const HeadStats s = head_stats(*reader);
        ctx.progress(0.6f);
        extra.push_back(HeadGrid{"sink_mass", "Computed from the decode rows", m.n_layers, m.n_heads, s.sink_mass});
        extra.push_back(HeadGrid{"locality", "Computed from the decode rows", m.n_layers, m.n_heads, s.locality});
        extra.push_back(HeadGrid{"entropy", "Computed from the decode rows", m.n_layers, m.n_heads, s.entropy});
        if (!ctx.cancelled())
          extra.push_back(HeadGrid{"alpha", "profiled: mass outside 4 sinks + 32 recent", m.n_layers, m.n_kv_heads,
                                   profile_alpha(*reader, 4, 32)});
      } catch (const std::exception& e) {
        const std::string message = e.what();
        app.engine.post([&app, message] { app.error(message); });
      }
      app.engine.post([this, &app, gen, extra = std::move(extra)] {
        computing_ = false;
        if (gen != app.generation) return;
        for (const HeadGrid& g : extra) {
          const bool have = std::any_of(grids_.begin(), grids_.end(), [&](const HeadGrid& x) { return x.name == g.name; });
          if (!have) grids_.push_back(g);
        }
      });
    });
  }

  // The statistic, its tau, the retrieval button, the colour scale with the counts and the
  // statistic's description. In a column (beside the grid) each takes its own row, column_width
  // wide: the combo's label in its hover, tau's in the slider.
  void draw_controls(AppState& app, const HeadGrid& g, bool column) {
    ImGui::SetNextItemWidth(column ? column_width(g) : ui_px(kControlsWidth));
    if (ImGui::BeginCombo(column ? "##statistic" : "statistic", g.name.c_str())) {
      for (int i = 0; i < (int)grids_.size(); ++i)
        if (ImGui::Selectable(grids_[i].name.c_str(), i == stat_)) stat_ = i;
      ImGui::EndCombo();
    }
    const std::string description = head_stat_description(g.name);
    if (ImGui::IsItemHovered() && (column || !description.empty()))
      ImGui::SetTooltip("%s%s", column ? "statistic: " : "",
                        description.empty() ? g.name.c_str() : description.c_str());
    const auto [lo, hi] = value_range(g);
    const std::string unit = head_stat_unit(g.name);
    float& tau = tau_for(g);
    if (!column) same_line_if_fits(labelled_width(ui_px(kTauWidth), "tau"));
    ImGui::SetNextItemWidth(column ? column_width(g) : ui_px(kTauWidth));
    // tau lives on [0, 1] for alpha and scores; other statistics (entropy in nats) get their range.
    // Each statistic keeps its own (one shared 0.5 outlined nearly every head on entropy).
    const std::string format = std::string(column ? "tau " : "") + (unit.empty() ? "%.3g" : "%.3g " + unit);
    ImGui::SliderFloat(column ? "##tau" : "tau", &tau, std::min(0.0f, lo), std::max(1.0f, hi), format.c_str());
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("Heads at or above tau are marked red (outlined, or in small cells a bar on their left);\n"
                        "each statistic has its own (default %.3g).",
                        default_head_tau(g.name, g.v));
    retrieval_button(app, column);  // after the slider: the row's last item may run past a narrow window
    const auto [lo_s, hi_s] = scale_labels(g);
    const float spacing = ImGui::GetStyle().ItemSpacing.x;
    const float bar_w = column ? column_width(g) - ImGui::CalcTextSize(lo_s.c_str()).x -
                                     ImGui::CalcTextSize(hi_s.c_str()).x - 2 * spacing
                               : ui_px(kScaleWidth);
    color_bar(Colormap::kViridis, lo_s.c_str(), hi_s.c_str(), std::max(bar_w, ui_px(40)));
    // The counts beside the scale, wrapped rather than cut at the window's edge, or below it where
    // the room beside is narrow.
    if (!column) same_line_if_fits(ui_px(kCountsMinWidth), ui_px(kCountsGap));
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    const std::string counts = counts_text(g, tau);
    const float wrap_w = ImGui::GetContentRegionAvail().x;
    if (column && ImGui::CalcTextSize(counts.c_str(), nullptr, false, wrap_w).y > ImGui::GetContentRegionAvail().y) {
      // A column shorter than the counts wrapped: how many heads are marked, the whole in its hover.
      ImGui::Text("%d of %d heads >= tau", heads_at_or_above(g, tau), (int)g.v.size());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", counts.c_str());
    } else {
      ImGui::TextWrapped("%s", counts.c_str());
    }
    // The description (also the statistic's tooltip) only where the grid still fits below it, or
    // in a column where the panel holds it whole: in a short panel the cells come first.
    const float text_h = ImGui::GetTextLineHeightWithSpacing();
    const float grid_min_h = column ? 0.0f : 3 * text_h + kMinCellBelow * g.rows;
    const float description_h = column ? ImGui::CalcTextSize(description.c_str(), nullptr, false,
                                                             ImGui::GetContentRegionAvail().x).y
                                       : text_h;
    if (!description.empty() && ImGui::GetContentRegionAvail().y >= grid_min_h + description_h + text_h)
      ImGui::TextWrapped("%s", description.c_str());
    ImGui::PopStyleColor();
  }

  // The height of the controls stacked above the grid in a panel avail_w wide, as draw_controls
  // lays them out (near enough for a first frame; then stacked_ has it): the statistic and tau, the retrieval button on a row of its own where it does
  // not fit beside them, the colour scale with the counts wrapped beside it.
  float stacked_controls_height(const HeadGrid& g, float avail_w) {
    const ImGuiStyle& style = ImGui::GetStyle();
    const float text_h = ImGui::GetTextLineHeight();
    float h = ImGui::GetFrameHeightWithSpacing();
    const float row = labelled_width(ui_px(kControlsWidth), "statistic") + style.ItemSpacing.x +
                      labelled_width(ui_px(kTauWidth), "tau");
    if (row > avail_w) h += ImGui::GetFrameHeightWithSpacing();  // tau on a row of its own
    if (!has_retrieval_scores() && row + style.ItemSpacing.x + button_width("score retrieval heads") > avail_w)
      h += text_h + style.ItemSpacing.y;
    const auto [lo_s, hi_s] = scale_labels(g);
    const float scale_w = ImGui::CalcTextSize(lo_s.c_str()).x + ui_px(kScaleWidth) + ImGui::CalcTextSize(hi_s.c_str()).x +
                          2 * style.ItemSpacing.x + ui_px(kCountsGap);
    const bool counts_below = avail_w - scale_w < ui_px(kCountsMinWidth);
    const float counts_h = ImGui::CalcTextSize(counts_text(g, tau_for(g)).c_str(), nullptr, false,
                                               std::max(counts_below ? avail_w : avail_w - scale_w, 1.0f)).y;
    const float counts_rows = counts_below ? text_h + style.ItemSpacing.y + counts_h : std::max(text_h, counts_h);
    return h + counts_rows + style.ItemSpacing.y;
  }

  // How many heads tau splits off, as the line beside the colour scale says it.
  static std::string counts_text(const HeadGrid& g, float tau) {
    const int above = heads_at_or_above(g, tau);
    const bool gate = g.name == "alpha" || g.name == "retrieval_score";  // tau splits retrieval/streaming
    char buf[160];  // the counts; the source (a model's path among them) follows whole
    std::snprintf(buf, sizeof buf, "%d of %d heads >= tau %s, %d below%s. ", above, (int)g.v.size(),
                  gate ? "(retrieval: full cache, marked red)" : "(marked red)", (int)g.v.size() - above,
                  gate ? " (streaming: sinks + recent)" : "");
    return buf + g.source;
  }

  static int heads_at_or_above(const HeadGrid& g, float tau) {
    return (int)std::count_if(g.v.begin(), g.v.end(), [tau](float x) { return x >= tau; });
  }

  // The ends of the colour scale with the statistic's unit.
  static std::pair<std::string, std::string> scale_labels(const HeadGrid& g) {
    const auto [lo, hi] = value_range(g);
    const std::string unit = head_stat_unit(g.name);
    char lo_s[32], hi_s[32];
    std::snprintf(lo_s, sizeof lo_s, "%.3g%s", lo, unit.empty() ? "" : (" " + unit).c_str());
    std::snprintf(hi_s, sizeof hi_s, "%.3g%s", hi, unit.empty() ? "" : (" " + unit).c_str());
    return {lo_s, hi_s};
  }

  // The column beside the grid: kControlsWidth, or what the colour scale takes with a bar of
  // 40 px between its ends' labels (stories260K's "2.86e-06 ... 0.0747" ran 10 px past it).
  static float column_width(const HeadGrid& g) {
    const auto [lo_s, hi_s] = scale_labels(g);
    return std::max(ui_px(kControlsWidth), ImGui::CalcTextSize(lo_s.c_str()).x + ImGui::CalcTextSize(hi_s.c_str()).x +
                                        2 * ImGui::GetStyle().ItemSpacing.x + ui_px(40));
  }

  bool has_retrieval_scores() const {
    return std::any_of(grids_.begin(), grids_.end(), [](const HeadGrid& g) { return g.name == "retrieval_score"; });
  }

  // Without retrieval scores in the trace: a button that scores the heads on the trace's model.
  void retrieval_button(AppState& app, bool column) {
    if (has_retrieval_scores()) return;
    if (!column) same_line_if_fits(button_width("score retrieval heads"));
    ImGui::BeginDisabled(app.engine.busy());
    if (ImGui::SmallButton("score retrieval heads")) score_retrieval(app);
    ImGui::EndDisabled();
    if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("Run the trace's model on needle prompts (Wu et al.) and store each head's retrieval score\n"
                        "in the trace (/heads/retrieval_score); a few seconds for SmolLM2-135M on two cores.");
  }

  // Scores the retrieval heads on the trace's model in the background, stores them, reopens the
  // trace and shows them (as `kvscope heads trace.h5 --model M`).
  void score_retrieval(AppState& app) {
    const std::string path = app.trace->path;
    const TraceMeta meta = app.trace->meta;
    want_stat_ = "retrieval_score";
    app.engine.submit("engine", "Scoring retrieval heads on " + meta.model_path, [&app, path, meta](JobContext&) {
      try {
        if (meta.model_path.empty() || !std::filesystem::exists(meta.model_path))
          throw input_error("retrieval scores", "need the trace's model, and '" + meta.model_path + "' is not there");
        const Model model = load_model(meta.model_path);
        check_model_matches(model, meta);
        const auto tok = load_tokenizer(model, meta.tokenizer_path);
        const KvDtype kv = recorded_storage(meta).kv;  // as the trace was recorded
        store_retrieval_scores(path, model, score_retrieval_heads(model, *tok, 0, kv), kv);
        const std::string cache =
            kv == KvDtype::Fp32 ? "" : std::string(" (scored on an ") + kv_dtype_name(kv) + " cache, as it was recorded)";
        app.engine.post([&app, path, cache] {
          app.info("Stored retrieval scores in " + path + cache);
          app.reload();
        });
      } catch (const std::exception& e) {
        const std::string message = e.what();
        app.engine.post([&app, message] { app.error(message); });
      }
    });
    if (app.headless) {
      app.engine.wait_idle();
      app.engine.drain();
    }
  }

  // The tau of statistic g: its default until set (by the slider or the script's `tau`).
  float& tau_for(const HeadGrid& g) {
    auto it = taus_.find(g.name);
    if (it == taus_.end()) {
      it = taus_.emplace(g.name, pending_tau_ ? *pending_tau_ : default_head_tau(g.name, g.v)).first;
      pending_tau_.reset();
    }
    return it->second;
  }

  // The cells with the axis titles ("layer" in the corner over the layer numbers, "head" over the
  // head numbers: header_h), the layer numbers in label_w on their left.
  void draw_grid(AppState& app, const HeadGrid& g, const HeadGridLayout& layout, float label_w, float top) {
    const ModelShape& m = app.trace->meta.shape;
    const float text_h = ImGui::GetTextLineHeight();
    const float cw = layout.cell_w, ch = layout.cell_h;
    const auto [lo, hi] = value_range(g);
    const float tau = tau_for(g);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("grid", ImVec2(label_w + cw * g.cols, top + ch * g.rows));
    const bool hovered = ImGui::IsItemHovered(), clicked = ImGui::IsItemClicked();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o(p.x + label_w, p.y + top);
    const int col_every = std::max(1, (int)std::ceil(20.0f / cw)), row_every = std::max(1, (int)std::ceil(16.0f / ch));
    const bool kv_cols = g.cols == m.n_kv_heads && m.n_kv_heads != m.n_heads;
    const ImU32 title = IM_COL32(185, 185, 185, 255);
    const char* head_title = kv_cols ? "KV head" : "head";
    dl->AddText(ImVec2(o.x + std::max((cw * g.cols - ImGui::CalcTextSize(head_title).x) * 0.5f, 0.0f), p.y), title, head_title);
    dl->AddText(ImVec2(p.x, p.y + text_h + 2), title, "layer");
    for (int h = 0; h < g.cols; h += col_every)
      dl->AddText(ImVec2(o.x + cw * h + 1, p.y + text_h + 2), IM_COL32(150, 150, 150, 255), std::to_string(h).c_str());
    for (int l = 0; l < g.rows; ++l) {
      // Each on its row's top, where it ends within the grid (in rows of 5 px the last one's ran
      // past the panel's edge).
      if (l % row_every == 0 && ch * l + text_h <= ch * g.rows + 1)
        dl->AddText(ImVec2(p.x, o.y + ch * l), IM_COL32(150, 150, 150, 255), std::to_string(l).c_str());
      for (int h = 0; h < g.cols; ++h) {
        const float v = g.v[(size_t)l * g.cols + h];
        const float t = hi > lo ? (v - lo) / (hi - lo) : 0.5f;
        const ImVec2 a(o.x + cw * h, o.y + ch * l), b(a.x + cw - 1, a.y + ch - 1);
        dl->AddRectFilled(a, b, colormap_color(Colormap::kViridis, t));
        if (v < tau) continue;
        // At or above tau: outlined, or in cells too small for an outline, a bar on their left.
        // (2.5 px where the cells have room: 1.5 px was hard to see on a projector).
        if (cw >= 14 && ch >= 14)
          dl->AddRect(ImVec2(a.x + 1.5f, a.y + 1.5f), ImVec2(b.x - 1.5f, b.y - 1.5f), kTauColor, 0, 0, 2.5f);
        else if (cw >= 8 && ch >= 8)
          dl->AddRect(ImVec2(a.x + 1, a.y + 1), ImVec2(b.x - 1, b.y - 1), kTauColor, 0, 0, 1.5f);
        else dl->AddRectFilled(a, ImVec2(a.x + std::max(2.0f, cw * 0.25f), b.y), kTauColor);
      }
    }
    const bool per_kv = g.cols == m.n_kv_heads && m.n_kv_heads != m.n_heads;
    const int sel_col = per_kv ? app.kv_head() : app.head;
    // The selected cell framed around it, the frame kept within the grid (it ran past the last column).
    const ImVec2 sa(o.x + cw * sel_col - 1, o.y + ch * app.layer - 1);
    dl->PushClipRect(o, ImVec2(o.x + cw * g.cols, o.y + ch * g.rows), true);
    dl->AddRect(sa, ImVec2(sa.x + cw + 1, sa.y + ch + 1), IM_COL32(255, 255, 255, 255), 0, 0, 2.5f);
    dl->PopClipRect();
    if (!hovered) return;
    const ImVec2 mp = mouse_pixel_center();
    const int l = (int)std::floor((mp.y - o.y) / ch), h = (int)std::floor((mp.x - o.x) / cw);
    if (l < 0 || l >= g.rows || h < 0 || h >= g.cols) return;
    ImGui::BeginTooltip();
    ImGui::Text("layer %d, %s %d", l, per_kv ? "KV head" : "head", h);
    for (const HeadGrid& x : grids_) {
      const bool kv = x.cols == m.n_kv_heads && m.n_kv_heads != m.n_heads;
      const int col = kv == per_kv ? h : (kv ? h / std::max(m.group(), 1) : h * m.group());
      if (col >= x.cols) continue;
      const std::string unit = head_stat_unit(x.name);
      // A statistic of the other granularity names its head: a KV head's cell shows the first
      // query head of its group, not a value of the KV head itself.
      std::string which;
      if (kv != per_kv) which = kv ? " (KV head " + std::to_string(col) + ")" : " (query head " + std::to_string(col) + ")";
      ImGui::Text("%s%s: %.4g %s", x.name.c_str(), which.c_str(), x.v[(size_t)l * x.cols + col], unit.c_str());
    }
    ImGui::TextDisabled("click: select this head in every view");
    ImGui::EndTooltip();
    if (clicked) app.select_head(l, per_kv ? h * m.group() : h);
  }

  int generation_ = -1;
  bool computing_ = false;
  std::vector<HeadGrid> grids_;
  int stat_ = 0;
  std::string want_stat_;  // a statistic to show once it arrives (the retrieval score just computed)
  std::map<std::string, float> taus_;  // per statistic, for the trace at taus_path_
  std::string taus_path_;
  std::optional<float> pending_tau_;   // a script's tau given before the statistics arrived
  struct {
    float width = -1;  // of the panel when the controls were last stacked above the grid
    std::string stat;  // the statistic shown then (its counts and scale set the wrapping)
    float height = 0;
  } stacked_;
};

}  // namespace

std::unique_ptr<View> make_heads_view() { return std::make_unique<HeadsView>(); }

}  // namespace kvs
