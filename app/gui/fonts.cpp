// Font loading (assets/fonts/DejaVuSans.ttf, ImGui's built-in font as fallback) and style.
#include "app/gui/fonts.h"

#include <imgui.h>

#include <filesystem>
#include <string>

#include "app/gui/settings.h"

namespace kvs {
namespace {

// Glyphs used by token texts: Latin, general punctuation, arrows, box drawing, block elements
// (SentencePiece's U+2581), geometric shapes, and the replacement character.
const ImWchar kGlyphRanges[] = {0x0020, 0x024F, 0x2000, 0x206F, 0x2190, 0x21FF,
                                0x2500, 0x25FF, 0xFFFD, 0xFFFD, 0};

}  // namespace

void setup_fonts_and_style() {
  ImGuiIO& io = ImGui::GetIO();
  const std::string font = assets_dir() + "/fonts/DejaVuSans.ttf";
  if (std::filesystem::exists(font)) io.Fonts->AddFontFromFileTTF(font.c_str(), 15.0f, nullptr, kGlyphRanges);
  else io.Fonts->AddFontDefault();
  ImGui::StyleColorsDark();
  ImGuiStyle& style = ImGui::GetStyle();
  style.WindowRounding = 3.0f;
  style.FrameRounding = 2.0f;
  style.WindowPadding = ImVec2(6, 6);
}

}  // namespace kvs
