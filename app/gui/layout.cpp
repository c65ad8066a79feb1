// The default tiled layout: timeline across the top; run + lanes; attention, heads, layers;
// metrics + compare.
#include "app/gui/layout.h"

namespace kvs {

Rect tiled_rect(const std::string& id, const Rect& work) {
  const float timeline_h = 96.0f;
  const float top = work.y + timeline_h;
  const float rows_h = (work.h - timeline_h) / 3.0f;
  const float third = work.w / 3.0f, half = work.w / 2.0f;
  if (id == "timeline") return {work.x, work.y, work.w, timeline_h};
  if (id == "run") return {work.x, top, third, rows_h};
  if (id == "lanes") return {work.x + third, top, work.w - third, rows_h};
  if (id == "attention") return {work.x, top + rows_h, third, rows_h};
  if (id == "heads") return {work.x + third, top + rows_h, third, rows_h};
  if (id == "layers") return {work.x + 2 * third, top + rows_h, work.w - 2 * third, rows_h};
  if (id == "metrics") return {work.x, top + 2 * rows_h, half, rows_h};
  return {work.x + half, top + 2 * rows_h, work.w - half, rows_h};  // compare
}

}  // namespace kvs
