// The app's look: the default font from assets/fonts (DejaVu Sans, with the glyphs token texts
// use) at the chosen text size, the colour style scaled to it, and the pixel sizes the views lay
// themselves out with, which follow the text.
#pragma once

namespace kvs {

// Text sizes in pixels: the default the views were drawn for, and the range the app offers.
constexpr float kDefaultTextSize = 15.0f;
constexpr float kMinTextSize = 10.0f;
constexpr float kMaxTextSize = 40.0f;

// Needs a current ImGui context, outside a frame: replaces the font atlas's fonts with the app's
// font at text_px (clamped to the range) and the style with the app's, its paddings and
// roundings scaled by text_px / kDefaultTextSize. A renderer must rebuild its font texture after.
void setup_fonts_and_style(float text_px = kDefaultTextSize);

// The menu bar's height (ImGui's frame height) at text size text_px, as setup_fonts_and_style
// sets the style up: the text and the frame padding above and below it. Needs no context.
float menu_bar_height(float text_px);

// A view's size in pixels given at the default text size (a panel width, a gap), at the current
// font's size: a layout that fits the default text fits larger text in a window larger by as much.
float ui_px(float px_at_default);

}  // namespace kvs
