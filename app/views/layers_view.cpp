// Layer similarity: the L x L inter-layer attention similarity (OmniKV, analysis/similarity.h),
// the filter-layer optimizer for k filters (analysis/filter_layers.h) with its chosen layers
// highlighted and their retained mass, and a typed choice evaluated beside it.
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

#include "analysis/filter_layers.h"
#include "analysis/similarity.h"
#include "app/gui/fonts.h"
#include "app/gui/colormap.h"
#include "app/gui/script.h"
#include "app/gui/widgets.h"
#include "app/views/view.h"
#include "inference/errors.h"

namespace kvs {
namespace {

// The column beside the matrix (legend, plan), at least 220 px in a short panel where it takes
// the controls too, 170 px where it takes them compact, and the matrix's room for its layer
// numbers. Pixels at the default text size (ui_px).
constexpr float kColumnWidth = 260.0f, kBesideColumnWidth = 220.0f, kCompactColumnWidth = 170.0f;
constexpr float kMatrixLabel = 22.0f, kGap = 12.0f;

// What a cell of the matrix means, in the legend (or in the colour bar's hover).
constexpr const char* kCellMeaning =
    "row i, column j: the share of layer j's attention held by the keys layer i selects";

class LayersView : public View {
 public:
  const char* id() const override { return "layers"; }
  const char* title() const override { return "Layer similarity"; }

  void draw(AppState& app) override {
    if (!app.trace) {
      ImGui::TextDisabled("No trace open.");
      return;
    }
    refresh(app);
    if (sim_.empty()) {
      ImGui::TextDisabled(computing_ ? "Computing layer similarity..." : "No similarity (the trace has no decode steps).");
      return;
    }
    if (!plan_valid_) optimize();
    // In a short panel (the tiled layout at 1280x720) the matrix below the controls got cells of
    // under 3 px and overflowed: where it would be small there, it takes the panel's height, the
    // controls, legend and plan a narrower column beside it, where that column still has its width
    // and the cells 3 px.
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float frame_h = ImGui::GetFrameHeightWithSpacing(), text_h = ImGui::GetTextLineHeightWithSpacing();
    const float below = matrix_cell(ImVec2(avail.x - ui_px(kColumnWidth), avail.y - 2 * frame_h - text_h));
    // Where the whole column would scroll (the tiled layout at 1280x720: its plan fell below the
    // panel's edge), the compact one: the results right under the controls, what they and the
    // colours mean in hovers.
    const bool compact = avail.y < 4 * frame_h + (float)(1 + column_lines()) * text_h;
    const float column_w = compact ? ui_px(kCompactColumnWidth) : ui_px(kBesideColumnWidth);
    const float beside = matrix_cell(ImVec2(avail.x - column_w - ui_px(kGap), avail.y));
    // Small when its cells fall under 4 px, or, for a model of few layers (stories260K's 5), when
    // the whole matrix does under 120 px (it was 22 px at 1024x768).
    // Beside also where that makes the cells a quarter larger or more (the tiled layout at
    // 1600x1000: 7.3 px rather than 5.2).
    const bool small_below = below < 4.0f || below * (float)n_layers_ < ui_px(120);
    if ((small_below || beside >= 1.25f * below) && beside > below && beside >= 3.0f) {
      ImGui::BeginGroup();
      draw_matrix(app, std::min(beside, 40.0f));
      ImGui::EndGroup();
      ImGui::SameLine(0, ui_px(kGap));
      ImGui::BeginGroup();
      if (compact) {
        compact_controls();
        compact_plans();
        compact_legend();
      } else {
        controls();
        legend();
        plans();
      }
      ImGui::EndGroup();
      return;
    }
    controls();
    const float room = ImGui::GetContentRegionAvail().y;
    ImGui::BeginGroup();
    draw_matrix(app, std::clamp(matrix_cell(ImVec2(avail.x - ui_px(kColumnWidth), room)), 3.0f, 40.0f));
    ImGui::EndGroup();
    ImGui::SameLine();
    ImGui::BeginGroup();
    // The plan first, in short, where the legend and the plans in full would run past the panel's
    // edge (the tiled layout at 1600x1000 cut the plan's per-filter lines).
    if (room < (float)column_lines() * text_h) {
      compact_plans();
      compact_legend();
    } else {
      legend();
      plans();
    }
    ImGui::EndGroup();
  }

  CsvTable csv(const AppState& app) const override {
    CsvTable c;
    c.header = {"selecting_layer", "reusing_layer", "similarity", "role_in_optimizer_plan"};
    for (int a = 0; a < n_layers_; ++a)
      for (int b = 0; b < n_layers_; ++b)
        c.add({std::to_string(a), std::to_string(b), csv_number(sim_[(size_t)a * n_layers_ + b]),
               plan_valid_ && b < (int)plan_.roles.size() ? layer_role_name(plan_.roles[b]) : ""});
    return c;
  }

  bool command(AppState& app, const std::string& verb, const std::string& arg) override {
    if (verb != "filters" && verb != "given") return false;
    const int n_layers = script_trace(app, verb, arg).meta.shape.n_layers;  // refresh reads the trace
    refresh(app);
    app.engine.wait_idle();
    app.engine.drain();
    if (verb == "filters") {
      k_ = script_int(verb, arg, 1, n_layers);
      optimize();
    } else {
      given_text_ = arg;
      evaluate_given();
      if (!given_error_.empty()) throw script_error(verb, arg, ": " + given_error_);
    }
    return true;
  }

 private:
  // k, wait, the optimizer's button, a typed choice and its evaluation, and where the similarity
  // comes from; a row continues on the next where the panel is narrow.
  void controls() {
    const int L = n_layers_;
    ImGui::SetNextItemWidth(ui_px(120));
    // 1..L as `kvscope layers --filters` and the script's `filters` take it; a typed value too.
    if (ImGui::SliderInt("filter layers k", &k_, 1, std::max(L, 1), "%d", ImGuiSliderFlags_AlwaysClamp)) plan_valid_ = false;
    same_line_if_fits(ui_px(60) + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize("wait").x);
    ImGui::SetNextItemWidth(ui_px(60));
    if (ImGui::InputInt("wait", &wait_, 0)) plan_valid_ = false;
    wait_ = std::clamp(wait_, 0, std::max(L - 1, 0));
    same_line_if_fits(button_width("Choose filter layers"));
    if (ImGui::Button("Choose filter layers")) optimize();
    // A row of its own when the panel is narrow: the layers typed, and their evaluation.
    same_line_if_fits(ui_px(110) + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize("given").x +
                      ImGui::GetStyle().ItemSpacing.x + button_width("Evaluate"));
    ImGui::SetNextItemWidth(ui_px(110));
    if (ImGui::InputText("given", &given_text_, ImGuiInputTextFlags_EnterReturnsTrue)) evaluate_given();
    ImGui::SameLine();
    if (ImGui::Button("Evaluate")) evaluate_given();
    ImGui::TextDisabled("%s", source_.c_str());
  }

  // The controls in three rows of a column kCompactColumnWidth wide, their names inside them
  // (what they mean in hovers): k and wait, the optimizer's button, the typed choice.
  void compact_controls() {
    const int L = n_layers_;
    const float spacing = ImGui::GetStyle().ItemSpacing.x, half = (ui_px(kCompactColumnWidth) - spacing) / 2;
    ImGui::SetNextItemWidth(half);
    if (ImGui::SliderInt("##k", &k_, 1, std::max(L, 1), "filters %d", ImGuiSliderFlags_AlwaysClamp))
      plan_valid_ = false;
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("filter layers k: the layers that select the keys of the sparse layers after them");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(half);
    if (ImGui::SliderInt("##wait", &wait_, 0, std::max(L - 1, 0), "wait %d", ImGuiSliderFlags_AlwaysClamp))
      plan_valid_ = false;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("wait: the first layers, kept dense before any filter");
    if (ImGui::Button("Choose filter layers")) optimize();
    ImGui::SetNextItemWidth(ui_px(kCompactColumnWidth) - button_width("Evaluate") - spacing);
    if (ImGui::InputTextWithHint("##given", "given: 2,8,18", &given_text_, ImGuiInputTextFlags_EnterReturnsTrue))
      evaluate_given();
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("given: filter layers of your own, evaluated beside the optimizer's");
    ImGui::SameLine();
    if (ImGui::Button("Evaluate")) evaluate_given();
  }

  // Each plan in short (its layers and retained mass), the rest of it in its hover; a refused
  // choice's reason elided to the column, whole in its hover.
  void compact_plans() {
    if (!plan_valid_) optimize();  // k or wait changed in this frame's controls
    // Two lines a plan, or one where two plans and the colour bar below them would not fit (a
    // typed choice at 1280x720).
    const bool given = !given_.filters.empty() && given_error_.empty();
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const bool one_line = ImGui::GetContentRegionAvail().y < (given ? 5 : 3) * line;
    compact_plan("optimizer", plan_, true, one_line);
    if (!given_error_.empty()) {
      ImGui::TextColored(kErrorTextColor, "%s", elide(given_error_, ImGui::GetContentRegionAvail().x).c_str());
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", given_error_.c_str());
    } else if (given) {
      compact_plan("given", given_, false, one_line);
    }
  }

  // The plan's layers, and on the next line (or after them) the mass they retain.
  void compact_plan(const char* label, const FilterPlan& p, bool primary, bool one_line) {
    const float width = ImGui::GetContentRegionAvail().x;
    const std::string layers = std::string(label) + " " + layer_list(p) + (one_line ? ":" : "");
    char retained[96];
    std::snprintf(retained, sizeof retained, "retained %.3f over %d layers", p.retained, p.n_sparse);
    ImGui::BeginGroup();
    ImGui::TextColored(plan_color(primary), "%s", elide(layers, width).c_str());
    if (one_line) ImGui::SameLine();
    ImGui::TextUnformatted(elide(retained, ImGui::GetContentRegionAvail().x).c_str());
    ImGui::EndGroup();
    if (!ImGui::IsItemHovered()) return;
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 35);
    plan_details(p);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }

  // The colour bar; what a cell means, where the similarity comes from and the roles' colours in
  // its hover.
  void compact_legend() const {
    color_bar_of_matrix();
    if (!ImGui::IsItemHovered()) return;
    ImGui::BeginTooltip();
    ImGui::TextUnformatted(kCellMeaning);
    ImGui::TextDisabled("%s", source_.c_str());
    role_legend();
    ImGui::EndTooltip();
  }

  // The optimizer's plan, and the typed choice's (or why it was refused).
  void plans() {
    if (!plan_valid_) optimize();  // k or wait changed in this frame's controls
    show_plan("optimizer", plan_, true);
    if (!given_error_.empty()) ImGui::TextColored(kErrorTextColor, "%s", given_error_.c_str());
    else if (!given_.filters.empty()) show_plan("given", given_, false);
  }

  // The lines the legend and the plans take in full: the colour bar, what a cell means, the roles'
  // colours, and per plan its name, layers, mass, loss, a line per filter and a note.
  int column_lines() const {
    const int given = given_.filters.empty() ? (given_error_.empty() ? 0 : 2) : 5 + (int)given_.filters.size();
    return 6 + 5 + k_ + given;
  }

  // The cell in pixels of the matrix (a square with its labels) filling a space of `avail`.
  float matrix_cell(ImVec2 avail) const {
    return (std::min(avail.x, avail.y) - ui_px(kMatrixLabel) - ui_px(12)) / (float)std::max(n_layers_, 1);
  }

  void refresh(AppState& app) {
    if (generation_ == app.generation) return;
    generation_ = app.generation;
    sim_.clear();
    plan_ = FilterPlan{};
    given_ = FilterPlan{};
    plan_valid_ = false;
    const TraceSnapshot& t = *app.trace;
    // A model of another depth starts from the defaults `kvscope layers` and OmniKV's runs use.
    if (t.meta.shape.n_layers != n_layers_) k_ = std::max(1, t.meta.shape.n_layers / 10);
    n_layers_ = t.meta.shape.n_layers;
    k_ = std::clamp(k_, 1, std::max(n_layers_, 1));
    if (!t.similarity.dims.empty() && (int)t.similarity.dims[0] == n_layers_) {
      sim_ = t.similarity.data;
      source_ = "from the trace (/layers/similarity)";
      return;
    }
    if (t.n_steps() == 0 || !app.reader) return;
    computing_ = true;
    auto reader = app.reader;
    const int gen = app.generation;
    app.engine.submit("similarity", "Computing layer similarity", [this, &app, reader, gen](JobContext&) {
      try {
        SimilarityResult r = trace_similarity(*reader);
        app.engine.post([this, &app, gen, r = std::move(r)] {
          computing_ = false;
          if (gen != app.generation) return;
          sim_ = r.mean;
          source_ = "computed from " + std::to_string(r.n_steps) + " decode steps, top-K = " + std::to_string(r.k);
        });
      } catch (const std::exception& e) {
        const std::string message = e.what();
        app.engine.post([this, &app, message] {
          computing_ = false;
          app.error(message);
        });
      }
    });
  }

  void optimize() {
    if (sim_.empty()) return;
    k_ = std::clamp(k_, 1, n_layers_);
    plan_ = optimize_filter_layers(sim_, n_layers_, k_, wait_);
    plan_valid_ = true;
    if (!given_text_.empty()) evaluate_given();
  }

  void evaluate_given() {
    given_error_.clear();
    given_ = FilterPlan{};
    if (given_text_.empty() || sim_.empty()) return;
    try {
      given_ = evaluate_filter_layers(sim_, n_layers_, parse_filter_layers(given_text_, n_layers_, "given"), wait_);
    } catch (const InputError& e) {
      given_error_ = e.what();
    }
  }

  // What a cell, its colour and the strip under the matrix mean.
  void legend() const {
    color_bar_of_matrix();
    // Wrapped at 250 px (ui_px), or at the window's edge when the column beside the matrix is narrower.
    ImGui::PushTextWrapPos(std::min(ImGui::GetCursorPosX() + ui_px(250), ImGui::GetWindowContentRegionMax().x));
    ImGui::TextDisabled("%s", kCellMeaning);
    ImGui::PopTextWrapPos();
    role_legend();
    ImGui::Spacing();
  }

  // The matrix's colour bar, from its lowest to its highest similarity (one item, for hovers).
  void color_bar_of_matrix() const {
    const auto [lo, hi] = std::minmax_element(sim_.begin(), sim_.end());
    char lo_text[32], hi_text[32];
    std::snprintf(lo_text, sizeof lo_text, "%.3g", *lo);
    std::snprintf(hi_text, sizeof hi_text, "%.3g", *hi);
    // 120 px, less where the column is narrower (the high end's label was cut at 1024x768).
    const float labels = ImGui::CalcTextSize(lo_text).x + ImGui::CalcTextSize(hi_text).x + 2 * ImGui::GetStyle().ItemSpacing.x;
    ImGui::BeginGroup();
    color_bar(Colormap::kMagma, lo_text, hi_text,
              std::clamp(ImGui::GetContentRegionAvail().x - labels, ui_px(40), ui_px(120)));
    ImGui::EndGroup();
  }

  // The colours of the strip under the matrix: filter, wait, sparse and dense layers.
  static void role_legend() {
    const float h = ImGui::GetTextLineHeight();
    for (const LayerRole r : {LayerRole::Filter, LayerRole::Wait, LayerRole::Sparse, LayerRole::Dense}) {
      const char* name = layer_role_name(r);
      if (r != LayerRole::Filter) same_line_if_fits(h + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(name).x, 10);
      ImGui::BeginGroup();
      const ImVec2 p = ImGui::GetCursorScreenPos();
      ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x, p.y + h * 0.35f), ImVec2(p.x + h, p.y + h * 0.75f), role_color(r));
      ImGui::Dummy(ImVec2(h, h));
      ImGui::SameLine();
      ImGui::TextUnformatted(name);
      ImGui::EndGroup();
    }
  }

  static ImU32 role_color(LayerRole r) {
    switch (r) {
      case LayerRole::Filter: return IM_COL32(255, 215, 70, 255);
      case LayerRole::Sparse: return IM_COL32(90, 90, 100, 255);
      case LayerRole::Wait: return IM_COL32(150, 150, 90, 255);
      default: return IM_COL32(200, 200, 210, 255);
    }
  }

  // The optimizer's plan in yellow, a typed choice in blue, as their rows in the matrix.
  static ImVec4 plan_color(bool primary) { return primary ? ImVec4(1, 0.85f, 0.3f, 1) : ImVec4(0.5f, 0.8f, 1, 1); }

  static std::string layer_list(const FilterPlan& p) {
    std::string layers;
    for (int f : p.filters) {
      if (!layers.empty()) layers += ',';
      layers += std::to_string(f);
    }
    return layers;
  }

  void show_plan(const char* label, const FilterPlan& p, bool primary) {
    ImGui::TextColored(plan_color(primary), "%s", label);
    ImGui::Text("filters %s", layer_list(p).c_str());
    plan_details(p);
  }

  // A plan's mass, per filter, and the filters that select for no layer.
  static void plan_details(const FilterPlan& p) {
    ImGui::Text("retained %.3f over %d sparse layers", p.retained, p.n_sparse);
    ImGui::Text("lost %.3f (mean %.3f per sparse layer)", p.lost, p.n_sparse ? p.lost / p.n_sparse : 0.0);
    for (size_t s = 0; s < p.filters.size(); ++s) {
      ImGui::TextDisabled("  filter %d selects for %d sparse layer%s: retained %.3f", p.filters[s],
                          p.segment_layers[s], p.segment_layers[s] == 1 ? "" : "s", p.segment_retained[s]);
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("The sparse layers after filter layer %d (up to the next filter) attend the keys it\n"
                          "selects; retained: the sum of their similarity to it.", p.filters[s]);
    }
    const std::string idle = idle_filters_note(p);
    if (!idle.empty()) ImGui::TextWrapped("%s", idle.c_str());
  }

  void draw_matrix(AppState& app, float cell) {
    const int L = n_layers_;
    const float label = ui_px(kMatrixLabel);
    const ImVec2 p = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("matrix", ImVec2(label + cell * L + ui_px(12), label + cell * L + ui_px(12)));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 o(p.x + label, p.y + label);
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (float v : sim_) lo = std::min(lo, v), hi = std::max(hi, v);
    // Labels far enough apart not to touch: the widest (the last layer's) plus a gap, and a line.
    const float label_gap = std::max(ImGui::CalcTextSize(std::to_string(L - 1).c_str()).x + 6.0f, ImGui::GetTextLineHeight());
    const int every = std::max(1, (int)std::ceil(label_gap / cell));
    for (int i = 0; i < L; i += every) {  // centred on their cells where the cells are wider than them
      const std::string n = std::to_string(i);
      const ImVec2 size = ImGui::CalcTextSize(n.c_str());
      const ImU32 color = IM_COL32(150, 150, 150, 255);
      dl->AddText(ImVec2(o.x + cell * i + std::max(0.0f, (cell - size.x) * 0.5f), p.y + 2), color, n.c_str());
      dl->AddText(ImVec2(p.x, o.y + cell * i + std::max(0.0f, (cell - size.y) * 0.5f)), color, n.c_str());
    }
    for (int a = 0; a < L; ++a)
      for (int b = 0; b < L; ++b) {
        const float v = sim_[(size_t)a * L + b];
        const ImVec2 c0(o.x + cell * b, o.y + cell * a);
        dl->AddRectFilled(c0, ImVec2(c0.x + cell, c0.y + cell), colormap_color(Colormap::kMagma, hi > lo ? (v - lo) / (hi - lo) : 0.5f));
      }
    // Chosen filter rows (optimizer yellow, given blue) and the selected layer.
    auto outline_rows = [&](const FilterPlan& plan, ImU32 color, float inset) {
      for (int f : plan.filters)
        dl->AddRect(ImVec2(o.x + inset, o.y + cell * f + inset), ImVec2(o.x + cell * L - inset, o.y + cell * (f + 1) - inset), color, 0, 0, 2.0f);
    };
    if (plan_valid_) outline_rows(plan_, IM_COL32(255, 215, 70, 255), 0);
    outline_rows(given_, IM_COL32(90, 190, 255, 255), 2);
    // Role strip under the matrix: filter / wait / sparse / dense.
    if (plan_valid_)
      for (int l = 0; l < L && l < (int)plan_.roles.size(); ++l) {
        dl->AddRectFilled(ImVec2(o.x + cell * l, o.y + cell * L + ui_px(3)),
                          ImVec2(o.x + cell * (l + 1) - 1, o.y + cell * L + ui_px(10)),
                          role_color(plan_.roles[l]));
      }
    if (app.layer < L)
      dl->AddRect(ImVec2(o.x + cell * app.layer, o.y), ImVec2(o.x + cell * (app.layer + 1), o.y + cell * L), IM_COL32(255, 255, 255, 160));
    if (!hovered) return;
    const ImVec2 m = mouse_pixel_center();
    const int a = (int)std::floor((m.y - o.y) / cell), b = (int)std::floor((m.x - o.x) / cell);
    if (a < 0 || a >= L || b < 0 || b >= L) return;
    ImGui::BeginTooltip();
    ImGui::Text("layer %d's top-K keys hold %.3f of layer %d's attention", a, sim_[(size_t)a * L + b], b);
    if (plan_valid_ && b < (int)plan_.roles.size())
      ImGui::Text("layer %d in the optimizer's plan: %s%s", b, layer_role_name(plan_.roles[b]),
                  plan_.source[b] >= 0 ? (" (reuses layer " + std::to_string(plan_.source[b]) + ")").c_str() : "");
    ImGui::EndTooltip();
    if (ImGui::IsMouseClicked(0)) app.select_head(b, app.head);
  }

  int generation_ = -1;
  bool computing_ = false;
  int n_layers_ = 0;
  std::vector<float> sim_;  // [L, L] row = selecting layer
  std::string source_;
  int k_ = 1, wait_ = 1;  // filter layers and wait: `kvscope layers`' defaults
  FilterPlan plan_, given_;
  bool plan_valid_ = false;
  std::string given_text_, given_error_;
};

}  // namespace

std::unique_ptr<View> make_layers_view() { return std::make_unique<LayersView>(); }

}  // namespace kvs
