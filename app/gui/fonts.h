// The app's look: the default font from assets/fonts (DejaVu Sans, with the glyphs token texts
// use) and the colour style.
#pragma once

namespace kvs {

// Needs a current ImGui context; call before the font atlas is built.
void setup_fonts_and_style();

}  // namespace kvs
