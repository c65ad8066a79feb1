// Where each view's window goes: the work area a window leaves the views, the default tiled layout
// of all views, one view alone below the timeline, and a layout kept as fractions of the work area
// so that it follows the window when the window is resized.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace kvs {

struct Rect {
  float x = 0, y = 0, w = 0, h = 0;
  bool operator==(const Rect&) const = default;
};

// The area between the menu bar (bar px high) and the status bar (bar + 8) of a display_w x
// display_h window.
Rect work_area(float display_w, float display_h, float bar);
// Whether views can be laid out in `work` (not in a minimized window's 0 x 0).
bool can_lay_out(const Rect& work);

// Rectangle of view `id` in the tiled layout of a work area, in whole pixels. The timeline is as
// high as its rows of text: text_scale is the text size over the default (text_size.h).
Rect tiled_rect(const std::string& id, const Rect& work, float text_scale);
// The rectangle of a view shown alone with the timeline: the work area below the timeline's.
Rect alone_rect(const Rect& work, float text_scale);

// A rectangle as fractions of `work` (0..1 across it), and back in whole pixels. Each edge maps on
// its own, so windows that touch still touch after a resize, and a rectangle of whole pixels
// comes back the same from its fractions of the same work area.
Rect to_fractions(const Rect& r, const Rect& work);
Rect from_fractions(const Rect& f, const Rect& work);

// A layout after the text size changed (text_scale old_scale to scale, the work area old_work to
// work, the menu bar's height with the text): fractions[i] of the window of view ids[i], shown
// where visible[i] (nullopt: not placed yet). The tiled layout (every view shown, each where
// tiled_rect put it) is tiled again; in another, where the timeline is where the tiled layout put
// it (a view alone with it), the edges of windows on the timeline's bottom, its own included, move
// to its new bottom; every other edge keeps its fraction.
void follow_text_size(const std::vector<std::string>& ids, const std::vector<bool>& visible,
                      std::vector<std::optional<Rect>>& fractions, const Rect& old_work, float old_scale,
                      const Rect& work, float scale);

// The layout a start opens with, as fractions of its work area `work` at text scale `scale`:
// view ids[i]'s window where the loaded layout saved it (saved[i], px of the work area saved_work
// the layout was saved in, at text scale saved_scale), then moved as follow_text_size moves a
// layout when the text changes from saved_scale to scale; a view the layout does not hold takes
// its place in the tiled layout.
std::vector<std::optional<Rect>> opening_fractions(const std::vector<std::string>& ids,
                                                   const std::vector<std::optional<Rect>>& saved,
                                                   const std::vector<bool>& visible, const Rect& saved_work,
                                                   float saved_scale, const Rect& work, float scale);

}  // namespace kvs
