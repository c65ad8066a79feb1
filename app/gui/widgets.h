// Small drawing helpers shared by the views: line plots with legend and hover values (ImDrawList),
// a colour bar, category colours, the lane cell palette, and the pixel under the mouse.
#pragma once
#include <imgui.h>

#include <cmath>
#include <string>
#include <vector>

#include "analysis/lanes.h"
#include "analysis/trace.h"
#include "app/gui/colormap.h"

namespace kvs {

struct Series {
  std::string name;
  ImU32 color = 0;
  std::vector<float> y;  // [n] one value per x = 0..n-1
  bool dashed = false;   // a live run (run_dashed)
  int mark = 0;          // a shape drawn along the line (run_marks); 0 = none
};

// The y axis of a line plot: a fixed range (lo and hi both finite; fractions use 0..1 so that
// small differences are not magnified), a fixed lo only (counts and bytes from 0), or fitted to
// the data; and the unit written after the values (axis labels and hover).
struct PlotAxis {
  float lo = NAN, hi = NAN;
  const char* unit = "";
};

// Line plot filling `size`; a vertical marker at x = marker (-1 = none); hovering shows every
// series' value at the nearest x. A finite value whose neighbours (at the drawing's stride) are
// NaN or absent gets a dot: a series with one compared step among NaNs still shows. Returns the
// x under the mouse when clicked, else -1.
int line_plot(const char* id, const std::vector<Series>& series, ImVec2 size, int marker,
              const char* y_label, const PlotAxis& axis = {});

// The indexes of `y` a line plot marks with a dot, drawing every `stride`-th value: finite values
// with no finite neighbour at that stride (nor, for stride > 1, in the series itself).
std::vector<size_t> isolated_points(const std::vector<float>& y, size_t stride);

// Horizontal colour bar of a colormap with min/max labels.
void color_bar(Colormap map, const char* lo, const char* hi, float width);

// `text` cut to fit `width` pixels, in whole UTF-8 characters, ending in "..." when cut.
std::string elide(const std::string& text, float width);

// Text of a problem shown in place (the status bar's error colour).
inline const ImVec4 kErrorTextColor(1.0f, 0.45f, 0.4f, 1.0f);
// In place of a view's data: the selected step could not be read, and why.
void unreadable_step_notice(int step, const std::string& why);

// A run's colour, from its name and policy alone (not its index: adding a run changes no other
// run's colour). Each policy has a hue of its own, none of them a lane state's colour
// (cell_state_color); parameters other than the policy's defaults are a lighter shade
// (streamingllm_b64 vs streamingllm_sinks0_b64). Live runs (name ending in the mode) take their
// parameter set's colour and are drawn dashed (run_dashed).
ImU32 run_color(const RunData& run);
ImU32 run_color(const std::string& name, const std::string& policy, bool live);
inline bool run_dashed(const RunData& run) { return run.eviction == "real"; }
// The shapes that tell apart runs drawn alike (same colour, both live or both simulated): one
// parameter set at several budgets (h2o_b16, h2o_b32), or two parameter sets sharing their
// policy's lighter shade. Each such run gets a mark 1..kMarkShapes, in order of budget, then name
// (shapes repeat past kMarkShapes runs); a run drawn unlike every other gets 0, a plain line.
constexpr int kMarkShapes = 6;
std::vector<int> run_marks(const std::vector<RunData>& runs);  // [runs]
// Draws mark `mark` (1..kMarkShapes: circle, square, triangle, diamond, inverted triangle, cross)
// centred at `c`, `r` pixels from its centre to its edge; outlined when not `filled`.
void draw_mark(ImDrawList* dl, ImVec2 c, float r, int mark, ImU32 color, bool filled = true);
// A legend entry: a swatch of `color` (filled when shown, outlined when hidden) and the label in
// the text colour (dimmed when hidden); `dashed`: the swatch in two parts, as a dashed line;
// `mark` > 0: a line through the swatch with the mark on it, as the plots draw the run.
// Returns true when clicked.
bool legend_toggle(const char* label, ImU32 color, bool shown, bool dashed = false, int mark = 0);
float legend_toggle_width(const char* label, int mark = 0);  // the width legend_toggle takes
ImU32 cell_state_color(CellState s);   // lane palette
// A legend entry: a square of `color` and its name, continuing the row where it fits (first: it
// starts where the cursor is); outlined: framed, for a colour near the background.
void legend_chip(const char* name, ImU32 color, bool first, bool outlined = false);
// Legend chips for the lane states.
void lane_legend();
// The chip of positions not generated yet at the step (outlined: its colour is near the
// background), after lane_legend on its last row where it fits.
void future_legend_chip();
// Continues the current row (SameLine) when an item `width` pixels wide still fits in the
// window, else lets it start the next row: a narrow panel wraps its controls instead of cutting
// the last ones off at its edge. spacing: the gap before it (< 0: the style's item spacing).
// Returns whether the row continues.
bool same_line_if_fits(float width, float spacing = -1.0f);
// Widths of the items that follow, for same_line_if_fits.
float radio_width(const char* label);
float button_width(const char* label);  // a Button's or a SmallButton's (same side padding)

// The centre of the pixel under the mouse (ImGui's coordinates), for naming the cell under it.
// ImGui's mouse position is the pixel's top-left corner, while a filled rectangle or a texture
// covers the pixels whose centres it holds: where a cell of fractional width starts, a test at
// the corner named the cell on the left of the one its first pixel shows.
ImVec2 mouse_pixel_center();

}  // namespace kvs
