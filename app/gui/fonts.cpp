// Font loading (assets/fonts/DejaVuSans.ttf, ImGui's built-in font as fallback) and style, at a
// text size.
#include "app/gui/fonts.h"

#include <imgui.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "app/gui/settings.h"

namespace kvs {
namespace {

// Glyphs used by token texts: Latin, general punctuation, arrows, box drawing, block elements
// (SentencePiece's U+2581), geometric shapes, and the replacement character.
const ImWchar kGlyphRanges[] = {0x0020, 0x024F, 0x2000, 0x206F, 0x2190, 0x21FF,
                                0x2500, 0x25FF, 0xFFFD, 0xFFFD, 0};

// The app's style at text_px (already clamped): ImGui's dark colours, its roundings and paddings,
// scaled from the default text size.
ImGuiStyle app_style(float text_px) {
  ImGuiStyle style;
  ImGui::StyleColorsDark(&style);
  style.WindowRounding = 3.0f;
  style.FrameRounding = 2.0f;
  style.WindowPadding = ImVec2(6, 6);
  style.ScaleAllSizes(text_px / kDefaultTextSize);
  return style;
}

}  // namespace

void setup_fonts_and_style(float text_px) {
  text_px = std::clamp(text_px, kMinTextSize, kMaxTextSize);
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  const std::string font = assets_dir() + "/fonts/DejaVuSans.ttf";
  if (std::filesystem::exists(font)) {
    io.Fonts->AddFontFromFileTTF(font.c_str(), text_px, nullptr, kGlyphRanges);
  } else {
    ImFontConfig config;
    config.SizePixels = text_px;  // ImGui's bitmap font, scaled: blurry above 13 px, but sized right
    io.Fonts->AddFontDefault(&config);
  }
  ImGui::GetStyle() = app_style(text_px);
}

float menu_bar_height(float text_px) {
  text_px = std::clamp(text_px, kMinTextSize, kMaxTextSize);
  return text_px + 2 * app_style(text_px).FramePadding.y;
}

float ui_px(float px_at_default) { return px_at_default * ImGui::GetFontSize() / kDefaultTextSize; }

}  // namespace kvs
