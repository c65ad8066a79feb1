// The mouse and keyboard of a screenshot's script (`hover`, `click`, `ctrlclick`, `dclick`,
// `rclick`, `wheel`, `drag` in the PNG's pixels; `key`, `type`): given to ImGui through its IO
// every frame in place of the pointer and the keys, so that what a picture shows under Xvfb never
// depends on where a real pointer was left or what a real keyboard did.
#pragma once
#include <string>
#include <vector>

#include "app/gui/script.h"

struct ImGuiIO;

namespace kvs {

// A command of the scripted mouse: played on frames, which only a screenshot draws on its own.
bool is_mouse_command(const ScriptCommand& c);

// A pixel of the window, (0, 0) at its top left, as in the screenshot.
struct PixelPoint {
  int x = 0, y = 0;
  bool operator==(const PixelPoint&) const = default;
};

// The mouse during one frame: where it is, which buttons are down, the wheel's turn in notches
// (+: away from the user, which zooms in), and whether Ctrl is held.
struct MouseFrame {
  PixelPoint at;
  bool left = false, right = false;
  int wheel = 0;
  bool ctrl = false;
  bool operator==(const MouseFrame&) const = default;
};

// Farthest a `drag` moves the mouse in one frame, in pixels: a hand's drag reaches ImGui over
// several frames, each moving the mouse by the frame's delta.
constexpr int kDragStep = 16;

// The frames a mouse command plays, in order, in a window `width` x `height` pixels:
//   hover X Y         one frame with the mouse there (it stays for the frames after)
//   click X Y         there, left button down, up
//   ctrlclick X Y     the same with Ctrl held (a slider's or drag box's value typed in)
//   dclick X Y        there, down, up, down, up (a double-click: 1/60 s a frame, ImGui's limit is 0.3 s)
//   rclick X Y        there, right button down, up
//   wheel X Y N       there, then |N| frames each turning the wheel one notch (N in -20..20, not 0)
//   drag X1 Y1 X2 Y2  at (X1, Y1), left button down, moves of at most kDragStep pixels to
//                     (X2, Y2) with the button down, up there
// A point outside the window or a malformed command is an InputError naming --script and the
// command.
std::vector<MouseFrame> mouse_command_frames(const ScriptCommand& c, int width, int height);

// A keyboard command of the script: played on frames, which only a screenshot draws on its own.
bool is_key_command(const ScriptCommand& c);

// The keyboard during one frame: the key held down (a GLFW key code, as the platform backend
// reports keys to ImGui; -1: none) and the text typed.
struct KeyFrame {
  int key = -1;
  std::string text;
  bool ctrl = false;  // Ctrl held
  bool operator==(const KeyFrame&) const = default;
};

// The frames a keyboard command plays, in order:
//   key NAME   the key down, then up (NAME: left, right, up, down, home, end, space, enter,
//              escape, tab, backspace, delete, f1, =, -, 0)
//   key ctrl+NAME  the same with Ctrl held on both frames (NAME also a letter a-z: ctrl+o)
//   type TEXT  the characters of TEXT typed on one frame
// An unknown key or no text is an InputError naming --script and the command.
std::vector<KeyFrame> key_command_frames(const ScriptCommand& c);

// The mouse and keyboard the frames see. The mouse is off the window (no hover at all) until a
// command places it; no key is down and nothing is typed until a command does it.
class ScriptedInput {
 public:
  // The mouse for the next frame and after (its wheel turns for the next frame only).
  void set(const MouseFrame& f);
  // The keyboard for the next frame and after (its text is typed on the next frame only).
  void set_keys(const KeyFrame& f);
  // Replaces what the platform backend read about the mouse for the frame about to begin: call
  // between the backend's NewFrame and ImGui::NewFrame. ImGui 1.86 has no input-event queue
  // (io.AddMousePosEvent is 1.87's); it reads io.MousePos, io.MouseDown, io.MouseWheel,
  // io.KeysDown and io.KeyCtrl at NewFrame and derives hovers, clicks, releases, drags and key
  // presses from one frame to the next.
  void feed(ImGuiIO& io);

 private:
  bool placed_ = false;
  MouseFrame now_;
  KeyFrame keys_;
};

}  // namespace kvs
