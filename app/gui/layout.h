// Where each view's window goes: the default tiled layout of all views, or one view filling the
// work area (screenshots of a single view).
#pragma once
#include <string>

namespace kvs {

struct Rect {
  float x = 0, y = 0, w = 0, h = 0;
};

// Rectangle of view `id` in the tiled layout of a work area.
Rect tiled_rect(const std::string& id, const Rect& work);

}  // namespace kvs
