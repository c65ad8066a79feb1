// An ImGui context without a window or renderer, for tests that build frames or measure text: no
// ini file, the display size given, the default font's atlas built (NewFrame needs it).
#pragma once
#include <imgui.h>

namespace kvs::gui_test {

inline ImGuiContext* headless_imgui(float display_w, float display_h) {
  ImGuiContext* context = ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  io.DisplaySize = ImVec2(display_w, display_h);
  unsigned char* pixels = nullptr;
  int w = 0, h = 0;
  io.Fonts->GetTexDataAsRGBA32(&pixels, &w, &h);
  return context;
}

}  // namespace kvs::gui_test
