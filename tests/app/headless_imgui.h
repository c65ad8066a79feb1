// An ImGui context without a window or renderer, for tests that build frames or measure text: no
// ini file, the display size given, the font atlas built (NewFrame needs it).
#pragma once
#include <imgui.h>

#include "app/gui/fonts.h"

namespace kvs::gui_test {

// Builds the current context's font atlas, as a renderer would before drawing (after
// setup_fonts_and_style changed the fonts).
inline void build_font_atlas() {
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  ImGui::GetIO().Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
}

// app_look: the app's font and style (setup_fonts_and_style), for tests that measure where its
// views' contents fall; else ImGui's own.
inline ImGuiContext* headless_imgui(float display_w, float display_h, bool app_look = false) {
  ImGuiContext* context = ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(display_w, display_h);
  if (app_look) setup_fonts_and_style();
  build_font_atlas();
  return context;
}

}  // namespace kvs::gui_test
