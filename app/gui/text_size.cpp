// Text size steps, the monitor's default, the typed value's checks, and the menu and shortcuts
// that choose one.
#include "app/gui/text_size.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "inference/errors.h"

namespace kvs {

const std::vector<float>& text_size_steps() {
  static const std::vector<float> steps = {10, 12, 13, 15, 17, 19, 21, 24, 27, 30, 34, 40};
  return steps;
}

float larger_text_size(float px) {
  for (float s : text_size_steps())
    if (s > px + 0.5f) return s;
  return px;
}

float smaller_text_size(float px) {
  const std::vector<float>& steps = text_size_steps();
  for (auto s = steps.rbegin(); s != steps.rend(); ++s)
    if (*s < px - 0.5f) return *s;
  return px;
}

float monitor_text_size(float scale) {
  if (!(scale > 0)) scale = 1;
  return std::clamp(std::round(kDefaultTextSize * scale), kMinTextSize, kMaxTextSize);
}

float parse_text_size(const std::string& what, const std::string& text) {
  float px = 0;
  char rest = 0;
  if (std::sscanf(text.c_str(), "%f%c", &px, &rest) != 1 || !(px >= kMinTextSize && px <= kMaxTextSize))
    throw input_error(what, "expects a text size in pixels from " + std::to_string((int)kMinTextSize) + " to " +
                                std::to_string((int)kMaxTextSize) + ", not '" + text + "'");
  return px;
}

float text_size_menu(float px, float monitor_px) {
  float chosen = 0;
  if (ImGui::MenuItem("Larger", "Ctrl+=", false, larger_text_size(px) != px)) chosen = larger_text_size(px);
  if (ImGui::MenuItem("Smaller", "Ctrl+-", false, smaller_text_size(px) != px)) chosen = smaller_text_size(px);
  const std::string monitor = "Monitor's size (" + std::to_string((int)monitor_px) + " px)";
  if (ImGui::MenuItem(monitor.c_str(), "Ctrl+0")) chosen = monitor_px;
  ImGui::Separator();
  for (float s : text_size_steps()) {
    const std::string label = std::to_string((int)s) + " px";
    if (ImGui::MenuItem(label.c_str(), nullptr, std::abs(s - px) < 0.5f)) chosen = s;
  }
  return chosen;
}

float text_size_shortcut(float px, float monitor_px) {
  if (!ImGui::GetIO().KeyCtrl) return 0;
  if (ImGui::IsKeyPressed(GLFW_KEY_EQUAL) || ImGui::IsKeyPressed(GLFW_KEY_KP_ADD)) return larger_text_size(px);
  if (ImGui::IsKeyPressed(GLFW_KEY_MINUS) || ImGui::IsKeyPressed(GLFW_KEY_KP_SUBTRACT)) return smaller_text_size(px);
  if (ImGui::IsKeyPressed(GLFW_KEY_0) || ImGui::IsKeyPressed(GLFW_KEY_KP_0)) return monitor_px;
  return 0;
}

}  // namespace kvs
