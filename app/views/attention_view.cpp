// Attention map: the prefill map or the decode rows stacked over steps (steps x T) of the selected
// (layer, head) as a GL texture with a perceptual colormap, linear/log scale, zoom and pan, and a
// run's evicted keys overlaid (on the prefill map: the prompt keys gone when decoding began). Data
// is read in the background (analysis/attention_image.h).
#include <imgui.h>
#include <imgui_internal.h>  // SetItemUsingMouseWheel

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analysis/attention_image.h"
#include "app/gui/fonts.h"
#include "app/gui/axis_ticks.h"
#include "app/gui/colormap.h"
#include "app/gui/script.h"
#include "app/gui/texture.h"
#include "app/gui/widgets.h"
#include "app/views/view.h"

namespace kvs {
namespace {

// Cells past a row's query position: no attention can fall there.
const ImU32 kFutureColor = IM_COL32(38, 38, 44, 255);

// A panel shorter than this (its content, controls included) is short: the settings fold. Pixels
// at the default text size (ui_px), as every size below.
constexpr float kShortPanel = 330.0f;

// The tint of keys a run holds but does not attend (OmniKV's sparse layers), `share` of them
// (0..1): a white haze, which no colormap's low end resembles (a violet one read as low attention
// on viridis).
ImU32 inactive_tint(float share) { return IM_COL32(255, 255, 255, (int)(120 * share + 0.5f)); }

class AttentionView : public View {
 public:
  const char* id() const override { return "attention"; }
  const char* title() const override { return "Attention map"; }

  void draw(AppState& app) override {
    if (!app.trace) {
      ImGui::TextDisabled("No trace open.");
      return;
    }
    if (generation_ != app.generation) {
      generation_ = app.generation;
      stack_ = DecodeStack{};
      prefill_ = PrefillImage{};
      evidence_ = std::make_shared<PrefillEvidence>();
      prefill_key_ = pending_prefill_ = {-1, -1};
      pending_stack_ = -1;
      stack_error_ = {-1, ""};
      pending_overlay_.clear();
      overlay_.clear();
      overlay_key_.clear();
      fate_ = PromptKeyFate{};
      fate_key_.clear();
      pending_fate_.clear();
      image_key_.clear();
      if (app.trace->n_steps() == 0) decode_ = false;
    }
    // A short panel (the tiled layout at 1280x720 and 1600x1000) keeps what is above the map
    // short: the display settings in a popup, one line over the map.
    const bool short_panel = ImGui::GetContentRegionAvail().y < ui_px(kShortPanel);
    controls(app, short_panel);
    request_data(app);
    rebuild_textures(app);
    draw_image(app, short_panel);
  }

  CsvTable csv(const AppState& app) const override {
    CsvTable c;
    const bool pooled = !decode_ && prefill_.block > 1;
    c.header = {decode_ ? "step" : pooled ? "query_pos_first" : "query_pos", pooled ? "key_pos_first" : "key_pos",
                pooled ? "pooled_attention" : "attention"};
    const float* data = nullptr;
    int rows = 0, cols = 0, first = 0, block = 1;
    if (decode_ && stack_.layer == app.layer && app.head < stack_.n_heads) {
      data = stack_.head(app.head), rows = stack_.n_steps, cols = stack_.T;
    } else if (!decode_ && !prefill_.data.empty()) {
      data = prefill_.data.data(), rows = prefill_.rows, cols = prefill_.cols, first = prefill_.first_query;
      block = prefill_.block;
    }
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < cols; ++k)
        if (data[(size_t)r * cols + k] != 0.0f)
          c.add({std::to_string(r * block + first), std::to_string(k * block), csv_number(data[(size_t)r * cols + k])});
    return c;
  }

  bool command(AppState& app, const std::string& verb, const std::string& arg) override {
    if (verb == "log") log_ = script_choice(verb, arg, {"on", "off"}) == "on";
    else if (verb == "map") decode_ = script_choice(verb, arg, {"prefill", "decode"}) == "decode";
    else if (verb == "colormap") cmap_ = script_choice(verb, arg, {"viridis", "magma"}) == "magma" ? Colormap::kMagma : Colormap::kViridis;
    else if (verb == "overlay") overlay_run_ = overlay_run(app, verb, arg);
    else return false;
    return true;
  }

  // `overlay RUN` names a run of the open trace; `overlay none` clears it.
  static std::string overlay_run(const AppState& app, const std::string& verb, const std::string& arg) {
    if (arg == "none") return "";
    std::string names;
    for (const RunData& r : script_trace(app, verb, arg).runs) {
      if (r.name == arg) return arg;
      names += (names.empty() ? "" : ", ") + r.name;
    }
    throw script_error(verb, arg, "names no run of the trace (" + (names.empty() ? std::string("it has none") : names) + ")");
  }

 private:
  // One row, continued on the next where the panel is narrow (at 1024x768 the colormap, the run
  // overlay and "reset view" were cut off past the panel's edge, out of reach); in a short panel
  // the log scale, the colormap and "reset view" in the popup of a "display" button after them.
  void controls(AppState& app, bool short_panel) {
    const TraceSnapshot& t = *app.trace;
    ImGui::Text("layer %d head %d", app.layer, app.head);
    same_line_if_fits(radio_width("prefill"));
    int mode = decode_ ? 1 : 0;
    ImGui::RadioButton("prefill", &mode, 0);
    same_line_if_fits(radio_width("decode steps"));
    ImGui::RadioButton("decode steps", &mode, 1);
    decode_ = mode == 1 && t.n_steps() > 0;
    if (!short_panel) display_settings(true);
    if (!t.runs.empty()) {
      // As wide as the chosen run's name (omnikv_filters0-3-12_b48 was cut at 150 px), within the panel.
      const float name_w = ImGui::CalcTextSize(overlay_run_.empty() ? "(none)" : overlay_run_.c_str()).x;
      const float combo_w =
          std::clamp(name_w + ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x, ui_px(150),
                     std::max(ui_px(150), ImGui::GetContentRegionAvail().x * 0.6f));
      same_line_if_fits(combo_w + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize("evicted by").x);
      ImGui::SetNextItemWidth(combo_w);
      if (ImGui::BeginCombo("evicted by", overlay_run_.empty() ? "(none)" : overlay_run_.c_str())) {
        if (ImGui::Selectable("(none)", overlay_run_.empty())) overlay_run_.clear();
        for (const RunData& r : t.runs) {
          const std::string caveat = app.run_caveat(r.name);
          const std::string label = caveat.empty() ? r.name : r.name + "  (!)";
          if (ImGui::Selectable(label.c_str(), r.name == overlay_run_)) overlay_run_ = r.name;
          if (!caveat.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("Note: %s", caveat.c_str());
        }
        ImGui::EndCombo();
      }
      if (const std::string caveat = app.run_caveat(overlay_run_); !caveat.empty()) {
        ImGui::SameLine(0, ui_px(4));
        ImGui::TextColored(ImVec4(1.0f, 0.78f, 0.3f, 1.0f), "(!)");
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("Note: %s", caveat.c_str());
      }
    }
    if (!short_panel) {
      same_line_if_fits(button_width("reset view"));
      if (ImGui::SmallButton("reset view")) zoom_ = 1.0f, pan_ = ImVec2(0, 0);
      return;
    }
    same_line_if_fits(button_width("display"));
    if (ImGui::SmallButton("display")) ImGui::OpenPopup("display");
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("log scale, colormap, reset zoom");
    if (ImGui::BeginPopup("display")) {
      display_settings(false);
      if (ImGui::SmallButton("reset view")) zoom_ = 1.0f, pan_ = ImVec2(0, 0);
      ImGui::EndPopup();
    }
  }

  // The log scale and the colormap, continuing the row of the items before them or starting one.
  void display_settings(bool after_items) {
    if (after_items) same_line_if_fits(radio_width("log"));
    ImGui::Checkbox("log", &log_);
    same_line_if_fits(ui_px(90));
    int cm = (int)cmap_;
    ImGui::SetNextItemWidth(ui_px(90));
    ImGui::Combo("##cmap", &cm, "viridis\0magma\0");
    cmap_ = (Colormap)cm;
  }

  void request_data(AppState& app) {
    auto reader = app.reader;
    const int gen = app.generation;
    if (decode_ && stack_.layer != app.layer && pending_stack_ != app.layer && stack_error_.first != app.layer) {
      pending_stack_ = app.layer;
      const int layer = app.layer;
      app.io.submit("attention-stack", "Reading layer " + std::to_string(layer) + " decode rows",
                    [this, &app, reader, gen, layer](JobContext& ctx) {
        DecodeStack st;
        std::string problem;
        try {
          st = read_decode_stack(*reader, layer, [&](int done, int total) {
            ctx.progress((float)done / std::max(total, 1));
            return !ctx.cancelled();
          });
        } catch (const std::exception& e) {
          problem = e.what();
        }
        const bool cancelled = ctx.cancelled();
        app.io.post([this, &app, gen, layer, cancelled, problem, st = std::move(st)]() mutable {
          if (pending_stack_ == layer) pending_stack_ = -1;
          if (gen != app.generation || cancelled) return;
          if (!problem.empty()) {
            stack_error_ = {layer, problem};
            app.error(problem);
            return;
          }
          stack_ = std::move(st);
        });
      });
    }
    const std::string okey = overlay_run_.empty() ? "" : overlay_run_ + "/" + std::to_string(app.layer) + "/" + std::to_string(app.kv_head());
    if (decode_ && !okey.empty() && okey != overlay_key_ && okey != pending_overlay_ && app.trace->run(overlay_run_)) {
      pending_overlay_ = okey;
      const std::string run = overlay_run_;
      const int layer = app.layer, g = app.kv_head();
      const std::vector<int32_t> q = app.trace->query_pos;
      app.io.submit("attention-overlay", "Reading " + run + " kept sets", [this, &app, reader, gen, run, layer, g, q, okey](JobContext& ctx) {
        std::vector<uint8_t> plane = read_evicted_plane(*reader, run, layer, g, q, [&](int done, int total) {
          ctx.progress((float)done / std::max(total, 1));
          return !ctx.cancelled();
        });
        const bool cancelled = ctx.cancelled();
        app.io.post([this, &app, gen, okey, cancelled, plane = std::move(plane)]() mutable {
          if (pending_overlay_ == okey) pending_overlay_.clear();
          if (gen != app.generation || cancelled) return;
          overlay_ = std::move(plane);
          overlay_key_ = okey;
        });
      });
    }
    const std::pair<int, int> pkey(app.layer, app.head);
    const std::string fkey = fate_request_key(app);
    if (!fkey.empty() && fkey != fate_key_ && fkey != pending_fate_) {
      pending_fate_ = fkey;
      const std::string run = overlay_run_;
      const int layer = app.layer, g = app.kv_head(), block = prefill_.block;
      app.io.submit("attention-fate", "Reading " + run + " kept sets", [this, &app, reader, gen, run, layer, g, block, fkey](JobContext&) {
        PromptKeyFate fate;
        std::string problem;
        try {
          fate = read_prompt_key_fate(*reader, run, layer, g, block);
        } catch (const std::exception& e) {
          problem = e.what();
        }
        app.io.post([this, &app, gen, fkey, problem, fate = std::move(fate)]() mutable {
          if (pending_fate_ == fkey) pending_fate_.clear();
          if (!problem.empty()) app.error(problem);
          if (gen != app.generation) return;
          fate_ = std::move(fate);
          fate_key_ = fkey;
        });
      });
    }
    if (!decode_ && prefill_key_ != pkey && pending_prefill_ != pkey) {
      pending_prefill_ = pkey;
      auto evidence = evidence_;
      app.io.submit("attention-prefill", "Reading prefill map", [this, &app, reader, gen, pkey, evidence](JobContext&) {
        PrefillImage img;
        std::string problem;
        try {
          img = read_prefill_image(*reader, pkey.first, pkey.second, *evidence);
        } catch (const std::exception& e) {
          problem = e.what();
        }
        app.io.post([this, &app, gen, pkey, problem, img = std::move(img)]() mutable {
          pending_prefill_ = {-1, -1};
          if (!problem.empty()) app.error(problem);
          if (gen != app.generation) return;
          prefill_ = std::move(img);
          prefill_key_ = pkey;
        });
      });
    }
  }

  void rebuild_textures(const AppState& app) {
    const float* data = nullptr;
    int rows = 0, cols = 0;
    if (decode_ && stack_.layer == app.layer && app.head < stack_.n_heads) {
      data = stack_.head(app.head), rows = stack_.n_steps, cols = stack_.T;
    } else if (!decode_ && prefill_key_ == std::make_pair(app.layer, app.head) && !prefill_.data.empty()) {
      data = prefill_.data.data(), rows = prefill_.rows, cols = prefill_.cols;
    }
    if (!data) return;
    const auto first_future = [&](int r) { return first_future_column(app, r); };
    const std::string key = std::to_string(generation_) + (decode_ ? "d" : "p") + std::to_string(app.layer) + "/" +
                            std::to_string(app.head) + (log_ ? "L" : "l") + std::to_string((int)cmap_) + "s" +
                            std::to_string(spread_.first) + "," + std::to_string(spread_.second);
    if (key != image_key_) {
      image_key_ = key;
      const bool spread = spread_.first > 0 || spread_.second > 0;
      const std::vector<float> spread_data =  // [rows, cols], each pixel's peak where cells outnumber pixels
          spread ? spread_max(data, rows, cols, spread_.first, spread_.second) : std::vector<float>{};
      std::vector<float> scaled((size_t)rows * cols);  // [rows, cols] in [0, 1]
      const float* shown = spread ? spread_data.data() : data;
      image_floor_ = log_ ? log_floor(shown, scaled.size()) : 1e-4f;
      scale_values(shown, scaled.size(), log_, 0.0f, image_floor_, scaled.data());
      std::vector<uint32_t> rgba = colorize(scaled, colormap_table(cmap_));  // [rows, cols]
      for (int r = 0; r < rows; ++r)  // the causal future in the background colour, not the scale's 0
        for (int c = std::max(first_future(r), 0); c < cols; ++c) rgba[(size_t)r * cols + c] = kFutureColor;
      image_.upload(rgba.data(), cols, rows);
      image_max_ = *std::max_element(data, data + (size_t)rows * cols);
      size_t cells = 0, zeros = 0;  // over the cells a query could attend
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < std::min(first_future(r), cols); ++c, ++cells)
          zeros += data[(size_t)r * cols + c] == 0.0f;
      image_zero_share_ = cells ? (float)zeros / (float)cells : 0.0f;
    }
    const bool shown = decode_ && !overlay_key_.empty() &&
                       overlay_key_ == overlay_run_ + "/" + std::to_string(app.layer) + "/" + std::to_string(app.kv_head());
    const std::string ok = shown ? overlay_key_ + "s" + std::to_string(spread_.first) + "," + std::to_string(spread_.second) : "";
    if (ok != overlay_tex_key_) {
      overlay_tex_key_ = ok;
      if (!ok.empty() && overlay_.size() == (size_t)rows * cols) {
        std::vector<uint32_t> rgba(overlay_.size());  // [n_steps, T] RGBA
        if (spread_.first > 0 || spread_.second > 0) {
          // More cells than pixels: each cell tinted by the share of evicted (or inactive) keys
          // around it, as the prefill's fate tint is, so sampling drops no lone key either way.
          const std::vector<float> e = spread_share(overlay_.data(), rows, cols, spread_.first, spread_.second, 1);
          const std::vector<float> in = spread_share(overlay_.data(), rows, cols, spread_.first, spread_.second, 2);
          for (size_t i = 0; i < overlay_.size(); ++i)
            rgba[i] = e[i] >= in[i] ? IM_COL32(255, 30, 30, (int)(95 * e[i] + 0.5f))
                                    : inactive_tint(in[i]);
        } else {
          for (size_t i = 0; i < overlay_.size(); ++i)
            rgba[i] = overlay_[i] == 1 ? IM_COL32(255, 30, 30, 95) : overlay_[i] == 2 ? inactive_tint(1.0f) : 0;
        }
        overlay_tex_.upload(rgba.data(), cols, rows);
        tints_inactive_ = std::find(overlay_.begin(), overlay_.end(), 2) != overlay_.end();
      }
    }
    const std::string fk = !decode_ && fate_key_ == fate_request_key(app) && (int)fate_.evicted.size() == cols ? fate_key_ : "";
    if (fk != fate_tex_key_) {
      fate_tex_key_ = fk;
      if (!fk.empty()) {
        std::vector<uint32_t> rgba((size_t)rows * cols, 0);  // [rows, cols] RGBA: a tint per key column, causal cells only
        for (int c = 0; c < cols; ++c) {
          const float e = fate_.evicted[c], i = fate_.inactive[c];
          const uint32_t tint = e >= i ? IM_COL32(255, 30, 30, (int)(95 * e + 0.5f)) : inactive_tint(i);
          for (int r = 0; r < rows; ++r)
            if (c < first_future(r)) rgba[(size_t)r * cols + c] = tint;
        }
        fate_tex_.upload(rgba.data(), cols, rows);
        tints_inactive_ = std::any_of(fate_.inactive.begin(), fate_.inactive.end(), [](float i) { return i > 0; });
      }
    }
  }

  // The first column of row r past its query, where no attention can fall: decode rows end at
  // their query position, prefill rows at theirs, pooled rows at the diagonal cell.
  int first_future_column(const AppState& app, int r) const {
    if (decode_) return app.trace->q_pos(r) + 1;
    return prefill_.block > 1 ? r + 1 : r + prefill_.first_query + 1;
  }

  // Identifies the prompt-key fate the prefill map needs now ("" when none: decode map, no run
  // chosen, or the map not read yet).
  std::string fate_request_key(const AppState& app) const {
    if (decode_ || overlay_run_.empty() || !app.trace->run(overlay_run_) ||
        prefill_key_ != std::make_pair(app.layer, app.head) || prefill_.data.empty())
      return "";
    return overlay_run_ + "/" + std::to_string(app.layer) + "/" + std::to_string(app.kv_head()) + "/" +
           std::to_string(prefill_.block);
  }

  void draw_image(AppState& app, bool short_panel) {
    const bool ready = decode_ ? stack_.layer == app.layer : prefill_key_ == std::make_pair(app.layer, app.head);
    if (!ready || !image_.valid()) {
      if (!decode_ && prefill_key_ == std::make_pair(app.layer, app.head) && prefill_.data.empty())
        ImGui::TextDisabled("This trace has no prefill attention.");
      else if (decode_ && stack_error_.first == app.layer)
        ImGui::TextColored(kErrorTextColor, "Layer %d's decode rows could not be read: %s", app.layer,
                           stack_error_.second.c_str());
      else
        ImGui::TextDisabled("Reading attention...");
      return;
    }
    const int rows = image_.height(), cols = image_.width();
    const int block = decode_ ? 1 : prefill_.block;
    char what[96];
    if (decode_) std::snprintf(what, sizeof what, "decode rows");
    else if (prefill_.full) std::snprintf(what, sizeof what, "prefill map");
    else if (block > 1) std::snprintf(what, sizeof what, "prefill map pooled in %d x %d blocks (full map not stored)", block, block);
    else std::snprintf(what, sizeof what, "prefill last-window rows (full map not stored)");
    // A short panel keeps one line above the map: the shape, the colour bar and the notes in
    // short, each whole in its hover; the axes' meaning is in their titles, the mouse's uses in
    // F1's help.
    if (short_panel) {
      ImGui::TextDisabled("%d x %d", rows, cols);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: %d x %d", what, rows, cols);
    } else {
      ImGui::TextDisabled("%s: %d x %d", what, rows, cols);
    }
    if (!short_panel) {
      // The axes' meaning where the line has room (the map's axis titles say it too).
      const std::string axes = std::string("(x: key position, y: ") + (decode_ ? "decode step)" : "query position)");
      if (same_line_if_fits(ImGui::CalcTextSize(axes.c_str()).x)) ImGui::TextDisabled("%s", axes.c_str());
      // The colour of the cells past each row's query, beside the map's shape (on a row of its
      // own in a narrow panel).
      same_line_if_fits(ui_px(12 + 4) + ImGui::CalcTextSize("past the query").x, ui_px(12));
      ImGui::BeginGroup();
      ImGui::ColorButton("##future", ImGui::ColorConvertU32ToFloat4(kFutureColor), ImGuiColorEditFlags_NoTooltip,
                         ImVec2(ui_px(12), ui_px(12)));
      ImGui::SameLine(0, 4);
      ImGui::TextDisabled("past the query");
      ImGui::EndGroup();
      // The mouse's uses where the line has room: a row of its own would take the map's.
      const char* hint = "wheel: zoom, drag: pan, double-click: reset";
      if (same_line_if_fits(ImGui::CalcTextSize(hint).x)) ImGui::TextDisabled("%s", hint);
    }
    char lo[32], hi[32];  // the log scale spans from the image's floor (four decades or more) to its largest value
    std::snprintf(lo, sizeof lo, log_ ? "%.2g" : "0", image_max_ * image_floor_);
    std::snprintf(hi, sizeof hi, "%.3g", image_max_);
    if (short_panel)
      same_line_if_fits(
          ImGui::CalcTextSize(lo).x + ImGui::CalcTextSize(hi).x + ui_px(120) + 4 * ImGui::GetStyle().ItemSpacing.x,
          ui_px(16));
    color_bar(cmap_, lo, hi, ui_px(120));
    if (image_zero_share_ > 0.5f) {  // a map that reads flat is one of zeros, not of a scale that hides them
      const std::string zeros = std::to_string((int)std::lround(100 * image_zero_share_)) +
                                (short_panel ? "% zeros" : "% of the cells are 0");
      same_line_if_fits(ImGui::CalcTextSize(zeros.c_str()).x, 16);
      ImGui::TextDisabled("%s", zeros.c_str());
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s", decode_ && app.trace->meta.decode_dtype == "float16"
                                    ? "As stored: float16 rows keep nothing below 6e-8. The head's attention is on\n"
                                      "the other cells (a sink head's, on its first tokens)."
                                    : "The head's attention is on the other cells (a sink head's, on its first "
                                      "tokens).");
    }
    if (!overlay_tex_key_.empty() || !fate_tex_key_.empty()) {
      const std::string red = "red tint: evicted by " + overlay_run_ + (decode_ ? "" : " when decoding began");
      const std::string shown = short_panel ? "red: evicted" : red;
      same_line_if_fits(ImGui::CalcTextSize(shown.c_str()).x, short_panel ? 12 : 20);
      ImGui::TextColored(ImVec4(1.0f, 0.35f, 0.35f, 1.0f), "%s", shown.c_str());
      if (short_panel && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", red.c_str());
      // Only where the run has inactive keys here (OmniKV's sparse layers): said where it applies.
      if (tints_inactive_) {
        const char* haze = short_panel ? "haze: inactive" : "white haze: inactive";
        same_line_if_fits(ImGui::CalcTextSize(haze).x);
        ImGui::TextColored(ImVec4(0.9f, 0.9f, 0.9f, 1.0f), "%s", haze);
      }
    }
    // The map, with tick labels left (rows) and below (key positions) and the axes' titles.
    const float text_h = ImGui::GetTextLineHeight();
    // Below the map: the tick labels and, on a line of their own, the axes' titles; in a short
    // panel one line holds both (draw_axes).
    const float left = ImGui::CalcTextSize("00000").x + 8;
    const float bottom = short_panel ? text_h + 6 : 2 * text_h + 8;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const ImVec2 p(origin.x + left, origin.y);
    const ImVec2 size(std::max(avail.x - left, 50.0f), std::max(avail.y - bottom, 50.0f));
    ImGui::SetCursorScreenPos(p);
    ImGui::InvisibleButton("map", size);
    // The wheel zooms the map and nothing else: in a panel too short for the view the window
    // scrolled too, and the map moved under the mouse it was zooming about.
    ImGui::SetItemUsingMouseWheel();
    // Asked of the map's button here: after the Dummy below "the item" is the Dummy (dragging the
    // map never panned it while active was asked there).
    const bool hovered = ImGui::IsItemHovered(), active = ImGui::IsItemActive();
    ImGui::SetCursorScreenPos(ImVec2(origin.x, p.y + size.y));
    ImGui::Dummy(ImVec2(left + size.x, bottom));
    ImGuiIO& io = ImGui::GetIO();
    // Zoom about the cursor; pan by dragging; uv0/uv1 are the visible texture window.
    if (hovered && io.MouseWheel != 0.0f) {
      // About the centre of the pixel under the mouse, whose cell the tooltip names: about ImGui's
      // mouse position (the pixel's corner) the cell on its left could come under that centre.
      const ImVec2 m = mouse_pixel_center();
      const ImVec2 f((m.x - p.x) / size.x, (m.y - p.y) / size.y);
      const ImVec2 before(pan_.x + f.x / zoom_, pan_.y + f.y / zoom_);
      zoom_ = std::clamp(zoom_ * (io.MouseWheel > 0 ? 1.25f : 0.8f), 1.0f, 256.0f);
      pan_ = ImVec2(before.x - f.x / zoom_, before.y - f.y / zoom_);
    }
    // Every frame the button is held on the map after the press (the press frame's delta is the
    // mouse's way there), not only past ImGui's drag threshold (6 px): asked with IsMouseDragging,
    // a short drag never panned and a slow one lagged the mouse by 6 px.
    if (active && !ImGui::IsMouseClicked(0)) {
      pan_.x -= io.MouseDelta.x / size.x / zoom_;
      pan_.y -= io.MouseDelta.y / size.y / zoom_;
    }
    // A double-click resets the view only when both its clicks fell on the map: a run double-clicked
    // in the "evicted by" list, which opens over the map, was chosen by the first click (closing
    // the list) and the view reset by the second.
    if (ImGui::IsMouseClicked(0)) {
      if (hovered && ImGui::IsMouseDoubleClicked(0) && last_click_on_map_) zoom_ = 1.0f, pan_ = ImVec2(0, 0);
      last_click_on_map_ = hovered;
    }
    pan_.x = std::clamp(pan_.x, 0.0f, 1.0f - 1.0f / zoom_);
    pan_.y = std::clamp(pan_.y, 0.0f, 1.0f - 1.0f / zoom_);
    const ImVec2 uv0 = pan_, uv1(pan_.x + 1.0f / zoom_, pan_.y + 1.0f / zoom_);
    // More cells than pixels: the texture (sampled nearest) is rebuilt spread by half a pixel's
    // span, so each pixel shows the peak of the cells it covers.
    const auto half_span = [](int cells, float pixels) { return pixels >= cells ? 0 : (int)std::ceil(cells / pixels / 2); };
    if (const std::pair<int, int> s{half_span(cols, size.x * zoom_), half_span(rows, size.y * zoom_)}; s != spread_) {
      spread_ = s;
      rebuild_textures(app);
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 q(p.x + size.x, p.y + size.y);
    dl->AddImage(image_.id(), p, q, uv0, uv1);
    if (!overlay_tex_key_.empty() && overlay_tex_.valid()) dl->AddImage(overlay_tex_.id(), p, q, uv0, uv1);
    if (!fate_tex_key_.empty() && fate_tex_.valid()) dl->AddImage(fate_tex_.id(), p, q, uv0, uv1);
    auto to_y = [&](float row) { return p.y + ((row / rows) - uv0.y) * zoom_ * size.y; };
    if (decode_) {  // current step
      const float y0 = to_y((float)app.step), y1 = to_y((float)app.step + 1);
      dl->PushClipRect(p, q, true);
      dl->AddRect(ImVec2(p.x, y0), ImVec2(q.x, std::max(y1, y0 + 1)), IM_COL32(255, 255, 255, 180));
      dl->PopClipRect();
    }
    draw_axes(dl, p, size, uv0, uv1, rows, cols, block, short_panel);
    if (!hovered) return;
    const ImVec2 m = mouse_pixel_center();  // the texel that pixel shows
    const float u = uv0.x + (m.x - p.x) / size.x / zoom_, v = uv0.y + (m.y - p.y) / size.y / zoom_;
    const int col = std::clamp((int)(u * cols), 0, cols - 1), row = std::clamp((int)(v * rows), 0, rows - 1);
    const float* data = decode_ ? stack_.head(app.head) : prefill_.data.data();
    const float val = data[(size_t)row * cols + col];
    const TraceSnapshot& t = *app.trace;
    // Past the row's query no attention can fall; in a decode row the key is not even generated
    // yet (the tooltip named that later token, with "attention 0").
    const bool past_query = col >= first_future_column(app, row);
    ImGui::BeginTooltip();
    if (block > 1) {
      const int P = t.meta.prompt_len;
      ImGui::Text("queries %d..%d", row * block, std::min((row + 1) * block, P) - 1);
      ImGui::Text("keys %d..%d", col * block, std::min((col + 1) * block, P) - 1);
      if (past_query) {
        ImGui::Text("after these queries: no attention (causal mask)");
      } else {
        ImGui::Text("mean attention mass %.6f", val);
        fate_tooltip(col);
      }
      ImGui::EndTooltip();
      return;
    }
    if (decode_) ImGui::Text("step %d (query pos %d)", row, t.q_pos(row));
    else ImGui::Text("query pos %d", row + prefill_.first_query);
    if (past_query && decode_) {
      ImGui::Text("key pos %d: not generated yet at step %d", col, row);
    } else if (past_query) {
      ImGui::Text("key pos %d \"%s\": after the query, no attention (causal mask)", col,
                  col < (int)t.token_texts.size() ? token_label(t.token_texts[col]).c_str() : "");
    } else {
      ImGui::Text("key pos %d \"%s\"", col, col < (int)t.token_texts.size() ? token_label(t.token_texts[col]).c_str() : "");
      ImGui::Text("attention %.6f", val);
      if (decode_ && !overlay_tex_key_.empty() && overlay_.size() == (size_t)rows * cols) {
        const uint8_t o = overlay_[(size_t)row * cols + col];
        if (o) ImGui::Text("%s by %s", o == 1 ? "evicted" : "inactive", overlay_run_.c_str());
      }
      if (!decode_) fate_tooltip(col);
    }
    ImGui::EndTooltip();
    if (decode_ && ImGui::IsMouseClicked(1)) app.set_step(row);
  }

  // Tick labels of the visible window [uv0, uv1] of a rows x cols image of block x block cells:
  // key positions below, decode steps (or query positions) on the left, and the axes' titles on
  // the line below them, or, on `one_line`, beside them: the key axis's at the right end of its
  // labels, the rows' in short under theirs.
  void draw_axes(ImDrawList* dl, ImVec2 p, ImVec2 size, ImVec2 uv0, ImVec2 uv1, int rows, int cols, int block,
                 bool one_line) const {
    const ImU32 tick = IM_COL32(150, 150, 150, 255), label = IM_COL32(185, 185, 185, 255);
    const float text_h = ImGui::GetTextLineHeight();
    const double xn = (double)cols * block, yn = (double)rows * block;  // positions the image spans
    const int first_row = decode_ ? 0 : prefill_.first_query;          // position of row 0
    const char* x_title = "key position";
    const float x_title_w = ImGui::CalcTextSize(x_title).x;
    const float labels_end = one_line ? p.x + size.x - x_title_w - 8 : p.x + size.x;  // where tick labels stop
    char buf[32];
    // Key positions: a tick at the middle of the position's cell.
    for (int k : axis_ticks(uv0.x * xn, uv1.x * xn - 1, std::max((int)(size.x / 70), 2))) {
      const float x = p.x + (float)(((k + 0.5) / xn - uv0.x) * zoom_ * size.x);
      dl->AddLine(ImVec2(x, p.y + size.y), ImVec2(x, p.y + size.y + 4), tick);
      std::snprintf(buf, sizeof buf, "%d", k);
      const float w = ImGui::CalcTextSize(buf).x;
      const float at = std::clamp(x - w / 2, p.x - 4, p.x + size.x - w);
      if (at + w <= labels_end) dl->AddText(ImVec2(at, p.y + size.y + 4), label, buf);
    }
    for (int r : axis_ticks(uv0.y * yn, uv1.y * yn - 1, std::max((int)(size.y / (text_h * 2.5f)), 2))) {
      const float y = p.y + (float)(((r + 0.5) / yn - uv0.y) * zoom_ * size.y);
      dl->AddLine(ImVec2(p.x - 4, y), ImVec2(p.x, y), tick);
      std::snprintf(buf, sizeof buf, "%d", r + first_row);
      const ImVec2 ts = ImGui::CalcTextSize(buf);
      dl->AddText(ImVec2(p.x - 6 - ts.x, std::clamp(y - ts.y / 2, p.y, p.y + size.y - ts.y)), label, buf);
    }
    const float left = p.x - ImGui::CalcTextSize("00000").x - 8;  // the panel's edge
    if (one_line) {
      const float ty = p.y + size.y + 4;
      dl->AddText(ImVec2(p.x + size.x - x_title_w, ty), label, x_title);
      dl->AddText(ImVec2(left, ty), label, decode_ ? "step" : "query");
      return;
    }
    const char* y_title = decode_ ? "rows: decode step" : "rows: query position";
    const float ty = p.y + size.y + text_h + 6;
    dl->AddText(ImVec2(p.x + (size.x - x_title_w) / 2, ty), label, x_title);
    dl->AddText(ImVec2(left, ty), label, y_title);
  }

  void fate_tooltip(int col) const {
    if (fate_tex_key_.empty() || col >= (int)fate_.evicted.size()) return;
    const float e = fate_.evicted[col], i = fate_.inactive[col];
    if (prefill_.block == 1) {
      if (e > 0 || i > 0) ImGui::Text("%s by %s when decoding began", e > 0 ? "evicted" : "inactive", overlay_run_.c_str());
    } else if (e > 0 || i > 0) {
      ImGui::Text("%s: %.0f%% of these keys evicted, %.0f%% inactive when decoding began", overlay_run_.c_str(),
                  100.0f * e, 100.0f * i);
    }
  }

  int generation_ = -1;
  bool decode_ = true, log_ = true;
  Colormap cmap_ = Colormap::kViridis;
  float zoom_ = 1.0f;
  ImVec2 pan_{0, 0};
  bool last_click_on_map_ = false;  // where the last left click fell: on the map or elsewhere
  DecodeStack stack_;
  int pending_stack_ = -1;
  std::pair<int, std::string> stack_error_{-1, ""};  // layer whose decode rows failed to read, and why
  std::shared_ptr<PrefillEvidence> evidence_ = std::make_shared<PrefillEvidence>();  // io thread's cache
  PrefillImage prefill_;
  std::pair<int, int> prefill_key_{-1, -1}, pending_prefill_{-1, -1};
  std::string overlay_run_, overlay_key_, pending_overlay_, overlay_tex_key_;
  std::vector<uint8_t> overlay_;  // [n_steps, T] 1 evicted, 2 inactive
  bool tints_inactive_ = false;   // the overlay shown tints some keys inactive
  PromptKeyFate fate_;            // per prefill-image column, for the run in fate_key_
  std::string fate_key_, pending_fate_, fate_tex_key_;
  std::string image_key_;
  std::pair<int, int> spread_{0, 0};  // columns and rows each way the image is spread (half a pixel's span)
  float image_max_ = 0.0f;  // the largest value in the image (the colour bar's top)
  float image_floor_ = 1e-4f;  // its log scale's floor over image_max_ (log_floor)
  float image_zero_share_ = 0.0f;  // the share of its attendable cells that hold 0
  Texture image_, overlay_tex_, fate_tex_;
};

}  // namespace

std::unique_ptr<View> make_attention_view() { return std::make_unique<AttentionView>(); }

}  // namespace kvs
