// The default tiled layout: timeline across the top; run + lanes; attention, heads, layers;
// metrics + compare. The mapping of a layout to and from fractions of the work area, and how a
// layout follows a change of text size.
#include "app/gui/layout.h"

#include <cmath>
#include <cstdlib>

namespace kvs {
namespace {

constexpr float kTimelineHeight = 96.0f;  // at the default text size

// The rectangle between two pixel edges, each rounded to a whole pixel.
Rect between(float x0, float y0, float x1, float y1) {
  x0 = std::round(x0), y0 = std::round(y0), x1 = std::round(x1), y1 = std::round(y1);
  return {x0, y0, x1 - x0, y1 - y0};
}

}  // namespace

Rect work_area(float display_w, float display_h, float bar) { return {0, bar, display_w, display_h - 2 * bar - 8}; }

bool can_lay_out(const Rect& work) { return work.w >= 200 && work.h >= 150; }

Rect tiled_rect(const std::string& id, const Rect& work, float text_scale) {
  const float top = work.y + kTimelineHeight * text_scale, bottom = work.y + work.h, right = work.x + work.w;
  const float row = (bottom - top) / 3.0f, third = work.w / 3.0f, half = work.w / 2.0f;
  const float col1 = work.x + third, col2 = work.x + 2 * third, mid = work.x + half;
  if (id == "timeline") return between(work.x, work.y, right, top);
  if (id == "run") return between(work.x, top, col1, top + row);
  if (id == "lanes") return between(col1, top, right, top + row);
  if (id == "attention") return between(work.x, top + row, col1, top + 2 * row);
  if (id == "heads") return between(col1, top + row, col2, top + 2 * row);
  if (id == "layers") return between(col2, top + row, right, top + 2 * row);
  if (id == "metrics") return between(work.x, top + 2 * row, mid, bottom);
  return between(mid, top + 2 * row, right, bottom);  // compare
}

Rect alone_rect(const Rect& work, float text_scale) {
  return between(work.x, work.y + kTimelineHeight * text_scale, work.x + work.w, work.y + work.h);
}

Rect to_fractions(const Rect& r, const Rect& work) {
  return {(r.x - work.x) / work.w, (r.y - work.y) / work.h, r.w / work.w, r.h / work.h};
}

Rect from_fractions(const Rect& f, const Rect& work) {
  return between(work.x + f.x * work.w, work.y + f.y * work.h, work.x + (f.x + f.w) * work.w,
                 work.y + (f.y + f.h) * work.h);
}

void follow_text_size(const std::vector<std::string>& ids, const std::vector<bool>& visible,
                      std::vector<std::optional<Rect>>& fractions, const Rect& old_work, float old_scale,
                      const Rect& work, float scale) {
  bool tiled = true;
  for (size_t i = 0; i < ids.size() && tiled; ++i)
    tiled = visible[i] && fractions[i] &&
            from_fractions(*fractions[i], old_work) == tiled_rect(ids[i], old_work, old_scale);
  if (tiled) {
    for (size_t i = 0; i < ids.size(); ++i) fractions[i] = to_fractions(tiled_rect(ids[i], work, scale), work);
    return;
  }
  size_t t = 0;
  while (t < ids.size() && ids[t] != "timeline") ++t;
  const Rect old_timeline = tiled_rect("timeline", old_work, old_scale);
  if (t == ids.size() || !fractions[t] || from_fractions(*fractions[t], old_work) != old_timeline) return;
  const Rect old_f = to_fractions(old_timeline, old_work);
  const Rect new_f = to_fractions(tiled_rect("timeline", work, scale), work);
  const float old_edge = old_f.y + old_f.h, edge = new_f.y + new_f.h, near = 1.5f / old_work.h;  // within 1.5 px
  for (std::optional<Rect>& f : fractions) {
    if (!f) continue;
    float top = f->y, bottom = f->y + f->h;
    if (std::abs(top - old_edge) < near) top = edge;
    if (std::abs(bottom - old_edge) < near) bottom = edge;
    f = Rect{f->x, top, f->w, bottom - top};
  }
}

std::vector<std::optional<Rect>> opening_fractions(const std::vector<std::string>& ids,
                                                   const std::vector<std::optional<Rect>>& saved,
                                                   const std::vector<bool>& visible, const Rect& saved_work,
                                                   float saved_scale, const Rect& work, float scale) {
  std::vector<std::optional<Rect>> fractions(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    if (saved[i]) fractions[i] = to_fractions(*saved[i], saved_work);
  if (saved_scale != scale) follow_text_size(ids, visible, fractions, saved_work, saved_scale, work, scale);
  for (size_t i = 0; i < ids.size(); ++i)
    if (!fractions[i]) fractions[i] = to_fractions(tiled_rect(ids[i], work, scale), work);
  return fractions;
}

}  // namespace kvs
