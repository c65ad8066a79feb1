// Line plots, colour bars and palettes drawn with ImDrawList.
#include "app/gui/fonts.h"
#include "app/gui/widgets.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <tuple>

#include "app/gui/axis_ticks.h"

namespace kvs {

namespace {

struct Rgb {
  float r, g, b;
};

// One hue per policy, picked by search over the sRGB cube for distance in CIEDE2000 on the dark
// plot background (tests/app/gui_metrics_test.cpp holds them to it): every two policies at least
// 20 apart (streamingllm and duoattention were both magenta-pink, 16 apart), each at least 14
// from the lane states' colours (kept blue, evicted red, sink yellow, recent green, heavy-hitter
// orange, inactive purple) and light enough to read (L* >= 55). A policy's runs with other
// parameters take a lighter shade, the colour mixed with white by `lighten` (searched the same
// way; one 0.5 for all left window's and strided's shades 9.5 apart): every shade at least 10
// from its own colour, 15 from every other policy's colour and from every other shade, 10 from
// the lane states'.
struct PolicyColor {
  const char* policy;
  Rgb rgb;
  float lighten;
};
const PolicyColor kPolicyColors[] = {
    {"full", {210, 210, 210}, 0.5f},       {"streamingllm", {255, 90, 240}, 0.4f},
    {"window", {165, 135, 45}, 0.25f},     {"strided", {255, 195, 60}, 0.6f},
    {"h2o", {90, 240, 30}, 0.6f},          {"tova", {90, 225, 180}, 0.75f},
    {"snapkv", {0, 150, 150}, 0.45f},      {"pyramidkv", {0, 135, 240}, 0.65f},
    {"adakv", {180, 165, 255}, 0.55f},     {"kvzip", {255, 165, 135}, 0.45f},
    {"duoattention", {210, 105, 120}, 0.3f}, {"omnikv", {90, 150, 15}, 0.3f},
};

Rgb mix(Rgb a, Rgb b, float t) { return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t}; }

// The run name's parameter part: "<policy>[_<params>][_b<budget>][_<mode>]" less the policy, the
// budget and the mode ("" for the policy's defaults). OmniKV's filter layers are left out too: by
// default the optimizer picks them on each trace and the name shows them (omnikv_filters0-3-12_b48),
// so they are the trace's, not a parameter set of the run's.
std::string params_part(const std::string& name, const std::string& policy, bool live) {
  std::string rest = name.compare(0, policy.size(), policy) == 0 ? name.substr(policy.size()) : name;
  if (live) {
    const size_t us = rest.rfind('_');
    if (us != std::string::npos) rest.resize(us);
  }
  const size_t b = rest.rfind("_b");
  if (b != std::string::npos && b + 2 < rest.size() &&
      rest.find_first_not_of("0123456789", b + 2) == std::string::npos)
    rest.resize(b);
  if (const size_t f = rest.find("_filters"); policy == "omnikv" && f != std::string::npos) {
    const size_t end = rest.find('_', f + 1);  // the next parameter, if any
    rest.erase(f, end == std::string::npos ? std::string::npos : end - f);
  }
  return rest;
}

}  // namespace

ImU32 run_color(const std::string& name, const std::string& policy, bool live) {
  // A policy this build does not know: an entry of the table, from its name.
  const size_t n = sizeof kPolicyColors / sizeof kPolicyColors[0];
  const PolicyColor* entry = &kPolicyColors[std::hash<std::string>{}(policy) % n];
  for (const PolicyColor& c : kPolicyColors)
    if (policy == c.policy) entry = &c;
  // The shade: the defaults as they are, other parameters lighter.
  Rgb c = entry->rgb;
  if (!params_part(name, policy, live).empty()) c = mix(c, Rgb{255, 255, 255}, entry->lighten);
  return IM_COL32((int)std::lround(c.r), (int)std::lround(c.g), (int)std::lround(c.b), 255);
}

ImU32 run_color(const RunData& run) { return run_color(run.name, run.policy, run.eviction == "real"); }

bool same_line_if_fits(float width, float spacing) {
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  const float gap = spacing < 0 ? ImGui::GetStyle().ItemSpacing.x : spacing;
  if (ImGui::GetItemRectMax().x + gap + width > right) return false;
  ImGui::SameLine(0, gap);
  return true;
}

float radio_width(const char* label) {
  return ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x;
}

float button_width(const char* label) { return ImGui::CalcTextSize(label).x + 2 * ImGui::GetStyle().FramePadding.x; }

namespace {

// A value for an axis label or the hover: 3 or 5 significant digits and the unit.
std::string value_text(float v, const char* format, const char* unit) {
  if (std::isnan(v)) return "not compared";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  std::string out = buf;
  if (unit && *unit) out += std::string(" ") + unit;
  return out;
}

// A dashed line from p to q (6 px drawn, 4 px gap), the pattern carried on from `phase` (pixels
// into it); returns the phase at q.
float dashed_line(ImDrawList* dl, ImVec2 p, ImVec2 q, ImU32 color, float phase) {
  const float on = 6.0f, period = 10.0f;
  const float len = std::hypot(q.x - p.x, q.y - p.y);
  if (len <= 0) return phase;
  float t = 0.0f;
  while (t < len) {
    const float in = std::fmod(phase + t, period);
    const float step = std::min(len - t, in < on ? on - in : period - in);
    if (in < on) {
      const float t0 = t / len, t1 = (t + step) / len;
      dl->AddLine(ImVec2(p.x + (q.x - p.x) * t0, p.y + (q.y - p.y) * t0),
                  ImVec2(p.x + (q.x - p.x) * t1, p.y + (q.y - p.y) * t1), color, 1.5f);
    }
    t += step;
  }
  return std::fmod(phase + len, period);
}

// The width of legend_toggle's swatch: a square, or for a marked run a line with its mark.
float swatch_width(int mark) { return ImGui::GetTextLineHeight() * (mark > 0 ? 1.6f : 1.0f); }

}  // namespace

std::vector<int> run_marks(const std::vector<RunData>& runs) {
  using Look = std::pair<ImU32, bool>;  // how a run is drawn: colour, dashed
  std::vector<Look> look(runs.size());
  std::map<Look, int> drawn_alike;  // runs per look
  for (size_t i = 0; i < runs.size(); ++i) ++drawn_alike[look[i] = {run_color(runs[i]), run_dashed(runs[i])}];
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(runs[a].budget, runs[a].name) < std::tie(runs[b].budget, runs[b].name);
  });
  std::vector<int> marks(runs.size(), 0);
  std::map<Look, int> marked;  // runs of each look marked so far, in order of budget
  for (size_t i : order)
    if (drawn_alike[look[i]] > 1) marks[i] = 1 + marked[look[i]]++ % kMarkShapes;
  return marks;
}

void draw_mark(ImDrawList* dl, ImVec2 c, float r, int mark, ImU32 color, bool filled) {
  auto poly = [&](std::initializer_list<ImVec2> pts) {
    std::vector<ImVec2> v(pts);
    if (filled) dl->AddConvexPolyFilled(v.data(), (int)v.size(), color);
    else dl->AddPolyline(v.data(), (int)v.size(), color, ImDrawFlags_Closed, 1.0f);
  };
  switch ((mark - 1) % kMarkShapes + 1) {
    case 1:
      if (filled) dl->AddCircleFilled(c, r, color);
      else dl->AddCircle(c, r, color);
      break;
    case 2: {
      const float h = r * 0.85f;
      poly({{c.x - h, c.y - h}, {c.x + h, c.y - h}, {c.x + h, c.y + h}, {c.x - h, c.y + h}});
      break;
    }
    case 3: poly({{c.x, c.y - r}, {c.x + r, c.y + r * 0.8f}, {c.x - r, c.y + r * 0.8f}}); break;
    case 4: poly({{c.x, c.y - r * 1.2f}, {c.x + r, c.y}, {c.x, c.y + r * 1.2f}, {c.x - r, c.y}}); break;
    case 5: poly({{c.x - r, c.y - r * 0.8f}, {c.x + r, c.y - r * 0.8f}, {c.x, c.y + r}}); break;
    default:
      dl->AddLine(ImVec2(c.x - r, c.y - r), ImVec2(c.x + r, c.y + r), color, 2.0f);
      dl->AddLine(ImVec2(c.x - r, c.y + r), ImVec2(c.x + r, c.y - r), color, 2.0f);
      break;
  }
}

float legend_toggle_width(const char* label, int mark) {
  return swatch_width(mark) + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x;
}

bool legend_toggle(const char* label, ImU32 color, bool shown, bool dashed, int mark) {
  const float h = ImGui::GetTextLineHeight(), gap = ImGui::GetStyle().ItemInnerSpacing.x;
  const float swatch_w = swatch_width(mark);
  const ImVec2 size(legend_toggle_width(label, mark), h);
  ImGui::PushID(label);
  const bool clicked = ImGui::InvisibleButton("##toggle", size);
  ImGui::PopID();
  const ImVec2 p = ImGui::GetItemRectMin();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (ImGui::IsItemHovered()) {
    dl->AddRectFilled(p, ImGui::GetItemRectMax(), ImGui::GetColorU32(ImGuiCol_HeaderHovered));
    ImGui::SetTooltip("%s: click to %s", label, shown ? "hide" : "show");
  }
  const ImVec2 a(p.x + 2, p.y + 2), b(p.x + swatch_w - 2, p.y + h - 2);
  if (mark > 0) {
    const float y = (a.y + b.y) * 0.5f;
    if (dashed) {
      dashed_line(dl, ImVec2(a.x, y), ImVec2(b.x, y), color, 0.0f);
    } else {
      dl->AddLine(ImVec2(a.x, y), ImVec2(b.x, y), color, 1.5f);
    }
    draw_mark(dl, ImVec2((a.x + b.x) * 0.5f, y), h * 0.28f, mark, color, shown);
  } else {
    auto swatch = [&](ImVec2 x, ImVec2 y) {
      if (shown) dl->AddRectFilled(x, y, color);
      else dl->AddRect(x, y, color);
    };
    if (dashed) {
      const float third = (b.x - a.x) / 3;
      swatch(a, ImVec2(a.x + third, b.y));
      swatch(ImVec2(b.x - third, a.y), b);
    } else {
      swatch(a, b);
    }
  }
  dl->AddText(ImVec2(p.x + swatch_w + gap, p.y), ImGui::GetColorU32(shown ? ImGuiCol_Text : ImGuiCol_TextDisabled),
              label);
  return clicked;
}

ImU32 cell_state_color(CellState s) {
  switch (s) {
    case CellState::kFuture: return IM_COL32(30, 30, 34, 255);
    case CellState::kKept: return IM_COL32(86, 180, 233, 255);
    case CellState::kEvictedNow: return IM_COL32(255, 60, 50, 255);
    case CellState::kEvictedEarlier: return IM_COL32(70, 62, 66, 255);
    case CellState::kSink: return IM_COL32(240, 228, 66, 255);
    case CellState::kRecent: return IM_COL32(0, 158, 115, 255);
    case CellState::kHeavy: return IM_COL32(230, 140, 0, 255);
    case CellState::kInactive: return IM_COL32(150, 110, 200, 255);
    default: return IM_COL32(255, 0, 255, 255);
  }
}

void legend_chip(const char* name, ImU32 color, bool first, bool outlined) {
  // Chip and name together, on the next row when they no longer fit (a narrow panel cut
  // "inactive" off at its edge).
  const float h = ImGui::GetTextLineHeight();
  if (!first) same_line_if_fits(h + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(name).x, 14);
  ImGui::BeginGroup();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + h, p.y + h), color);
  if (outlined) ImGui::GetWindowDrawList()->AddRect(p, ImVec2(p.x + h, p.y + h), IM_COL32(90, 90, 96, 255));
  ImGui::Dummy(ImVec2(h, h));
  ImGui::SameLine();
  ImGui::TextUnformatted(name);
  ImGui::EndGroup();
}

void lane_legend() {
  for (int s = 1; s < (int)CellState::kCount; ++s)
    legend_chip(cell_state_name((CellState)s), cell_state_color((CellState)s), s == 1);
}

void future_legend_chip() {
  legend_chip("not generated yet at this step", cell_state_color(CellState::kFuture), false, true);
}

void color_bar(Colormap map, const char* lo, const char* hi, float width) {
  ImGui::TextUnformatted(lo);
  ImGui::SameLine();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float h = ImGui::GetTextLineHeight();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const int n = 64;
  for (int i = 0; i < n; ++i) {
    const float x0 = p.x + width * i / n, x1 = p.x + width * (i + 1) / n;
    dl->AddRectFilled(ImVec2(x0, p.y), ImVec2(x1 + 1, p.y + h), colormap_color(map, (i + 0.5f) / n));
  }
  ImGui::Dummy(ImVec2(width, h));
  ImGui::SameLine();
  ImGui::TextUnformatted(hi);
}

std::string elide(const std::string& text, float width) {
  if (ImGui::CalcTextSize(text.c_str()).x <= width) return text;
  // The longest start that fits beside the "...": widths grow with the length, so a bisection.
  const float room = width - ImGui::CalcTextSize("...").x;
  size_t fits = 0, over = text.size();
  while (over - fits > 1) {
    const size_t mid = (fits + over) / 2;
    (ImGui::CalcTextSize(text.data(), text.data() + mid).x <= room ? fits : over) = mid;
  }
  while (fits > 0 && ((unsigned char)text[fits] & 0xC0) == 0x80) --fits;  // whole characters
  return text.substr(0, fits) + "...";
}

void unreadable_step_notice(int step, const std::string& why) {
  ImGui::TextColored(kErrorTextColor, "Step %d could not be read: %s", step, why.c_str());
}

std::vector<size_t> isolated_points(const std::vector<float>& y, size_t stride) {
  stride = std::max<size_t>(stride, 1);
  auto finite = [&](size_t i) { return i < y.size() && std::isfinite(y[i]); };
  auto alone = [&](size_t i, size_t d) { return finite(i) && (i < d || !finite(i - d)) && !finite(i + d); };
  std::vector<size_t> out;
  for (size_t i = 0; i < y.size(); ++i)
    // On the drawn grid: no line reaches it. Off the grid, a value alone in the series (the
    // decimated line skips it).
    if (i % stride == 0 ? alone(i, stride) : alone(i, 1)) out.push_back(i);
  return out;
}

int line_plot(const char* id, const std::vector<Series>& series, ImVec2 size, int marker, const char* y_label,
              const PlotAxis& axis) {
  ImGui::PushID(id);
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  if (size.x < 50) size.x = 50;
  if (size.y < 40) size.y = 40;
  ImGui::InvisibleButton("plot", size);
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  size_t n = 0;
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (const Series& s : series) {
    n = std::max(n, s.y.size());
    for (float v : s.y)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  const bool fixed = std::isfinite(axis.lo) && std::isfinite(axis.hi) && axis.hi > axis.lo;
  const bool empty = n == 0 || lo > hi;
  if (fixed) lo = axis.lo, hi = axis.hi;
  else if (std::isfinite(axis.lo) && !empty) lo = std::min(lo, axis.lo), hi = std::max(hi, axis.lo);
  if (!empty && hi - lo < 1e-12f) {
    const float pad = lo == 0 ? 1.0f : std::fabs(lo) * 0.1f;
    if (lo != axis.lo) lo -= pad;  // a lower bound given stays (a count of 0: 0..1, not -1..1)
    hi += pad;
  }
  // The y labels, right-aligned in a gutter as wide as the wider of them (a long label such as
  // "1.23e+05 B" would otherwise run into the frame).
  const float text_h = ImGui::GetTextLineHeight(), bottom = text_h + 2;
  const std::string hi_text = empty ? "" : value_text(hi, "%.3g", axis.unit);
  const std::string lo_text = empty ? "" : value_text(lo, "%.3g", axis.unit);
  const float label_w = std::max(ImGui::CalcTextSize(hi_text.c_str()).x, ImGui::CalcTextSize(lo_text.c_str()).x);
  const float left = std::clamp(label_w + 6, 30.0f, size.x * 0.4f);
  const ImVec2 a(p0.x + left, p0.y + 4), b(p0.x + size.x - 6, p0.y + size.y - bottom);
  dl->AddRectFilled(a, b, IM_COL32(24, 24, 28, 255));
  dl->AddRect(a, b, IM_COL32(90, 90, 96, 255));
  int result = -1;
  if (empty) {
    dl->AddText(ImVec2(a.x + 8, a.y + 8), IM_COL32(160, 160, 160, 255), "no data");
    ImGui::PopID();
    return result;
  }
  const float w = b.x - a.x, h = b.y - a.y;
  auto X = [&](size_t i) { return a.x + (n > 1 ? w * (float)i / (float)(n - 1) : w * 0.5f); };
  // Values span the frame less a few pixels at each end: a series at the minimum or maximum
  // (a constant one, recall 1 of the full cache) stays visible inside the border.
  const float inset = std::min(4.0f, h * 0.1f);
  auto Y = [&](float v) { return b.y - inset - (h - 2 * inset) * (v - lo) / (hi - lo); };
  const ImU32 label_color = IM_COL32(170, 170, 170, 255);
  dl->AddText(ImVec2(a.x - 4 - ImGui::CalcTextSize(hi_text.c_str()).x, a.y), label_color, hi_text.c_str());
  dl->AddText(ImVec2(a.x - 4 - ImGui::CalcTextSize(lo_text.c_str()).x, std::max(b.y - text_h, a.y + text_h)), label_color,
              lo_text.c_str());
  if (y_label) dl->AddText(ImVec2(p0.x, a.y + h * 0.5f - text_h * 0.5f), IM_COL32(130, 130, 130, 255), y_label);
  // The x axis: "step N" at its end, round steps between (as far apart as the widest label needs),
  // each with a tick; those that would touch "step N" left out.
  char buf[64];
  std::snprintf(buf, sizeof buf, "step %zu", n - 1);
  const float last_w = ImGui::CalcTextSize(buf).x;
  dl->AddText(ImVec2(b.x - last_w, b.y + 1), IM_COL32(150, 150, 150, 255), buf);
  const float step_w = ImGui::CalcTextSize(std::to_string(n - 1).c_str()).x + ui_px(24);
  for (int s : axis_ticks(0, (double)(n - 1), std::max(1, (int)(w / step_w)))) {
    const std::string text = std::to_string(s);
    const float x = X((size_t)s), tw = ImGui::CalcTextSize(text.c_str()).x;
    const float left = s == 0 ? x : x - tw * 0.5f;
    if (s > 0 && left + tw + 8.0f > b.x - last_w) continue;
    dl->AddLine(ImVec2(x, b.y), ImVec2(x, b.y + 3), IM_COL32(90, 90, 96, 255));
    dl->AddText(ImVec2(left, b.y + 1), IM_COL32(150, 150, 150, 255), text.c_str());
  }
  // A dot at the first or last step sits on the frame: clip a little outside it.
  dl->PushClipRect(ImVec2(a.x - 4, a.y), ImVec2(b.x + 4, b.y), true);
  // Decimate to at most ~2 points per pixel column so long series stay cheap.
  const size_t stride = std::max<size_t>(1, n / (size_t)std::max(1.0f, w * 2));
  for (const Series& s : series) {
    ImVec2 prev;
    bool have = false;
    float dash = 0.0f;  // where in the dash pattern the line is
    for (size_t i = 0; i < s.y.size(); i += stride) {
      if (!std::isfinite(s.y[i])) {
        have = false;
        continue;
      }
      const ImVec2 q(X(i), Y(std::clamp(s.y[i], lo, hi)));
      if (have && !s.dashed) dl->AddLine(prev, q, s.color, 1.5f);
      if (have && s.dashed) dash = dashed_line(dl, prev, q, s.color, dash);
      prev = q;
      have = true;
    }
    for (size_t i : isolated_points(s.y, stride)) {
      const ImVec2 c(X(i), Y(std::clamp(s.y[i], lo, hi)));
      if (s.mark > 0) draw_mark(dl, c, 4.0f, s.mark, s.color);
      else dl->AddCircleFilled(c, 3.5f, s.color);
    }
    // The run's mark every kMarkSpacing pixels on its line, each mark's series starting at its own
    // offset so that the marks of overlapping lines do not cover one another.
    constexpr float kMarkSpacing = 56.0f;
    for (float x = 6.0f + 9.0f * (float)((s.mark - 1) % kMarkShapes); s.mark > 0 && x <= w; x += ui_px(kMarkSpacing)) {
      const size_t i = n > 1 ? (size_t)std::lround(x / w * (float)(n - 1)) : 0;
      if (i < s.y.size() && std::isfinite(s.y[i]))
        draw_mark(dl, ImVec2(X(i), Y(std::clamp(s.y[i], lo, hi))), ui_px(4), s.mark, s.color);
    }
  }
  if (marker >= 0 && (size_t)marker < n) dl->AddLine(ImVec2(X(marker), a.y), ImVec2(X(marker), b.y), IM_COL32(255, 255, 255, 110));
  dl->PopClipRect();
  if (hovered && ImGui::GetIO().MousePos.x >= a.x) {
    const float fx = (ImGui::GetIO().MousePos.x - a.x) / std::max(w, 1.0f);
    const size_t i = (size_t)std::clamp((int)std::lround(fx * (float)(n - 1)), 0, (int)n - 1);
    dl->AddLine(ImVec2(X(i), a.y), ImVec2(X(i), b.y), IM_COL32(255, 255, 255, 60));
    ImGui::BeginTooltip();
    ImGui::Text("step %zu", i);
    for (const Series& s : series)
      if (i < s.y.size())
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(s.color), "%s: %s", s.name.c_str(),
                           value_text(s.y[i], "%.5g", axis.unit).c_str());
    ImGui::EndTooltip();
    if (clicked) result = (int)i;
  }
  ImGui::PopID();
  return result;
}

ImVec2 mouse_pixel_center() {
  const ImGuiIO& io = ImGui::GetIO();
  const ImVec2 s = io.DisplayFramebufferScale;  // pixels per coordinate unit
  return ImVec2((std::floor(io.MousePos.x * s.x) + 0.5f) / s.x, (std::floor(io.MousePos.y * s.y) + 0.5f) / s.y);
}

}  // namespace kvs
