// The scripted mouse and keyboard of screenshots: the frames each command plays and handing them
// to ImGui.
#include "app/gui/script_input.h"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <string>

namespace kvs {
namespace {

// Points of mouse commands: any integer parses; whether it is in the window is checked after,
// with its own words.
constexpr int kAnyInt = 1 << 30;
constexpr int kMaxNotches = 20;

PixelPoint in_window(const ScriptCommand& c, int x, int y, int width, int height) {
  if (x < 0 || x >= width || y < 0 || y >= height)
    throw script_error(c.verb, c.arg, ": " + std::to_string(x) + "," + std::to_string(y) + " is outside the window (0.." +
                                          std::to_string(width - 1) + ", 0.." + std::to_string(height - 1) + ")");
  return {x, y};
}

// The keys `key NAME` presses, by name: GLFW's codes, which the platform backend maps ImGui's
// keys to (io.KeyMap) and the shell's shortcuts ask for.
struct NamedKey {
  const char* name;
  int code;
};
constexpr NamedKey kKeys[] = {{"left", GLFW_KEY_LEFT},   {"right", GLFW_KEY_RIGHT},   {"up", GLFW_KEY_UP},
                              {"down", GLFW_KEY_DOWN},   {"home", GLFW_KEY_HOME},     {"end", GLFW_KEY_END},
                              {"space", GLFW_KEY_SPACE}, {"enter", GLFW_KEY_ENTER},   {"escape", GLFW_KEY_ESCAPE},
                              {"tab", GLFW_KEY_TAB},     {"backspace", GLFW_KEY_BACKSPACE}, {"delete", GLFW_KEY_DELETE},
                              {"f1", GLFW_KEY_F1},       {"=", GLFW_KEY_EQUAL},       {"-", GLFW_KEY_MINUS},
                              {"0", GLFW_KEY_0}};

}  // namespace

bool is_mouse_command(const ScriptCommand& c) {
  return c.verb == "hover" || c.verb == "click" || c.verb == "ctrlclick" || c.verb == "dclick" || c.verb == "rclick" ||
         c.verb == "wheel" || c.verb == "drag";
}

bool is_key_command(const ScriptCommand& c) { return c.verb == "key" || c.verb == "type"; }

std::vector<KeyFrame> key_command_frames(const ScriptCommand& c) {
  if (c.verb == "type") {
    if (c.arg.empty()) throw script_error(c.verb, c.arg, "expects the text to type");
    return {{-1, c.arg}};
  }
  const bool ctrl = c.arg.rfind("ctrl+", 0) == 0;
  const std::string name = ctrl ? c.arg.substr(5) : c.arg;
  for (const NamedKey& k : kKeys)
    if (name == k.name) return {{k.code, "", ctrl}, {-1, "", ctrl}};
  if (ctrl && name.size() == 1 && name[0] >= 'a' && name[0] <= 'z')  // shortcuts: ctrl+o
    return {{GLFW_KEY_A + (name[0] - 'a'), "", true}, {-1, "", true}};
  std::string names;
  for (const NamedKey& k : kKeys) names += std::string(names.empty() ? "" : ", ") + k.name;
  throw script_error(c.verb, c.arg, "expects one of " + names + ", each also as ctrl+NAME, or ctrl+ a letter");
}

std::vector<MouseFrame> mouse_command_frames(const ScriptCommand& c, int width, int height) {
  if (c.verb == "drag") {
    const std::vector<int> v = script_ints(c.verb, c.arg, 4, -kAnyInt, kAnyInt);
    const PixelPoint from = in_window(c, v[0], v[1], width, height), to = in_window(c, v[2], v[3], width, height);
    std::vector<MouseFrame> frames = {{from}, {from, true}};
    const int steps = std::max(1, (std::max(std::abs(to.x - from.x), std::abs(to.y - from.y)) + kDragStep - 1) / kDragStep);
    for (int i = 1; i <= steps; ++i)  // rounded along the line, ending exactly at `to`
      frames.push_back({{from.x + (to.x - from.x) * i / steps, from.y + (to.y - from.y) * i / steps}, true});
    frames.push_back({to});
    return frames;
  }
  if (c.verb == "wheel") {
    const std::vector<int> v = script_ints(c.verb, c.arg, 3, -kAnyInt, kAnyInt);
    const PixelPoint at = in_window(c, v[0], v[1], width, height);
    if (v[2] == 0 || std::abs(v[2]) > kMaxNotches)
      throw script_error(c.verb, c.arg, ": " + std::to_string(v[2]) + " notches is outside -" + std::to_string(kMaxNotches) +
                                            "..-1, 1.." + std::to_string(kMaxNotches));
    std::vector<MouseFrame> frames = {{at}};
    for (int i = 0; i < std::abs(v[2]); ++i) frames.push_back({at, false, false, v[2] > 0 ? 1 : -1});
    return frames;
  }
  const auto [x, y] = script_int_pair(c.verb, c.arg, -kAnyInt, kAnyInt, -kAnyInt, kAnyInt);
  const PixelPoint at = in_window(c, x, y, width, height);
  if (c.verb == "hover") return {{at}};
  if (c.verb == "rclick") return {{at}, {at, false, true}, {at}};
  if (c.verb == "dclick") return {{at}, {at, true}, {at}, {at, true}, {at}};
  if (c.verb == "ctrlclick") return {{at, false, false, 0, true}, {at, true, false, 0, true}, {at, false, false, 0, true}, {at}};
  return {{at}, {at, true}, {at}};  // click
}

void ScriptedInput::set(const MouseFrame& f) {
  now_ = f;
  placed_ = true;
}

void ScriptedInput::set_keys(const KeyFrame& f) { keys_ = f; }

void ScriptedInput::feed(ImGuiIO& io) {
  // The script's pixels are the framebuffer's; ImGui's coordinates are the window's (they differ
  // on a display that scales).
  const ImVec2 scale = io.DisplayFramebufferScale;
  io.MousePos = placed_ ? ImVec2((float)now_.at.x / scale.x, (float)now_.at.y / scale.y) : ImVec2(-FLT_MAX, -FLT_MAX);
  for (bool& down : io.MouseDown) down = false;
  io.MouseDown[ImGuiMouseButton_Left] = now_.left;
  io.MouseDown[ImGuiMouseButton_Right] = now_.right;
  io.MouseWheel = (float)now_.wheel;
  now_.wheel = 0;  // a notch turns once
  for (bool& down : io.KeysDown) down = false;
  if (keys_.key >= 0 && keys_.key < IM_ARRAYSIZE(io.KeysDown)) io.KeysDown[keys_.key] = true;
  io.KeyCtrl = now_.ctrl || keys_.ctrl;
  io.KeyShift = io.KeyAlt = io.KeySuper = false;
  if (!keys_.text.empty()) io.AddInputCharactersUTF8(keys_.text.c_str());
  keys_.text.clear();  // typed once
}

}  // namespace kvs
