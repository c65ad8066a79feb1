// The mouse of a screenshot's script (`hover X Y`, `click X Y`, in the PNG's pixels): given to
// ImGui through its IO every frame in place of the pointer, so that what a picture shows under
// Xvfb never depends on where a real pointer was left.
#pragma once
#include "app/gui/script.h"

struct ImGuiIO;

namespace kvs {

// `hover` or `click`: a command played on frames, which only a screenshot draws on its own.
bool is_mouse_command(const ScriptCommand& c);

// A pixel of the window, (0, 0) at its top left, as in the screenshot.
struct PixelPoint {
  int x = 0, y = 0;
};

// "X Y" of a mouse command: a pixel of a window `width` x `height` pixels; else an InputError
// naming --script and the command.
PixelPoint mouse_command_point(const ScriptCommand& c, int width, int height);

// Where the scripted mouse is and whether its left button is down. It is off the window (no
// hover at all) until a command places it.
class ScriptedMouse {
 public:
  void move_to(PixelPoint p);
  void set_left_down(bool down) { left_down_ = down; }
  // Replaces what the platform backend read about the mouse for the frame about to begin: call
  // between the backend's NewFrame and ImGui::NewFrame. ImGui 1.86 has no input-event queue
  // (io.AddMousePosEvent is 1.87's); it reads io.MousePos and io.MouseDown at NewFrame and derives
  // hovers, clicks and releases from one frame to the next.
  void feed(ImGuiIO& io) const;

 private:
  bool placed_ = false, left_down_ = false;
  PixelPoint at_;
};

}  // namespace kvs
