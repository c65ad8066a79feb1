// Eviction lanes: one lane per run, each token a cell coloured by its state at the current step
// (analysis/lanes.h), aggregated over heads or for the selected (layer, KV head). Drawing is
// clipped to the visible columns so thousands of tokens stay smooth.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analysis/lanes.h"
#include "app/gui/fonts.h"
#include "app/gui/colormap.h"
#include "app/gui/script.h"
#include "app/gui/widgets.h"
#include "app/views/run_at_step.h"
#include "app/views/view.h"

namespace kvs {
namespace {

// The "(!)" beside a run whose settings reduce it to something else (AppState::run_caveat).
const ImVec4 kCaveatColor(1.0f, 0.78f, 0.3f, 1.0f);
// The line between the prompt's last token and the first generated one.
const ImU32 kBoundaryColor = IM_COL32(255, 170, 60, 200);

// Which state wins when several tokens share one pixel column.
int state_priority(CellState s) {
  switch (s) {
    case CellState::kEvictedNow: return 7;
    case CellState::kSink: return 6;
    case CellState::kHeavy: return 5;
    case CellState::kRecent: return 4;
    case CellState::kKept: return 3;
    case CellState::kInactive: return 2;
    case CellState::kEvictedEarlier: return 1;
    default: return 0;
  }
}

class LanesView : public View {
 public:
  const char* id() const override { return "lanes"; }
  const char* title() const override { return "Eviction lanes"; }

  void draw(AppState& app) override {
    if (!app.trace) {
      ImGui::TextDisabled("No trace open.");
      return;
    }
    const TraceSnapshot& t = *app.trace;
    ImGui::Checkbox("selected head only", &app.per_head_lanes);
    if (app.per_head_lanes) {
      ImGui::SameLine();
      ImGui::TextDisabled("(layer %d, KV head %d)", app.layer, app.kv_head());
    }
    // The row continues on the next where the panel is narrow (at 1024x768 "all (layer, KV
    // head)s" ran past its edge); what the lanes aggregate, which the checkbox says too, only
    // where the row has room, not at the cost of a lane.
    same_line_if_fits(ui_px(120) + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize("zoom").x);
    ImGui::SetNextItemWidth(ui_px(120));
    // A value typed in (Ctrl+click) is kept in range too: a zoom of 0 left no lanes to see.
    ImGui::SliderFloat("zoom", &zoom_, 1.0f, 64.0f, "x%.1f", ImGuiSliderFlags_Logarithmic | ImGuiSliderFlags_AlwaysClamp);
    // Which step this is (an exported picture of the lanes alone says it too).
    if (t.n_steps() > 0) {
      char step[96];
      std::snprintf(step, sizeof step, "step %d of 0..%d (query position %d)", app.step, t.n_steps() - 1, t.q_pos(app.step));
      same_line_if_fits(ImGui::CalcTextSize(step).x, ui_px(16));
      ImGui::TextUnformatted(step);
      const char* over = app.per_head_lanes ? "selected head" : "all (layer, KV head)s";
      if (same_line_if_fits(ImGui::CalcTextSize(over).x, 8)) ImGui::TextDisabled("%s", over);
    }
    lane_legend();
    future_legend_chip();  // in every row, the attention row included
    // The boundary line: a further chip of the legend, on its last row where it fits.
    const float sh = ImGui::GetTextLineHeight(), gap = ImGui::GetStyle().ItemSpacing.x;
    const char* boundary = "prompt | decode boundary";
    same_line_if_fits(sh + gap + ImGui::CalcTextSize(boundary).x, ui_px(14));
    ImGui::BeginGroup();
    const ImVec2 bp = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddLine(ImVec2(bp.x + sh * 0.5f, bp.y), ImVec2(bp.x + sh * 0.5f, bp.y + sh), kBoundaryColor, 2.0f);
    ImGui::Dummy(ImVec2(sh, sh));
    ImGui::SameLine();
    ImGui::TextUnformatted(boundary);
    ImGui::EndGroup();
    if (t.runs.empty()) {
      ImGui::TextWrapped("This trace has no runs yet. Simulate policies in the Run view (or `kvscope simulate`) "
                         "to see what each one keeps.");
    }
    if (app.step_unreadable()) {
      unreadable_step_notice(app.step, app.unreadable_message);
      return;
    }
    if (t.n_steps() == 0) {  // no step will ever load
      // KVScope refuses to write such a trace, so it came from elsewhere: say what is missing, and
      // only then the usual cause.
      ImGui::TextWrapped("This trace has no decode steps, so no policy has anything to evict. A recording whose model "
                         "ends the text at once has none (an Instruct model given raw text often does: record with "
                         "chat format on).");
      return;
    }
    if (!app.step_data) {
      ImGui::TextDisabled("Loading step %d...", app.step);
      return;
    }
    update_cache(app);
    draw_lanes(app, t);
  }

  CsvTable csv(const AppState& app) const override {
    CsvTable c;
    c.header = {"run", "step", "position", "token", "state", "held_fraction", "attended_fraction"};
    if (!app.trace) return c;
    for (size_t r = 0; r < lanes_.size() && r < app.trace->runs.size(); ++r)
      for (size_t i = 0; i < lanes_[r].state.size(); ++i)
        c.add({app.trace->runs[r].name, std::to_string(app.step), std::to_string(i), token_label(app.trace->token_texts[i]),
               cell_state_name((CellState)lanes_[r].state[i]), csv_number(lanes_[r].held[i]),
               csv_number(lanes_[r].attended[i])});
    return c;
  }

  bool command(AppState& app, const std::string& verb, const std::string& arg) override {
    if (verb != "zoom") return false;
    zoom_ = script_number(verb, arg, 1.0f, 64.0f);
    return true;
  }

 private:
  void update_cache(const AppState& app) {
    const auto key = std::make_tuple(app.generation, app.step_data.get(), app.per_head_lanes, app.layer, app.kv_head());
    if (key == cache_key_ && lanes_.size() == app.trace->runs.size()) return;
    cache_key_ = key;
    const TraceSnapshot& t = *app.trace;
    const StepSnapshot& s = *app.step_data;
    const int T = t.total_len();
    const int layer = app.per_head_lanes ? app.layer : -1, g = app.per_head_lanes ? app.kv_head() : -1;
    lanes_.clear();
    ended_.assign(t.runs.size(), false);
    for (size_t r = 0; r < t.runs.size(); ++r) {
      if (r >= s.kept.size() || s.kept[r].empty()) {
        lanes_.push_back(LaneCells{});
        continue;
      }
      ended_[r] = !run_holds_keys(s.kept[r]);
      const uint8_t* prev = s.kept_prev[r].empty() ? nullptr : s.kept_prev[r].data();
      lanes_.push_back(build_lane(s.kept[r].data(), prev, t.meta.shape, T, s.q_pos, lane_roles(t.runs[r], t.meta.prompt_len), layer, g));
    }
    // The recorded (full) attention of this step: mean over the selected heads.
    attention_.assign(T, 0.0f);
    const ModelShape& m = t.meta.shape;
    if (!s.rows.empty()) {
      int n = 0;
      for (int l = 0; l < m.n_layers; ++l)
        for (int h = 0; h < m.n_heads; ++h) {
          if (layer >= 0 && (l != layer || h / std::max(m.group(), 1) != g)) continue;
          const float* row = s.rows.data() + ((size_t)l * m.n_heads + h) * T;
          for (int i = 0; i < T; ++i) attention_[i] += row[i];
          ++n;
        }
      for (float& v : attention_) v /= (float)std::max(n, 1);
    }
    attention_scaled_.resize(T);
    scale_values(attention_.data(), T, true, 0.0f, 1e-4f, attention_scaled_.data());
  }

  void draw_lanes(AppState& app, const TraceSnapshot& t) {
    const int T = t.total_len();
    const std::string live = " (live)", marker = " (!)";
    // The labels' column fits the longest run name (up to 40% of the view; longer ones are cut
    // with "..." and shown whole on hover).
    float longest = ImGui::CalcTextSize("attention (full)").x;
    for (size_t r = 0; r < lanes_.size(); ++r)
      longest = std::max(longest, ImGui::CalcTextSize((t.runs[r].name + (t.runs[r].eviction == "real" ? live : "")).c_str()).x +
                                      (app.run_caveat(t.runs[r].name).empty() ? 0.0f : ImGui::CalcTextSize(marker.c_str()).x));
    const float avail_w = ImGui::GetContentRegionAvail().x;
    const float label_w = std::clamp(longest + 12.0f, 120.0f, std::max(avail_w * 0.4f, 120.0f));
    // Lanes share the height, but never get lower than a label: with many runs the view scrolls
    // rather than letting the labels overlap or drift from their lanes; up to 64 px (the view
    // alone on a projector: the bars' heights, the share of heads holding a token, read from the
    // back of the room). The ruler above them is a label's height, so its numbers never reach
    // the first row.
    const float text_h = ImGui::GetTextLineHeight();
    const float ruler_h = text_h + 6.0f;
    const float scrollbar = ImGui::GetStyle().ScrollbarSize;
    const float lane_h = std::clamp((ImGui::GetContentRegionAvail().y - ruler_h - scrollbar - 8) / (float)(lanes_.size() + 1),
                                    text_h + 3.0f, ui_px(64));
    const float rows_h = ruler_h + lane_h * (float)(lanes_.size() + 1);
    const float view_w = std::max(avail_w - label_w, 50.0f);
    const float cw = view_w / (float)std::max(T, 1) * zoom_;  // cell width, may be < 1 pixel
    // Labels column: row k's label centred on lane k (0 = the attention row), placed from the top.
    ImGui::BeginGroup();
    const float top = ImGui::GetCursorPosY();
    const auto label_row = [&](size_t k) { ImGui::SetCursorPosY(top + ruler_h + lane_h * k + (lane_h - 2 - text_h) * 0.5f); };
    label_row(0);
    ImGui::TextDisabled("attention (full)");
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("The recorded attention of step %d (%s); positions not generated yet at this step are blank.",
                        app.step, app.per_head_lanes ? "the selected head" : "mean over heads");
    for (size_t r = 0; r < lanes_.size(); ++r) {
      const RunData& run = t.runs[r];
      label_row(r + 1);
      const std::string caveat = app.run_caveat(run.name);  // its settings reduce it to something else
      const std::string full = run.name + (run.eviction == "real" ? live : "");
      const float room = label_w - 8 - (caveat.empty() ? 0.0f : ImGui::CalcTextSize(marker.c_str()).x);
      const std::string shown = elide(full, room);
      ImGui::TextUnformatted(shown.c_str());
      bool hovered = ImGui::IsItemHovered();
      if (!caveat.empty()) {
        ImGui::SameLine(0, 4);
        ImGui::TextColored(kCaveatColor, "(!)");
        hovered = hovered || ImGui::IsItemHovered();
      }
      if (hovered) {
        ImGui::BeginTooltip();
        ImGui::TextUnformatted(full.c_str());
        ImGui::Text("%s  budget %d  %s\n%s", run.policy.c_str(), run.budget, run.eviction.c_str(), run.params_json.c_str());
        if (!caveat.empty()) ImGui::TextColored(kCaveatColor, "Note: %s", caveat.c_str());
        ImGui::EndTooltip();
      }
    }
    ImGui::SetCursorPosY(top + rows_h);
    ImGui::Dummy(ImVec2(label_w, 0.0f));
    ImGui::EndGroup();
    ImGui::SameLine(label_w);
    ImGui::BeginChild("##lanes", ImVec2(0, rows_h + scrollbar + 4), false, ImGuiWindowFlags_HorizontalScrollbar);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float content_w = std::max(cw * (float)T, view_w);
    ImGui::Dummy(ImVec2(content_w, rows_h));
    const float scroll = ImGui::GetScrollX();
    const float visible_w = ImGui::GetWindowWidth();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float qx = origin.x + cw * ((float)app.step_data->q_pos + 0.5f);  // the current query's line
    const float bx = origin.x + cw * (float)t.meta.prompt_len;               // the prompt / decode boundary
    draw_ruler(dl, origin, cw, T, scroll, visible_w, ruler_h, {qx, bx});
    const float y_att = origin.y + ruler_h;
    // Positions past the step's query are not generated yet: blank (the lanes' "future" colour),
    // not the colormap's lowest colour, which would read as "no attention".
    const int q_pos = app.step_data->q_pos;
    draw_row(dl, origin.x, y_att, lane_h - 2, cw, T, scroll, visible_w, [&](int i) {
      if (i > q_pos) return Bar{cell_state_color(CellState::kFuture), 1.0f, 1.0f};
      return Bar{colormap_color(Colormap::kViridis, attention_scaled_[i]), 1.0f, 1.0f};
    }, [&](int i) { return (float)(i > q_pos ? -1 : i); });
    for (size_t r = 0; r < lanes_.size(); ++r) {
      const LaneCells& lane = lanes_[r];
      if (lane.state.empty()) continue;
      const float y = y_att + lane_h * (float)(r + 1);
      if (ended_[r]) {  // blank, and why, at the lane's visible left end
        const ImVec2 a(origin.x + scroll, y), b(origin.x + scroll + visible_w, y + lane_h - 2);
        dl->AddRectFilled(a, b, cell_state_color(CellState::kFuture));
        dl->AddText(ImVec2(a.x + 6, y + (lane_h - 2 - text_h) * 0.5f), IM_COL32(150, 150, 150, 255),
                    run_ended_note(app.step).c_str());
        continue;
      }
      draw_row(dl, origin.x, y, lane_h - 2, cw, T, scroll, visible_w, [&](int i) {
        const CellState s = (CellState)lane.state[i];
        const bool held = s != CellState::kFuture && s != CellState::kEvictedNow && s != CellState::kEvictedEarlier;
        if (!held) return Bar{cell_state_color(s), 1.0f, 1.0f};
        const float h = std::max(lane.held[i], 0.15f);
        return Bar{cell_state_color(s), h, h * lane.attended[i] / lane.held[i]};
      }, [&](int i) { return (float)state_priority((CellState)lane.state[i]); });
    }
    // Current query position.
    dl->AddLine(ImVec2(qx, origin.y), ImVec2(qx, y_att + lane_h * (lanes_.size() + 1)), IM_COL32(255, 255, 255, 140));
    // The prompt / decode boundary: between the prompt's last token and the first generated one.
    dl->AddLine(ImVec2(bx, origin.y + 2), ImVec2(bx, y_att + lane_h * (lanes_.size() + 1)), kBoundaryColor, 2.0f);
    hover(app, t, origin, cw, y_att, lane_h);
    ImGui::EndChild();
  }

  // Position labels at round steps; a label that would lie over one of the `lines` (the query's and
  // the boundary's, which reach up into the ruler) goes to the other side of its tick, or is left out.
  void draw_ruler(ImDrawList* dl, ImVec2 origin, float cw, int T, float scroll, float visible_w, float h,
                  std::initializer_list<float> lines) {
    const float min_gap = ui_px(70);  // pixels between labels
    int step = 1;
    for (int base = 1; step * cw < min_gap && base < 10000000; base *= 10)
      for (int mult : {1, 2, 5}) {
        step = base * mult;
        if (step * cw >= min_gap) break;
      }
    const int first = std::max(0, (int)(scroll / std::max(cw, 1e-6f)) / step * step);
    for (int i = first; i < T && cw * i <= scroll + visible_w; i += step) {
      const float x = origin.x + cw * i;
      dl->AddLine(ImVec2(x, origin.y + h - 4), ImVec2(x, origin.y + h), IM_COL32(150, 150, 150, 255));
      // Right of its tick, or left of it where it would run past the visible edge (the last one).
      const std::string label = std::to_string(i);
      const float w = ImGui::CalcTextSize(label.c_str()).x;
      const auto clear = [&](float left) {
        return std::none_of(lines.begin(), lines.end(), [&](float l) { return l > left - 3 && l < left + w + 3; });
      };
      const float right = x + 2, left = x - 2 - w;
      const bool right_fits = right + w <= origin.x + scroll + visible_w;
      const ImU32 color = IM_COL32(150, 150, 150, 255);
      if (right_fits && clear(right)) dl->AddText(ImVec2(right, origin.y), color, label.c_str());
      else if (clear(left)) dl->AddText(ImVec2(left, origin.y), color, label.c_str());
    }
  }

  // One cell's bar, from the bottom: `color` up to `attended`, then the inactive colour up to
  // `height` (the heads that hold the token without attending it), then the empty background.
  struct Bar {
    ImU32 color;
    float height;    // fraction of the cell
    float attended;  // <= height
    bool operator==(const Bar&) const = default;
  };

  // Draws one row of cells [x0 + cw*i, ...) visible in [scroll, scroll + visible_w). When cells are
  // narrower than a pixel, each pixel column shows its highest-priority cell. bar_of returns the
  // cell's Bar.
  template <class BarOf, class PriorityOf>
  void draw_row(ImDrawList* dl, float x0, float y, float h, float cw, int T, float scroll, float visible_w,
                BarOf bar_of, PriorityOf priority_of) {
    const int i0 = std::clamp((int)std::floor(scroll / cw), 0, T);
    const int i1 = std::clamp((int)std::ceil((scroll + visible_w) / cw) + 1, 0, T);
    const int per_px = std::max(1, (int)std::floor(1.0f / cw));
    const float gap = cw >= 4.0f ? 1.0f : 0.0f;
    for (int i = i0; i < i1; i += per_px) {
      int best = i;
      for (int j = i + 1; j < std::min(i + per_px, i1); ++j)
        if (priority_of(j) > priority_of(best)) best = j;
      const Bar bar = bar_of(best);
      // Merge following cells of the same bar into one rectangle.
      int end = i + per_px;
      while (per_px == 1 && end < i1 && bar_of(end) == bar) ++end;
      const float xa = x0 + cw * i, xb = std::max(x0 + cw * std::min(end, T) - gap, xa + 1);
      if (bar.height < 1.0f) dl->AddRectFilled(ImVec2(xa, y), ImVec2(xb, y + h), IM_COL32(45, 45, 50, 255));
      if (bar.attended < bar.height)
        dl->AddRectFilled(ImVec2(xa, y + h * (1.0f - bar.height)), ImVec2(xb, y + h * (1.0f - bar.attended)),
                          cell_state_color(CellState::kInactive));
      dl->AddRectFilled(ImVec2(xa, y + h * (1.0f - bar.attended)), ImVec2(xb, y + h), bar.color);
      i = end - per_px;
    }
  }

  void hover(const AppState& app, const TraceSnapshot& t, ImVec2 origin, float cw, float y_att, float lane_h) {
    if (!ImGui::IsWindowHovered()) return;
    const ImVec2 m = mouse_pixel_center();
    const int i = (int)std::floor((m.x - origin.x) / cw);
    const int row = (int)std::floor((m.y - y_att) / lane_h);  // 0 = attention, r + 1 = run r
    if (i < 0 || i >= t.total_len() || row < 0 || row > (int)lanes_.size()) return;
    ImGui::BeginTooltip();
    ImGui::Text("position %d  token \"%s\" (id %d)", i, token_label(t.token_texts[i]).c_str(), t.token_ids[i]);
    if (i > app.step_data->q_pos)
      ImGui::Text("not generated yet at step %d", app.step);
    else
      ImGui::Text("attention at step %d: %.5f%s", app.step, attention_[i], app.per_head_lanes ? " (selected head)" : " (mean over heads)");
    if (i == t.meta.prompt_len) ImGui::TextDisabled("the first generated token");
    if (row > 0) {
      const LaneCells& lane = lanes_[row - 1];
      const RunData& run = t.runs[row - 1];
      // A live run's own token where its text left the recording's (free mode): the line above
      // names the recording's.
      if (const std::string own = run_own_token_note(t, run, i); !own.empty()) ImGui::Text("%s: %s", run.name.c_str(), own.c_str());
      if (ended_[row - 1]) {
        ImGui::Text("%s: %s", run.name.c_str(), run_ended_note(app.step).c_str());
      } else if (!lane.state.empty()) {
        ImGui::Text("%s: %s, held by %.0f%% of %s", run.name.c_str(), cell_state_name((CellState)lane.state[i]),
                    lane.held[i] * 100.0f, app.per_head_lanes ? "the selected head" : "(layer, KV head)s");
        if (lane.attended[i] < lane.held[i])
          ImGui::Text("attended by %.0f%%, held inactive by %.0f%%", lane.attended[i] * 100.0f,
                      (lane.held[i] - lane.attended[i]) * 100.0f);
      }
    }
    ImGui::EndTooltip();
  }

  float zoom_ = 1.0f;
  std::vector<bool> ended_;  // per run: no cache at the step (its text ended before it)
  std::tuple<int, const void*, bool, int, int> cache_key_{-1, nullptr, false, -1, -1};
  std::vector<LaneCells> lanes_;          // [runs]
  std::vector<float> attention_;          // [T] mean recorded attention of the step
  std::vector<float> attention_scaled_;   // [T] log-scaled to [0, 1]
};

}  // namespace

std::unique_ptr<View> make_lanes_view() { return std::make_unique<LanesView>(); }

}  // namespace kvs
