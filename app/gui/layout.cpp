// The default tiled layout: timeline across the top; run + lanes; attention, heads, layers;
// metrics + compare. And the mapping of a layout to and from fractions of the work area.
#include "app/gui/layout.h"

#include <cmath>

namespace kvs {
namespace {

constexpr float kTimelineHeight = 96.0f;

// The rectangle between two pixel edges, each rounded to a whole pixel.
Rect between(float x0, float y0, float x1, float y1) {
  x0 = std::round(x0), y0 = std::round(y0), x1 = std::round(x1), y1 = std::round(y1);
  return {x0, y0, x1 - x0, y1 - y0};
}

}  // namespace

Rect work_area(float display_w, float display_h, float bar) { return {0, bar, display_w, display_h - 2 * bar - 8}; }

bool can_lay_out(const Rect& work) { return work.w >= 200 && work.h >= 150; }

Rect tiled_rect(const std::string& id, const Rect& work) {
  const float top = work.y + kTimelineHeight, bottom = work.y + work.h, right = work.x + work.w;
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

Rect alone_rect(const Rect& work) {
  return between(work.x, work.y + kTimelineHeight, work.x + work.w, work.y + work.h);
}

Rect to_fractions(const Rect& r, const Rect& work) {
  return {(r.x - work.x) / work.w, (r.y - work.y) / work.h, r.w / work.w, r.h / work.h};
}

Rect from_fractions(const Rect& f, const Rect& work) {
  return between(work.x + f.x * work.w, work.y + f.y * work.h, work.x + (f.x + f.w) * work.w,
                 work.y + (f.y + f.h) * work.h);
}

}  // namespace kvs
