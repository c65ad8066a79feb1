// The scripted mouse of screenshots: parsing its commands' points and handing its state to ImGui.
#include "app/gui/script_mouse.h"

#include <imgui.h>

#include <cfloat>
#include <string>

namespace kvs {

bool is_mouse_command(const ScriptCommand& c) { return c.verb == "hover" || c.verb == "click"; }

PixelPoint mouse_command_point(const ScriptCommand& c, int width, int height) {
  const int big = 1 << 30;  // any integer here; the window's size is checked below, with its own words
  const auto [x, y] = script_int_pair(c.verb, c.arg, -big, big, -big, big);
  if (x < 0 || x >= width || y < 0 || y >= height)
    throw script_error(c.verb, c.arg, ": " + std::to_string(x) + "," + std::to_string(y) + " is outside the window (0.." +
                                          std::to_string(width - 1) + ", 0.." + std::to_string(height - 1) + ")");
  return {x, y};
}

void ScriptedMouse::move_to(PixelPoint p) {
  at_ = p;
  placed_ = true;
}

void ScriptedMouse::feed(ImGuiIO& io) const {
  // The script's pixels are the framebuffer's; ImGui's coordinates are the window's (they differ
  // on a display that scales).
  const ImVec2 scale = io.DisplayFramebufferScale;
  io.MousePos = placed_ ? ImVec2((float)at_.x / scale.x, (float)at_.y / scale.y) : ImVec2(-FLT_MAX, -FLT_MAX);
  for (bool& down : io.MouseDown) down = false;
  io.MouseDown[ImGuiMouseButton_Left] = left_down_;
}

}  // namespace kvs
