// The app's text size: one size in pixels for every view, chosen in View > Text size or with
// Ctrl+= / Ctrl+- / Ctrl+0, or --text-size and the script's `text-size PX`; kept in imgui.ini
// (window_memory.h); where never chosen, the monitor's content scale times the default 15 px, so
// that a high-DPI screen draws text as large as a standard one.
#pragma once
#include <string>
#include <vector>

#include "app/gui/fonts.h"

namespace kvs {

// The sizes View > Text size lists and Ctrl+= / Ctrl+- step through, in pixels.
const std::vector<float>& text_size_steps();
// The next listed size above (below) px; px itself at the end of the list.
float larger_text_size(float px);
float smaller_text_size(float px);
// The size for a monitor whose content scale is `scale` (2 on a typical high-DPI laptop): the
// default times the scale, in whole pixels, within kMinTextSize..kMaxTextSize.
float monitor_text_size(float scale);
// A text size typed by the user (--text-size, the script's `text-size`): a number of pixels within
// kMinTextSize..kMaxTextSize, else an InputError naming `what`.
float parse_text_size(const std::string& what, const std::string& text);

// View > Text size's items (inside its BeginMenu), the current size `px` checked; the size chosen,
// or 0. `monitor_px` is the monitor's size (monitor_text_size), which "Monitor's size" picks.
float text_size_menu(float px, float monitor_px);
// Ctrl+= (or keypad +) and Ctrl+- (keypad -) step the size, Ctrl+0 picks the monitor's; the size
// asked for, or 0. Within a frame.
float text_size_shortcut(float px, float monitor_px);

}  // namespace kvs
