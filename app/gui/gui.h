// Entry point of the desktop app: opens the GLFW window (or renders headless screenshots) and
// runs the ImGui views over a trace.
#pragma once
#include <string>

namespace kvs {

struct GuiOptions {
  std::string trace_path;       // trace to open at start ("" = none)
  std::string screenshot_path;  // when set: render a few frames, write this PNG and exit
  std::string view;             // view to show/capture: run, timeline, lanes, attention, heads,
                                // layers, metrics, compare, or "all" / "" (all views tiled)
  int step = -1;                // decode step to show (-1 = last)
  int width = 0, height = 0;     // window size; 0 x 0: the last session's within the screen (the
                                // app) or 1600 x 1000 (a screenshot)
  std::string script;           // scripted interaction, e.g. "step+1;select 2 3" (see script.h)
  std::string model_path;       // model preselected in the Run view
  float text_size = 0;          // text size in pixels (text_size.h); 0: the saved one, else the
                                // monitor's (the app) or 15 (a screenshot)
};

// Returns 0; 2 with a one-line message on stderr for bad input in screenshot mode (trace cannot
// be opened, unknown view, bad script), 1 when no window/GL context can be created.
int run_gui(const GuiOptions& options);

}  // namespace kvs
