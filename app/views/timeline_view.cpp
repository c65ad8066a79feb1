// Timeline: decode-step scrubber, play/pause, speed, and the generated text up to the step.
#include <imgui.h>

#include <algorithm>

#include "app/gui/fonts.h"
#include "app/gui/widgets.h"
#include "app/views/view.h"

namespace kvs {
namespace {

class TimelineView : public View {
 public:
  const char* id() const override { return "timeline"; }
  const char* title() const override { return "Timeline"; }

  void draw(AppState& app) override {
    if (!app.trace) {
      ImGui::TextDisabled("No trace open.");
      return;
    }
    const TraceSnapshot& t = *app.trace;
    const int n = t.n_steps();
    if (n == 0) {
      ImGui::TextDisabled("This trace has no decode steps (prompt of %d tokens only).", t.meta.prompt_len);
      return;
    }
    if (ImGui::Button("|<")) app.set_step(0);
    ImGui::SameLine();
    if (ImGui::Button("<")) app.set_step(app.step - 1);
    ImGui::SameLine();
    if (ImGui::Button(app.playing ? "Pause" : "Play", ImVec2(ui_px(52), 0))) app.toggle_play();
    ImGui::SameLine();
    if (ImGui::Button(">")) app.set_step(app.step + 1);
    ImGui::SameLine();
    if (ImGui::Button(">|")) app.set_step(n - 1);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ui_px(120));
    // A speed typed in (Ctrl+click) is kept in range too: at 0 or below, Play never moved.
    ImGui::SliderFloat("steps/s", &app.speed, 0.5f, 60.0f, "%.1f", ImGuiSliderFlags_Logarithmic | ImGuiSliderFlags_AlwaysClamp);
    ImGui::SameLine();
    int s = app.step;
    ImGui::SetNextItemWidth(std::max(ui_px(120), ImGui::GetContentRegionAvail().x - ui_px(260)));
    if (ImGui::SliderInt("##step", &s, 0, n - 1, "step %d")) app.set_step(s);
    ImGui::SameLine();
    const int q = t.q_pos(app.step);
    const std::string tok = q >= 0 && q < (int)t.token_texts.size() ? token_label(t.token_texts[q]) : "";
    ImGui::Text("query pos %d  token \"%s\"%s", q, tok.c_str(), app.step_ready() ? "" : app.step_unreadable() ? "  (unreadable)" : "  (loading)");
    // A panel with room for more than a line shows the text wrapped, with its line breaks.
    const float room = ImGui::GetContentRegionAvail().y;
    if (room >= 2 * ImGui::GetTextLineHeightWithSpacing()) draw_text_block(t, q, room);
    else draw_text_strip(t, q);
  }

  CsvTable csv(const AppState& app) const override {
    CsvTable c;
    c.header = {"step", "query_pos", "token_id", "token_text"};
    if (!app.trace) return c;
    const TraceSnapshot& t = *app.trace;
    for (int s = 0; s < t.n_steps(); ++s) {
      const int q = t.q_pos(s);
      const bool ok = q >= 0 && q < t.total_len();
      c.add({std::to_string(s), std::to_string(q), ok ? std::to_string(t.token_ids[q]) : "",
             ok ? token_label(t.token_texts[q]) : ""});
    }
    return c;
  }

 private:
  // The generated tokens up to the current one, the newest at the right; older tokens are added
  // from the right until the line is full, so the cost does not grow with the step.
  void draw_text_strip(const TraceSnapshot& t, int q) {
    const int P = t.meta.prompt_len;
    const std::string cur = q >= 0 && q < t.total_len() ? token_label(t.token_texts[q]) : "";
    const float avail = ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize(cur.c_str()).x - ui_px(20);
    std::vector<std::string> pieces;  // newest first, as token_label shows them on one line
    float width = ImGui::CalcTextSize("...").x;  // room for the mark of text cut off on the left
    int i = std::min(q, t.total_len()) - 1;
    for (; i >= P; --i) {
      std::string piece = token_label(t.token_texts[i]);
      width += ImGui::CalcTextSize(piece.c_str()).x;
      if (width > avail) break;
      pieces.push_back(std::move(piece));
    }
    std::string before = i >= P ? "..." : "";
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) before += *it;
    ImGui::TextDisabled("%s", before.c_str());
    ImGui::SameLine(0, 0);
    ImGui::TextColored(kCurrentColor, "%s", cur.c_str());
  }

  // The generated text up to the current token in a block `height` pixels high, wrapped at token
  // boundaries (a token wider than the block at character boundaries, by ImGui), each line break
  // starting a line, the newest line at the bottom. Only the tokens that can show are laid out:
  // going back from the current one until about twice the block's area is filled.
  void draw_text_block(const TraceSnapshot& t, int q, float height) {
    const int P = t.meta.prompt_len, last = std::min(q, t.total_len() - 1);
    const float width = std::max(ImGui::GetContentRegionAvail().x - 8, 40.0f);
    const float area = 2.0f * width * height / ImGui::GetTextLineHeightWithSpacing();
    int first = last;
    for (float filled = 0.0f; first > P && filled < area; --first) {
      const std::string& raw = t.token_texts[first - 1];
      filled += ImGui::CalcTextSize(raw.c_str()).x + width * (float)std::count(raw.begin(), raw.end(), '\n');
    }
    ImGui::BeginChild("##text", ImVec2(0, height), false);
    ImGui::PushTextWrapPos(0.0f);
    float x = 0.0f;  // where the line being written stands
    for (int i = first; i <= last; ++i) {
      const std::string text = running_text(t.token_texts[i]);
      size_t from = 0;
      while (from <= text.size()) {
        const size_t nl = std::min(text.find('\n', from), text.size());
        const std::string part = token_label(text.substr(from, nl - from));  // other control bytes escaped
        const float w = ImGui::CalcTextSize(part.c_str()).x;
        if (!part.empty()) {
          if (x > 0.0f && x + w <= width) ImGui::SameLine(0, 0);
          else x = 0.0f;
          if (i == last) ImGui::TextColored(kCurrentColor, "%s", part.c_str());
          else ImGui::TextDisabled("%s", part.c_str());
          x += w;
        }
        if (nl == text.size()) break;
        if (x == 0.0f) ImGui::NewLine();  // an empty line
        x = 0.0f;
        from = nl + 1;
      }
    }
    ImGui::PopTextWrapPos();
    if (q != scrolled_to_) ImGui::SetScrollHereY(1.0f);  // a new current token in view; else the reader's scroll
    scrolled_to_ = q;
    ImGui::EndChild();
  }

  static inline const ImVec4 kCurrentColor{1.0f, 0.85f, 0.3f, 1.0f};  // the current token
  int scrolled_to_ = -1;  // the query position the text block was last scrolled to
};

}  // namespace

std::unique_ptr<View> make_timeline_view() { return std::make_unique<TimelineView>(); }

}  // namespace kvs
