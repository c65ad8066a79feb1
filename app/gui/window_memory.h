// What imgui.ini remembers besides ImGui's own windows: the size of the app's window and of its
// text when the layout was saved, and the text size chosen ("[KVScope][Display]", read and
// written through an ImGui settings handler), so that the next start opens at that size, lays the
// saved windows out in proportion (refit where the text is another size) and draws the text as
// large as before; and a view window's last rectangle, from ImGui's window or, before its first
// frame, from the ini.
#pragma once
#include <optional>

#include "app/gui/layout.h"

namespace kvs {

struct Extent {
  int w = 0, h = 0;
  bool operator==(const Extent&) const = default;
};

// The size the app first opens at (within the screen), and what a layout saved before the ini
// recorded a size was laid out in: the app always opened at it.
constexpr Extent kDefaultWindow{1600, 1000};

// The "[KVScope][Display]" entry.
struct DisplaySettings {
  Extent size = kDefaultWindow;  // the window's size when the layout was saved
  float text_size = 0;           // the text's size in pixels (0: never chosen)
  float layout_text_size = 0;    // the text size the layout was saved at, px (0: unknown, an older ini)
};

// Registers "[KVScope][Display]" with the current ImGui context: loading an ini sets
// settings->size to its "Size=W,H", settings->text_size to its "TextSize=PX" and
// settings->layout_text_size to its "LayoutTextSize=PX" (each left as it is where the ini has none
// or a value out of range); saving writes the display size at the time, settings->text_size where
// chosen and settings->layout_text_size where known. `settings` must outlive the context.
void register_display_settings(DisplaySettings* settings);

// The window size to open at: `wanted` within `screen` (a monitor's work area; 0 x 0 = unknown).
Extent opening_size(Extent wanted, Extent screen);

// The rectangle of the ImGui window titled `title`: where it is, else where the loaded ini put
// it; nothing for a window neither knows.
std::optional<Rect> window_rect(const char* title);

}  // namespace kvs
