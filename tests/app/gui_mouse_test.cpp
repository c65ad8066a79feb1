// The scripted mouse and keyboard under Xvfb (`hover`, `click`, `ctrlclick`, `dclick`, `rclick`,
// `wheel`, `drag`, `key`, `type`) on each view's documented interactions (docs/gui.md):
//   head grid: a click selects the head under it, exactly as `select L H` does;
//   layer similarity: a click on the matrix selects its column's layer as `layer L` does;
//   metrics: a click on a plot moves the timeline as `step N` does; the legend hides and shows a
//     run; a plot's hover lists the runs shown with their values, a title's says what it measures;
//   compare: the run pickers choose A and B as `runs A B` does;
//   lanes: "selected head only" and the zoom slider take clicks as `lanes head`, `zoom X` do;
//   layer similarity: the "filter layers k" slider takes a click as `filters K` does;
//   timeline: |<, <, >, >|, the step slider and the keys <-, ->, Home, End move the step as
//     `step N` does; F1 shows the help and hides it;
//   lanes: a zoom typed into the slider is taken, within the slider's range;
//   lanes, attention map, head grid, layer similarity, Compare's strips: hovering a cell shows a
//     tooltip beside the mouse naming what is under it (what the pixel shows; past the query, no
//     attention);
//   attention map: the wheel zooms about the mouse, keeping the cell under it (the first pixel
//     of a cell too) and scrolling no short panel; a drag pans (a short one too); a double-click
//     resets (one begun on a list over the map does not); a right-click shows a row's step;
// and bad points exit 2 with one line. Where a control or a cell is, is read off the pictures
// (the selection's outline, the lanes' and runs' colours, the plot's frame), not hard-coded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/app/gui_screenshot.h"

#ifdef KVSCOPE_GUI
#include "analysis/lanes.h"
#include "app/gui/widgets.h"
#endif

namespace fs = std::filesystem;
using namespace kvs::gui_test;

namespace {

// The first `rows` rows of where two pictures differ: the topmost control a script command
// changed (a slider's grab, a checkbox's mark, a combo's text).
Box top_diff(const Image& a, const Image& b, int rows = 12) {
  const int y0 = diff_box(a, b).y0;
  return box_of(a, [&](int x, int y) { return y >= y0 && y < y0 + rows && !same_pixel(a, b, x, y); });
}

// Where two pictures differ right of column x0 (a plot's hover marks the step under the mouse
// with a line just left of the tooltip).
Box diff_right_of(const Image& a, const Image& b, int x0) {
  return box_of(a, [&](int x, int y) { return x > x0 && !same_pixel(a, b, x, y); });
}

// The list a click on a combo opened: where the picture with it open (`open`) differs from the one
// with the mouse on the combo (`hover`) below the combo's frame, whose text (`text`) is at its
// middle. Opening it changes the frame too (the list takes the hover from it).
Box list_below(const Image& open, const Image& hover, const Box& text) {
  const Box changed = diff_box(open, hover);
  const int frame_bottom = 2 * text.center().y - changed.y0;
  return box_of(open, [&](int x, int y) { return y > frame_bottom && !same_pixel(open, hover, x, y); });
}

// The middle of row `row` of a combo's list of `rows` rows.
Point list_row(const Box& list, int row, int rows) { return {list.x0 + 20, list.y0 + list.height() * (2 * row + 1) / (2 * rows)}; }

bool white(const Image& img, int x, int y) {
  const unsigned char* p = img.at(x, y);
  return p[0] >= 200 && p[1] >= 200 && p[2] >= 200;
}

// The head grid's selection outline in `selected` that is not in `other` (the same view with
// another head selected): white where the two differ.
Box selection_outline(const Image& selected, const Image& other) {
  return box_of(selected, [&](int x, int y) { return !same_pixel(selected, other, x, y) && white(selected, x, y); });
}

double luminance(const Image& img, int x, int y) {
  const unsigned char* p = img.at(x, y);
  return 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
}

// The tooltip a hover added to the picture without it: where they differ. ImGui puts it beside
// the mouse, right of it and below its tip, unless it would leave the window.
Box tooltip_box(const Image& hovered, const Image& plain, Point mouse) {
  const Box b = diff_box(hovered, plain);
  EXPECT_FALSE(b.empty()) << "no tooltip for the mouse at " << mouse.x << "," << mouse.y;
  EXPECT_GE(b.x0, mouse.x) << "tooltip not right of the mouse";
  EXPECT_LE(b.x0, mouse.x + 40) << "tooltip not beside the mouse";
  EXPECT_GE(b.y0, mouse.y - 10) << "tooltip not below the mouse";
  EXPECT_LE(b.y0, mouse.y + 40) << "tooltip not beside the mouse";
  EXPECT_LE(b.width(), 700);
  EXPECT_LE(b.height(), 300);
  return b;
}

// Pixels where one tooltip's text is surely ink (bright) and the other's surely background
// (dark), lined up at their top-left corners. The tooltip's background lets ~6% of what lies
// under it through, which shifts a pixel far less than from one class to the other, so the same
// text over different cells gives 0.
size_t text_differences(const Image& a, Box ba, const Image& b, Box bb) {
  // The outer 4 px are left out: the tooltip's corners are rounded (3 px; what lies under them
  // shows through whole), and its text sits inside 8 px of padding.
  constexpr int kEdge = 4;
  size_t n = 0;
  for (int y = kEdge; y < std::max(ba.height(), bb.height()) - kEdge; ++y)
    for (int x = kEdge; x < std::max(ba.width(), bb.width()) - kEdge; ++x) {
      const auto lum = [&](const Image& img, Box box) {
        return x < box.width() && y < box.height() ? luminance(img, box.x0 + x, box.y0 + y) : 0.0;
      };
      const double la = lum(a, ba), lb = lum(b, bb);
      n += (la > 160 && lb < 60) || (lb > 160 && la < 60);
    }
  return n;
}

// The first pixels of 8 cells spread over row y of `plain` between x_from and x_to: pixels unlike
// the one on their left and unlike `gap`, the colour between cells, if any (none when fewer than
// 16 cells start there). Spread, because the cells' starts drift slowly across the pixels' halves:
// 8 neighbours may all start on the same half.
std::vector<int> cell_starts(const Image& plain, int y, int x_from, int x_to, const unsigned char* gap) {
  const auto differ = [&](int x, const unsigned char* other) { return !std::equal(plain.at(x, y), plain.at(x, y) + 3, other); };
  std::vector<int> all, starts;
  for (int x = x_from + 1; x < x_to; ++x)
    if (differ(x, plain.at(x - 1, y)) && (!gap || differ(x, gap))) all.push_back(x);
  if (all.size() < 16) return starts;
  for (size_t i = 0; i < 8; ++i) starts.push_back(all[i * all.size() / 8]);
  return starts;
}

// The head grid's cells, from the selection outlines of its first cell (0, 0) and its last.
struct GridCells {
  Box first, last;
  int rows = 0, cols = 0;
  double pitch_x() const { return (last.center().x - first.center().x) / double(cols - 1); }
  double pitch_y() const { return (last.center().y - first.center().y) / double(rows - 1); }
  Point center(int row, int col) const {
    return {first.center().x + (int)std::lround(col * pitch_x()), first.center().y + (int)std::lround(row * pitch_y())};
  }
};

class GuiMouse : public ScreenshotFixture {
 protected:
  // Hovers the first pixel of 8 cells spread over row y of `plain` (cell_starts), then the pixel 3
  // to its right: both tooltips must read the same.
  void expect_first_pixels_name_their_cells(const std::string& view, const std::string& size, const Image& plain, int y,
                                            int x_from, int x_to, const unsigned char* gap) {
    const std::vector<int> starts = cell_starts(plain, y, x_from, x_to, gap);
    ASSERT_EQ(starts.size(), 8u) << view;
    std::vector<std::pair<std::string, std::string>> hovers;
    for (int x : starts) {
      hovers.push_back({"start" + std::to_string(x), "hover " + at(Point{x, y})});
      hovers.push_back({"inside" + std::to_string(x), "hover " + at(Point{x + 3, y})});
    }
    const auto got = shots(view, size, hovers);
    ASSERT_EQ(got.size(), hovers.size());
    for (size_t i = 0; i < starts.size(); ++i) {
      SCOPED_TRACE(view + ": the cell starting at x = " + std::to_string(starts[i]));
      const Point start{starts[i], y}, inside{starts[i] + 3, y};
      const Image &at_start = got[2 * i], &at_inside = got[2 * i + 1];
      EXPECT_EQ(text_differences(at_start, tooltip_box(at_start, plain, start), at_inside, tooltip_box(at_inside, plain, inside)),
                0u);
    }
  }

  // Hovers a cell at `a`, the same cell at `a_too`, and another cell at `b` (each after `script`):
  // the first two tooltips must read the same, the third otherwise.
  void expect_tooltips_name_cells(const std::string& view, const std::string& size, const std::string& script, Point a,
                                  Point a_too, Point b) {
    const std::string then = script.empty() ? "" : script + ";";
    const auto got = shots(view, size,
                           {{"plain", script}, {"a", then + "hover " + at(a)}, {"a_too", then + "hover " + at(a_too)},
                            {"b", then + "hover " + at(b)}});
    ASSERT_EQ(got.size(), 4u);
    const Box ta = tooltip_box(got[1], got[0], a), ta_too = tooltip_box(got[2], got[0], a_too),
              tb = tooltip_box(got[3], got[0], b);
    EXPECT_EQ(text_differences(got[1], ta, got[2], ta_too), 0u) << view << ": one cell, two texts";
    EXPECT_GT(text_differences(got[1], ta, got[3], tb), 20u) << view << ": two cells, one text";
  }

  // The head grid of the test trace (3 layers x 4 heads, sink mass per query head) at `size`.
  GridCells head_grid_cells(const std::string& size) {
    const auto corners = shots("heads", size, {{"first", "select 0 0"}, {"last", "select 2 3"}});
    GridCells g;
    g.rows = 3, g.cols = 4;
    if (corners.size() != 2u) {
      ADD_FAILURE() << "no head grid";
      return g;
    }
    g.first = selection_outline(corners[0], corners[1]), g.last = selection_outline(corners[1], corners[0]);
    EXPECT_FALSE(g.first.empty());
    EXPECT_FALSE(g.last.empty());
    return g;
  }
};

// The test trace has 3 layers x 4 heads; the grid shows sink mass per query head.
TEST_F(GuiMouse, ClickOnTheHeadGridSelectsTheHeadUnderIt) {
  const std::string size = "800x600";
  // The grid's geometry from the outlines of two selections: cell (0, 0) and cell (2, 3).
  const GridCells grid = head_grid_cells(size);
  ASSERT_GT(grid.pitch_x(), 10.0);
  ASSERT_GT(grid.pitch_y(), 10.0);
  // Cell (layer 1, head 2), selected by neither picture above nor by default.
  const Point cell = grid.center(1, 2);
  const auto got = shots("heads", size,
                         {{"click", "click " + at(cell)},
                          {"select_hover", "select 1 2;hover " + at(cell)},
                          {"select", "select 1 2"},
                          {"hover", "hover " + at(cell)}});
  ASSERT_EQ(got.size(), 4u);
  const Image &click = got[0], &select_hover = got[1], &select = got[2], &hover = got[3];
  // The click selected (1, 2): the picture is the scripted selection's with the mouse there.
  EXPECT_EQ(differing_pixels(click, select_hover), 0u);
  // It changed the selection: hovering alone does not move the outline.
  EXPECT_GT(differing_pixels(click, hover), 100u);
  // Against the selection without the mouse, only the cell's tooltip differs.
  tooltip_box(click, select, cell);
}

// Layer similarity: a click on a cell of the matrix selects its column's layer, as `layer L` does.
// The columns' geometry comes from the selected layer's outline (a column of the matrix): the
// pictures with layer 0 and with layer 2 selected differ over both outlines, which span the
// matrix from its first column's left edge to its last one's right edge.
TEST_F(GuiMouse, ClickOnTheLayerSimilaritySelectsItsColumnsLayer) {
  const std::string size = "900x700";
  const auto corners = shots("layers", size, {{"first", "layer 0"}, {"last", "layer 2"}});
  ASSERT_EQ(corners.size(), 2u);
  const Box matrix = diff_box(corners[0], corners[1]);
  ASSERT_FALSE(matrix.empty());
  const double pitch = matrix.width() / 3.0;  // the test trace's 3 layers
  ASSERT_GT(pitch, 10.0);
  ASSERT_NEAR(matrix.height(), 3 * pitch, 3.0);  // a square: the outlines' columns, nothing else
  // Layer 1's column, in the matrix's top row (layer 0's keys against layer 1's attention).
  const Point cell{matrix.x0 + (int)(1.5 * pitch), matrix.y0 + (int)(pitch / 2)};
  const auto got = shots("layers", size,
                         {{"click", "layer 0;click " + at(cell)}, {"layer_hover", "layer 1;hover " + at(cell)},
                          {"hover", "layer 0;hover " + at(cell)}});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);   // the click is `layer 1`, the mouse left there
  EXPECT_GT(differing_pixels(got[0], got[2]), 50u);  // hovering alone leaves layer 0 selected
}

// The first metrics plot's frame, found by its fill (line_plot's (24, 24, 28)): the top row of
// the fill and its run from the left (the border and the current step's marker, at step 15 on the
// right edge, take a pixel at each end); steps 0..15 span x0..x1.
struct PlotFrame {
  int top = -1;
  double x0 = 0, x1 = 0;
  Point at_step(int step, int below_top) const { return {(int)std::lround(x0 + (x1 - x0) * step / 15), top + below_top}; }
};

PlotFrame first_plot_frame(const Image& img) {
  const unsigned char fill[3] = {24, 24, 28};
  const auto filled = [&](int x, int y) { return x < img.w && std::equal(fill, fill + 3, img.at(x, y)); };
  PlotFrame f;
  int left = -1, right = -1;
  for (int y = 0; y < img.h && f.top < 0; ++y)
    for (int x = 0; x < img.w && f.top < 0; ++x)
      if (filled(x, y) && filled(x + 50, y)) f.top = y, left = x;
  if (f.top < 0) return f;
  for (right = left; filled(right + 1, f.top);) ++right;
  f.x0 = left - 1, f.x1 = right + 1;
  return f;
}

// Metrics: a click on a plot moves the timeline to the step under the mouse.
TEST_F(GuiMouse, ClickOnAMetricsPlotMovesTheTimeline) {
  const std::string size = "900x600";
  const auto plain = shots("metrics", size, {{"plain", ""}});
  ASSERT_EQ(plain.size(), 1u);
  const PlotFrame frame = first_plot_frame(plain[0]);
  ASSERT_GE(frame.top, 0) << "no plot";
  const Point step5 = frame.at_step(5, 20);
  const auto got = shots("metrics", size,
                         {{"click", "click " + at(step5)}, {"step_hover", "step 5;hover " + at(step5)}, {"hover", "hover " + at(step5)}});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);  // the click is `step 5`, the mouse left there
  EXPECT_GT(differing_pixels(got[0], got[2]), 50u);  // and moved the marker from step 15
}

// Metrics: a click on a run's entry in the legend hides its lines (no pixel of its colour is left
// below the legend), a second click shows them again; a plot's hover lists the runs shown with
// their values at the step under the mouse (another step, other values; a run hidden, a line
// less); a plot's title tells on hover what the metric measures.
TEST_F(GuiMouse, MetricsLegendTogglesRunsAndHoverShowsValues) {
#ifdef KVSCOPE_GUI
  const std::string size = "900x600", away = "hover 1 1";  // the window's title bar: no tooltip
  const auto plain = shots("metrics", size, {{"plain", ""}});
  ASSERT_EQ(plain.size(), 1u);
  const ImU32 c = kvs::run_color("h2o_b12", "h2o", false);  // a run of the test trace
  const auto is_run = [&](const Image& img, int x, int y) {
    const unsigned char* p = img.at(x, y);
    return p[0] == (c & 255) && p[1] == ((c >> 8) & 255) && p[2] == ((c >> 16) & 255);
  };
  // The legend's swatch: the topmost pixels of the run's colour.
  const Box any = box_of(plain[0], [&](int x, int y) { return is_run(plain[0], x, y); });
  ASSERT_FALSE(any.empty());
  const Box swatch = box_of(plain[0], [&](int x, int y) { return y < any.y0 + 16 && is_run(plain[0], x, y); });
  const auto below_legend = [&](const Image& img) {
    return box_of(img, [&](int x, int y) { return y > swatch.y1 + 4 && is_run(img, x, y); });
  };
  ASSERT_FALSE(below_legend(plain[0]).empty()) << "no line of the run in the plots";
  const PlotFrame frame = first_plot_frame(plain[0]);
  ASSERT_GE(frame.top, 0) << "no plot";
  const Point step5 = frame.at_step(5, 20), step10 = frame.at_step(10, 20);
  const std::string toggle = "click " + at(swatch.center()) + ";";
  // The title above the frame: the lowest row with text left of the frame's middle.
  int title_y = -1;
  for (int y = frame.top - 1; y > swatch.y1 && title_y < 0; --y)
    for (int x = 0; x < (int)(frame.x0 + frame.x1) / 2 && title_y < 0; ++x)
      if (luminance(plain[0], x, y) > 150) title_y = y;
  ASSERT_GE(title_y, 0) << "no title";
  const Point title{(int)frame.x0 + 20, title_y - 4};
  const auto got = shots("metrics", size,
                         {{"hidden", toggle + away},
                          {"shown_again", toggle + toggle + away},
                          {"step5", "hover " + at(step5)},
                          {"step10", "hover " + at(step10)},
                          {"hidden_step5", toggle + "hover " + at(step5)},
                          {"title", "hover " + at(title)}});
  ASSERT_EQ(got.size(), 6u);
  const Image &hidden = got[0], &shown_again = got[1], &at5 = got[2], &at10 = got[3], &hidden_at5 = got[4];
  EXPECT_TRUE(below_legend(hidden).empty()) << "the hidden run's colour is still drawn";
  EXPECT_EQ(differing_pixels(shown_again, plain[0]), 0u);
  // The tooltips, right of the line the hover draws at the step.
  const Box t5 = diff_right_of(at5, plain[0], step5.x + 3), t10 = diff_right_of(at10, plain[0], step10.x + 3);
  const Box hidden_t5 = diff_right_of(hidden_at5, hidden, step5.x + 3);
  for (const auto& [t, mouse] : {std::pair{t5, step5}, {t10, step10}, {hidden_t5, step5}}) {
    ASSERT_FALSE(t.empty()) << "no tooltip";
    EXPECT_LE(t.x0, mouse.x + 40) << "tooltip not beside the mouse";
  }
  EXPECT_GT(text_differences(at5, t5, at10, t10), 20u);  // "step 5" and its values, "step 10" and its
  EXPECT_GT(t5.height(), hidden_t5.height() + 10);       // the hidden run's line gone
  tooltip_box(got[5], plain[0], title);
#else
  GTEST_SKIP() << "built without the desktop app";
#endif
}

// Compare: the run pickers. A click on A's combo opens the list of runs below it, a click on a
// run there shows it as A, as `runs` does; B's likewise. A combo is where its text changes
// between two pictures, the list where opening it changed the picture; a row per run of the test
// trace's three.
TEST_F(GuiMouse, CompareRunPickersChooseTheRuns) {
  const std::string size = "1000x700";
  // The defaults: A = run 0, B = run 1.
  const auto refs = shots("compare", size, {{"plain", ""}, {"a2", "runs 2 1"}, {"b0", "runs 0 0"}});
  ASSERT_EQ(refs.size(), 3u);
  const Box a_text = top_diff(refs[0], refs[1]), b_text = top_diff(refs[0], refs[2]);
  ASSERT_FALSE(a_text.empty());
  ASSERT_FALSE(b_text.empty());
  EXPECT_GT(b_text.x0, a_text.x1) << "B's combo right of A's";
  const Point a_combo{a_text.x0 + 10, a_text.center().y}, b_combo{b_text.x0 + 10, b_text.center().y};
  const auto opened = shots("compare", size,
                            {{"open_a", "click " + at(a_combo)}, {"hover_a", "hover " + at(a_combo)},
                             {"open_b", "click " + at(b_combo)}, {"hover_b", "hover " + at(b_combo)}});
  ASSERT_EQ(opened.size(), 4u);
  const Box a_list = list_below(opened[0], opened[1], a_text), b_list = list_below(opened[2], opened[3], b_text);
  ASSERT_FALSE(a_list.empty()) << "A's combo did not open";
  ASSERT_FALSE(b_list.empty()) << "B's combo did not open";
  const Point a_run2 = list_row(a_list, 2, 3), b_run0 = list_row(b_list, 0, 3);
  const auto got = shots("compare", size,
                         {{"pick_a", "click " + at(a_combo) + ";click " + at(a_run2)}, {"runs_a", "runs 2 1;hover " + at(a_run2)},
                          {"pick_b", "click " + at(b_combo) + ";click " + at(b_run0)}, {"runs_b", "runs 0 0;hover " + at(b_run0)}});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);
  EXPECT_EQ(differing_pixels(got[2], got[3]), 0u);
}

// Lanes: a click on "selected head only" shows the selected head's lanes as `lanes head` does; a
// click at the zoom slider's right end zooms them 64x as `zoom 64` does. The checkbox is where
// its mark appears, the slider's end where its grab is at 64x.
TEST_F(GuiMouse, LanesCheckboxAndZoomSliderTakeClicks) {
  const std::string size = "1400x600";
  const auto refs = shots("lanes", size, {{"plain", ""}, {"head", "lanes head"}, {"zoom", "zoom 64"}});
  ASSERT_EQ(refs.size(), 3u);
  const Box mark = top_diff(refs[0], refs[1]), grab = top_diff(refs[0], refs[2]);
  ASSERT_FALSE(mark.empty());
  ASSERT_FALSE(grab.empty());
  const Point box{mark.x0 + 2, mark.center().y}, end{grab.x1 - 1, grab.center().y};
  const auto got = shots("lanes", size,
                         {{"check", "click " + at(box)}, {"head", "lanes head;hover " + at(box)},
                          {"slide", "click " + at(end)}, {"zoom", "zoom 64;hover " + at(end)}});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);
  EXPECT_EQ(differing_pixels(got[2], got[3]), 0u);
}

// Layer similarity: a click at the right end of the "filter layers k" slider chooses k = 2 (the
// test trace's 3 layers less one) as `filters 2` does; the slider is where its grab moves.
TEST_F(GuiMouse, LayersFilterSliderTakesAClick) {
  const std::string size = "900x700";
  const auto refs = shots("layers", size, {{"plain", ""}, {"k2", "filters 2"}});
  ASSERT_EQ(refs.size(), 2u);
  const Box grab = top_diff(refs[0], refs[1]);
  ASSERT_FALSE(grab.empty());
  const Point end{grab.x1 - 1, grab.center().y};
  const auto got = shots("layers", size, {{"slide", "click " + at(end)}, {"k2", "filters 2;hover " + at(end)}});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);
}

// Timeline: the buttons |<, <, >, >| and the step slider move the timeline as `step N` does. The
// slider's row is where its grab moves; the buttons are the first five stretches of that row
// unlike the window's background (a button's text lies on its own colour).
TEST_F(GuiMouse, TimelineButtonsAndSliderMoveTheStep) {
  const std::string size = "900x300";
  const auto refs = shots("timeline", size, {{"plain", ""}, {"first", "step 0"}});  // it opens at step 15
  ASSERT_EQ(refs.size(), 2u);
  const Image& plain = refs[0];
  const Box grab = top_diff(plain, refs[1]);
  ASSERT_FALSE(grab.empty());
  const int y = grab.center().y;
  const unsigned char* bg = plain.at(2, y);
  std::vector<Point> stretches;  // the middle of each
  for (const auto& [x0, x1] : row_runs(plain, y, 2, plain.w, bg)) stretches.push_back({(x0 + x1) / 2, y});
  ASSERT_GE(stretches.size(), 5u);
  const Point first = stretches[0], back = stretches[1], forward = stretches[3], last = stretches[4];
  const Point slider_start{grab.x0 + 2, y};
  const auto got = shots("timeline", size,
                         {{"first", "click " + at(first)}, {"step0", "step 0;hover " + at(first)},
                          {"back", "click " + at(back)}, {"step14", "step 14;hover " + at(back)},
                          {"forward", "step 3;click " + at(forward)}, {"step4", "step 4;hover " + at(forward)},
                          {"last", "step 3;click " + at(last)}, {"step15", "step 15;hover " + at(last)},
                          {"slide", "click " + at(slider_start)}, {"slid0", "step 0;hover " + at(slider_start)}});
  ASSERT_EQ(got.size(), 10u);
  for (size_t i = 0; i < got.size(); i += 2) {
    SCOPED_TRACE("picture " + std::to_string(i));
    EXPECT_EQ(differing_pixels(got[i], got[i + 1]), 0u);
  }
}

// Timeline: a playback speed typed into the steps/s slider (the first control after the five
// buttons) past its range, 0.5..60, stays at its end: 500 shows as 60 does, 0 as 0.5.
TEST_F(GuiMouse, ASpeedTypedIntoTheTimelineStaysInItsRange) {
  const std::string size = "900x300";
  const auto refs = shots("timeline", size, {{"plain", ""}, {"first", "step 0"}});
  ASSERT_EQ(refs.size(), 2u);
  const Box grab = top_diff(refs[0], refs[1]);  // the step slider's grab: on the buttons' row
  ASSERT_FALSE(grab.empty());
  const int y = grab.center().y;
  const auto stretches = row_runs(refs[0], y, 2, refs[0].w, refs[0].at(2, y));
  ASSERT_GE(stretches.size(), 6u);
  const Point speed{(stretches[5].first + stretches[5].second) / 2, y};
  const Point away{2, refs[0].h - 3};
  auto typed = [&](const std::string& v) { return "ctrlclick " + at(speed) + ";type " + v + ";key enter;hover " + at(away); };
  const auto got = shots("timeline", size,
                         {{"s500", typed("500")}, {"s60", typed("60")}, {"s0", typed("0")}, {"s05", typed("0.5")}});
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);
  EXPECT_EQ(differing_pixels(got[2], got[3]), 0u);
  EXPECT_GT(differing_pixels(got[1], got[3]), 0u) << "typing did not reach the speed slider";
}

// Three lanes (the runs' rows below the attention row), each with a long stretch of tokens
// evicted earlier: the bands of that colour, top to bottom, with their horizontal extent.
std::vector<Box> evicted_earlier_bands(const Image& img) {
#ifdef KVSCOPE_GUI
  const ImU32 c = kvs::cell_state_color(kvs::CellState::kEvictedEarlier);
  const auto is_color = [&](int x, int y) {
    const unsigned char* p = img.at(x, y);
    return p[0] == (c & 255) && p[1] == ((c >> 8) & 255) && p[2] == ((c >> 16) & 255);
  };
  std::vector<Box> bands;
  bool in_band = false;
  for (int y = 0; y < img.h; ++y) {
    Box row;
    for (int x = 0; x < img.w; ++x)
      if (is_color(x, y)) row.x0 = std::min(row.x0, x), row.x1 = std::max(row.x1, x);
    const bool lane = !row.empty() && row.width() > img.w / 4;  // not the legend's chip
    if (lane && !in_band) bands.push_back(Box{row.x0, y, row.x1, y});
    if (lane) bands.back().y1 = y, bands.back().x0 = std::min(bands.back().x0, row.x0),
              bands.back().x1 = std::max(bands.back().x1, row.x1);
    in_band = lane;
  }
  return bands;
#else
  return {};
#endif
}

TEST_F(GuiMouse, HoveringALaneCellShowsWhatIsThere) {
  const std::string size = "1400x600";  // room on the right of the cells for the tooltip
  const auto plain = shots("lanes", size, {{"plain", ""}});
  ASSERT_EQ(plain.size(), 1u);
  const std::vector<Box> bands = evicted_earlier_bands(plain[0]);
  ASSERT_EQ(bands.size(), 3u) << "the lanes of h2o, streamingllm and streamingllm without sinks";
  // Two tokens of the last lane far apart, and the first of them in the lane above.
  const Box& lane = bands[2];
  const Point a{lane.x0 + lane.width() / 8, lane.center().y}, b{lane.x0 + lane.width() / 3, lane.center().y};
  const Point above{a.x, bands[1].center().y};
  const auto got = shots("lanes", size, {{"a", "hover " + at(a)}, {"b", "hover " + at(b)}, {"above", "hover " + at(above)}});
  ASSERT_EQ(got.size(), 3u);
  const Box ta = tooltip_box(got[0], plain[0], a), tb = tooltip_box(got[1], plain[0], b);
  const Box tabove = tooltip_box(got[2], plain[0], above);
  // Another token, another text (its position); another run, another text (the run's name).
  EXPECT_GT(text_differences(got[0], ta, got[1], tb), 20u);
  EXPECT_GT(text_differences(got[0], ta, got[2], tabove), 20u);
  // The same cell a little lower: the same text over other pixels (what the checks above rely on).
  const Point a_lower{a.x, a.y + 3};
  const auto again = shots("lanes", size, {{"again", "hover " + at(a_lower)}});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(text_differences(got[0], ta, again[0], tooltip_box(again[0], plain[0], a_lower)), 0u);
}

// Cells of fractional width (56 tokens in 908 px of lanes, in 838 px of the attention map):
// where one starts, its first pixel shows it, and the mouse there must name it, as a few pixels
// further in. ImGui's mouse position is a pixel's top-left corner, while a rectangle or a texture
// covers the pixels whose centres it holds: a hit test at the corner named the cell on the left
// for the first pixel of about half the cells.
TEST_F(GuiMouse, TooltipNamesTheCellThePixelShows) {
  const auto lanes = shots("lanes", "1400x600", {{"lanes", ""}});
  ASSERT_EQ(lanes.size(), 1u);
  const std::vector<Box> bands = evicted_earlier_bands(lanes[0]);
  ASSERT_EQ(bands.size(), 3u);
  // The attention row above the runs' lanes: a cell per token, each of its own colour, 1 px apart.
  const int y = bands[0].y0 - 2 - bands[0].height() / 2, x0 = bands[2].x0;  // the last lane starts at token 0
  // Up to where a tooltip still fits on the right of the mouse.
  expect_first_pixels_name_their_cells("lanes", "1400x600", lanes[0], y, x0, std::min(bands[2].x1, 1400 - 520),
                                       lanes[0].at(x0 - 1, y));
  // The decode map, across the keys of step 7 (keys 0..47 generated by then).
  const auto map = shots("attention", "900x600", {{"map", ""}});
  ASSERT_EQ(map.size(), 1u);
  expect_first_pixels_name_their_cells("attention", "900x600", map[0], 300, 90, 700, nullptr);
}

TEST_F(GuiMouse, HoveringTheAttentionMapShowsTheCell) {
  const std::string size = "900x600";
  // The decode map fills most of the view: a point left of its middle, and one 60 px (4 keys of
  // the 56) to its right.
  const Point a{900 * 3 / 10, 600 / 2}, b{a.x + 60, a.y};
  const auto got = shots("attention", size, {{"plain", ""}, {"a", "hover " + at(a)}, {"b", "hover " + at(b)}});
  ASSERT_EQ(got.size(), 3u);
  const Box ta = tooltip_box(got[1], got[0], a), tb = tooltip_box(got[2], got[0], b);
  EXPECT_GT(text_differences(got[1], ta, got[2], tb), 20u);
}

// The head grid: a cell's tooltip names its layer and head and the statistics there, the same
// anywhere in the cell.
TEST_F(GuiMouse, HoveringTheHeadGridShowsTheCell) {
  const std::string size = "1400x600";  // room on the right of the cells for the tooltip
  const GridCells grid = head_grid_cells(size);
  ASSERT_GT(grid.pitch_x(), 10.0);
  ASSERT_GT(grid.pitch_y(), 10.0);
  const Point a = grid.center(1, 1), b = grid.center(2, 0);
  const Point a_too{a.x + (int)(grid.pitch_x() / 4), a.y - (int)(grid.pitch_y() / 4)};
  expect_tooltips_name_cells("heads", size, "", a, a_too, b);
}

// The layer similarity: a cell's tooltip names the two layers (row: whose top-K keys; column: whose
// attention) and the share, the same anywhere in the cell. The matrix is where the outlines of
// layer 0's column and layer 2's differ (as in the click test above).
TEST_F(GuiMouse, HoveringTheLayerSimilarityShowsTheCell) {
  const std::string size = "1400x700";
  const auto corners = shots("layers", size, {{"first", "layer 0"}, {"last", "layer 2"}});
  ASSERT_EQ(corners.size(), 2u);
  const Box matrix = diff_box(corners[0], corners[1]);
  ASSERT_FALSE(matrix.empty());
  const double pitch = matrix.width() / 3.0;  // the test trace's 3 layers
  ASSERT_GT(pitch, 10.0);
  const auto cell = [&](int row, int col) {
    return Point{matrix.x0 + (int)((col + 0.5) * pitch), matrix.y0 + (int)((row + 0.5) * pitch)};
  };
  // Another row and column for b: the synthetic trace's similarity changes along a row only.
  const Point a = cell(0, 1), b = cell(1, 2);
  const Point a_too{a.x - (int)(pitch / 4), a.y + (int)(pitch / 4)};
  expect_tooltips_name_cells("layers", size, "layer 0", a, a_too, b);
}

// Compare's strip of the two runs' difference (a cell per position, coloured only A, only B,
// both or neither): a cell's tooltip names the position, its token and which run holds it, the
// same anywhere in the cell. (Which cell the first pixel of a cell names is tested on the lanes
// and the map, whose hit tests, like the strip's, take the mouse at its pixel's centre: on this
// strip only a boundary between two colours could show it.)
TEST_F(GuiMouse, HoveringACompareStripCellShowsWhatIsThere) {
  const std::string size = "1400x700";
  const auto plain = shots("compare", size, {{"plain", ""}});
  ASSERT_EQ(plain.size(), 1u);
  const Image& img = plain[0];
  // The strip: the rows where most pixels have its four colours.
  const unsigned char colours[4][3] = {{240, 110, 190}, {170, 230, 60}, {120, 120, 128}, {40, 40, 44}};
  const auto in_strip = [&](int x, int y) {
    return std::any_of(std::begin(colours), std::end(colours), [&](const unsigned char* c) { return std::equal(c, c + 3, img.at(x, y)); });
  };
  std::vector<int> per_row(img.h, 0);
  for (int y = 0; y < img.h; ++y)
    for (int x = 0; x < img.w; ++x) per_row[y] += in_strip(x, y);
  const Box strip = box_of(img, [&](int x, int y) { return per_row[y] > img.w / 2 && in_strip(x, y); });
  ASSERT_FALSE(strip.empty()) << "no difference strip";
  const int y = strip.center().y;
  const int cell = strip.width() / 56;  // the test trace's 56 positions
  const Point a{strip.x0 + 3 * cell + cell / 2, y}, a_too{a.x + cell / 4, y + 2}, b{strip.x0 + 20 * cell + cell / 2, y};
  expect_tooltips_name_cells("compare", size, "", a, a_too, b);
}

// Past a row's query no attention can fall (the map's dark cells): the tooltip says so on one line
// where it named the key and "attention 0" on two (in a decode row, a token the step had not
// generated yet).
TEST_F(GuiMouse, PastTheQueryTheMapSaysNoAttention) {
  const unsigned char past_query[3] = {38, 38, 44};  // the map's colour there
  for (const std::string map : {"decode", "prefill"}) {
    SCOPED_TRACE(map + " map");
    const std::string size = "1600x600", script = "map " + map;
    const auto plain = shots("attention", size, {{"plain", script}});
    ASSERT_EQ(plain.size(), 1u);
    // A row near the top (decode step 2, prefill query 5): a key past its query, and the last key
    // it attends, left of the first past it.
    const int y = 600 / 4;
    int first = -1;
    for (int x = 0; x < plain[0].w && first < 0; ++x)
      if (std::equal(past_query, past_query + 3, plain[0].at(x, y))) first = x;
    ASSERT_GE(first, 0) << "no key past the query in row " << y;
    const Point past{first + 20, y}, attended{first - 10, y};
    const auto got = shots("attention", size, {{"past", script + ";hover " + at(past)}, {"attended", script + ";hover " + at(attended)}});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_LT(tooltip_box(got[0], plain[0], past).height() + 10, tooltip_box(got[1], plain[0], attended).height());
  }
}

// Lanes: a zoom typed into the slider (Ctrl+click, the digits, Enter) is taken as `zoom X` takes
// it, and one past the slider's range stays at its end (typed values were not clamped: 500x
// zoomed the lanes past the slider's 64x, and 0 left no lanes to see).
TEST_F(GuiMouse, AZoomTypedIntoTheLanesSliderStaysInItsRange) {
  const std::string size = "1400x600";
  const auto refs = shots("lanes", size, {{"plain", ""}, {"zoom", "zoom 64"}});
  ASSERT_EQ(refs.size(), 2u);
  const Box grab = top_diff(refs[0], refs[1]);
  ASSERT_FALSE(grab.empty());
  const Point slider{grab.x1 - 1, grab.center().y};
  const std::string type = "ctrlclick " + at(slider) + ";type ";
  const auto got = shots("lanes", size,
                         {{"typed8", type + "8;key enter"}, {"zoom8", "zoom 8;hover " + at(slider)},
                          {"typed500", type + "500;key enter"}, {"zoom64", "zoom 64;hover " + at(slider)},
                          {"typed0", type + "0;key enter"}, {"zoom1", "zoom 1;hover " + at(slider)}});
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);  // typing reaches the slider
  EXPECT_EQ(differing_pixels(got[2], got[3]), 0u);
  EXPECT_EQ(differing_pixels(got[4], got[5]), 0u);
}

// Layers and Heads: values typed into the filter-layers slider and the tau slider (Ctrl+click, the
// digits, Enter) are taken as `filters K` and `tau X` take them; a k past either end of 1..L (the
// range of `kvscope layers --filters` and of the slider) stays at that end.
TEST_F(GuiMouse, ValuesTypedIntoTheLayersAndTauSlidersAreTakenAsTheirCommands) {
  const std::string size = "900x600";
  const auto layers = shots("layers", size, {{"k1", "filters 1"}, {"k2", "filters 2"}});
  const auto heads = shots("heads", size, {{"tau1", "tau 0.1"}, {"tau9", "tau 0.9"}});
  ASSERT_EQ(layers.size() + heads.size(), 4u);
  const Box k_grab = top_diff(layers[0], layers[1]), tau_grab = top_diff(heads[0], heads[1]);
  ASSERT_FALSE(k_grab.empty());
  ASSERT_FALSE(tau_grab.empty());
  const Point k_slider = k_grab.center(), tau_slider = tau_grab.center();
  const std::string type_k = "ctrlclick " + at(k_slider) + ";type ", type_tau = "ctrlclick " + at(tau_slider) + ";type ";
  const auto got_k = shots("layers", size,
                           {{"typed2", type_k + "2;key enter"}, {"cmd2", "filters 2;hover " + at(k_slider)},
                            {"typed500", type_k + "500;key enter"}, {"cmd3", "filters 3;hover " + at(k_slider)},
                            {"typed0", type_k + "0;key enter"}, {"cmd1", "filters 1;hover " + at(k_slider)}});
  const auto got_tau = shots("heads", size,
                             {{"typed25", type_tau + "0.25;key enter"}, {"cmd25", "tau 0.25;hover " + at(tau_slider)},
                              {"cmd20", "tau 0.2;hover " + at(tau_slider)}});
  ASSERT_EQ(got_k.size() + got_tau.size(), 9u);
  EXPECT_EQ(differing_pixels(got_k[0], got_k[1]), 0u);  // typing reaches the slider
  EXPECT_EQ(differing_pixels(got_k[2], got_k[3]), 0u);  // the synthetic trace's 3 layers
  EXPECT_EQ(differing_pixels(got_k[4], got_k[5]), 0u);
  EXPECT_EQ(differing_pixels(got_tau[0], got_tau[1]), 0u);
  EXPECT_GT(differing_pixels(got_tau[0], got_tau[2]), 0u) << "0.25 and 0.2 look alike: the test shows nothing";
}

// Timeline's keys: ← and → step back and forth, Home and End go to the first and last step, as
// `step N` does; F1 shows the help and hides it again.
TEST_F(GuiMouse, TimelineKeysMoveTheStep) {
  const std::string size = "900x300";
  const auto got = shots("timeline", size,
                         {{"right", "step 3;key right"}, {"step4", "step 4"}, {"left", "step 3;key left"},
                          {"step2", "step 2"}, {"home", "step 3;key home"}, {"step0", "step 0"},
                          {"end", "step 3;key end"}, {"step15", "step 15"}, {"plain", ""},
                          {"help", "key f1"}, {"help_twice", "key f1;key f1"}});
  ASSERT_EQ(got.size(), 11u);
  for (size_t i = 0; i < 8; i += 2) {
    SCOPED_TRACE("picture " + std::to_string(i));
    EXPECT_EQ(differing_pixels(got[i], got[i + 1]), 0u);
  }
  EXPECT_GT(differing_pixels(got[9], got[8]), 1000u);  // the help window
  EXPECT_EQ(differing_pixels(got[10], got[8]), 0u);
}

// The median length of the runs of one colour along row y between x0 and x1, the runs cut by
// either end left out: on a map of cells, the cells' width in pixels.
double median_run(const Image& img, int y, int x0, int x1) {
  std::vector<int> runs;
  int start = x0;
  for (int x = x0 + 1; x <= x1; ++x)
    if (!std::equal(img.at(x, y), img.at(x, y) + 3, img.at(x - 1, y))) {
      if (start > x0) runs.push_back(x - start);
      start = x;
    }
  if (runs.empty()) return 0.0;
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

// Of the pixels (x, y) in box `in`, the share where `moved` at (x + dx, y + dy) shows what
// `still` shows at (x, y).
double share_shifted(const Image& still, const Image& moved, Box in, int dx, int dy) {
  size_t same = 0, all = 0;
  for (int y = in.y0; y <= in.y1; ++y)
    for (int x = in.x0; x <= in.x1; ++x, ++all)
      same += std::equal(still.at(x, y), still.at(x, y) + 3, moved.at(x + dx, y + dy));
  return all ? (double)same / all : 0.0;
}

// The decode map of the test trace at 900x600 spans about x 62..895 (56 keys) and y 90..555
// (16 steps); a point inside it, away from every edge.
const Point kMapPoint{450, 330};

// Four notches of the wheel zoom the map 1.25^4 = 2.44x about the mouse: the cell under it stays
// there (its tooltip reads the same), and cells grow that much.
TEST_F(GuiMouse, WheelZoomsTheMapAboutTheMouse) {
  const std::string size = "900x600", away = "hover 1 1";  // the window's title bar: no tooltip
  const Point a = kMapPoint;
  const auto got = shots("attention", size,
                         {{"plain", ""}, {"hover", "hover " + at(a)}, {"zoom", "wheel " + at(a) + " 4"},
                          {"zoom_away", "wheel " + at(a) + " 4;" + away}});
  ASSERT_EQ(got.size(), 4u);
  const Image &plain = got[0], &hover = got[1], &zoom = got[2], &zoom_away = got[3];
  EXPECT_GT(differing_pixels(plain, zoom_away), 50000u);
  EXPECT_EQ(text_differences(hover, tooltip_box(hover, plain, a), zoom, tooltip_box(zoom, zoom_away, a)), 0u);
  // Cells' width along a row above the mouse (its tooltip is below): 15 px before, ~36 after.
  const double before = median_run(plain, a.y - 60, 120, 800), after = median_run(zoom_away, a.y - 60, 120, 800);
  ASSERT_GT(before, 5.0);
  EXPECT_NEAR(after / before, 2.44, 0.25) << before << " px -> " << after << " px";
  // Back out: four notches the other way show the whole map again.
  const auto out = shots("attention", size, {{"out", "wheel " + at(a) + " 4;wheel " + at(a) + " -4;" + away}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(median_run(out[0], a.y - 60, 120, 800), before, 1.0);
}

// In a panel too short for the view (its window scrolls), the wheel on the map zooms the map and
// does not scroll the window as well: zoomed in and out again, the controls above the map are
// where they were. Turned towards the user the wheel scrolled the window down, the controls up
// and the map with them, from under the mouse it was zooming about.
TEST_F(GuiMouse, WheelOnTheMapDoesNotScrollAShortPanel) {
  const std::string size = "500x190", away = "hover 1 1;";
  const Point a{250, 140};  // on the map, below the controls
  // As many frames each (7): the scrollbar the short panel needs settles over the first few.
  std::string still;
  for (int i = 0; i < 7; ++i) still += away;
  const std::string in = "wheel " + at(a) + " 2;", out = "wheel " + at(a) + " -2;";
  const auto got = shots("attention", size, {{"still", still}, {"in_out", in + out + away}, {"in", in + away + away + away + away}});
  ASSERT_EQ(got.size(), 3u);
  const Image &plain = got[0], &in_out = got[1], &zoomed = got[2];
  const Box above = box_of(plain, [&](int x, int y) { return y < a.y - 40 && !same_pixel(plain, in_out, x, y); });
  EXPECT_TRUE(above.empty()) << "the controls moved: rows " << above.y0 << ".." << above.y1;
  EXPECT_GT(differing_pixels(plain, zoomed), 1000u);  // the wheel reached the map
}

// The wheel zooms about the pixel under the mouse, whose cell the tooltip names: zoomed with the
// mouse on the first pixel of a cell, the tooltip still names that cell (cells of 15 px, 56 keys
// across about 838 px). Zoomed about the pixel's corner (ImGui's mouse position), the cell on its
// left came under the pixel's centre wherever the cells' border crossed the pixel's left half.
TEST_F(GuiMouse, WheelKeepsTheCellUnderTheMouse) {
  const std::string size = "900x600";
  const int y = 300;  // across the keys of step 7
  const auto plain = shots("attention", size, {{"plain", ""}});
  ASSERT_EQ(plain.size(), 1u);
  const std::vector<int> starts = cell_starts(plain[0], y, 90, 700, nullptr);
  ASSERT_EQ(starts.size(), 8u);
  std::vector<std::pair<std::string, std::string>> scripts;
  for (int x : starts) {
    const std::string p = at(Point{x, y}), n = std::to_string(x);
    scripts.push_back({"hover" + n, "hover " + p});
    scripts.push_back({"zoom" + n, "wheel " + p + " 4"});
    scripts.push_back({"away" + n, "wheel " + p + " 4;hover 1 1"});
  }
  const auto got = shots("attention", size, scripts);
  ASSERT_EQ(got.size(), scripts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    SCOPED_TRACE("the cell starting at x = " + std::to_string(starts[i]));
    const Point mouse{starts[i], y};
    const Image &hover = got[3 * i], &zoom = got[3 * i + 1], &away = got[3 * i + 2];
    // Inside the tooltips' rounded corners, where the map shows through (another map when zoomed).
    const auto inside = [](Box b) { return Box{b.x0 + 3, b.y0 + 3, b.x1 - 3, b.y1 - 3}; };
    EXPECT_EQ(text_differences(hover, inside(tooltip_box(hover, plain[0], mouse)), zoom, inside(tooltip_box(zoom, away, mouse))), 0u);
  }
}

// A drag on the zoomed map pans it with the mouse: what was under (x, y) is then under
// (x + dx, y + dy), to the pixel, and a double-click shows the whole map again.
TEST_F(GuiMouse, DragPansTheZoomedMapAndDoubleClickResetsIt) {
  const std::string size = "900x600", zoom = "wheel " + at(kMapPoint) + " 4;";
  const int dx = -120, dy = -48;
  const Point to{kMapPoint.x + dx, kMapPoint.y + dy};
  const auto got = shots("attention", size,
                         {{"zoomed", zoom + "hover 1 1"},
                          {"dragged", zoom + "drag " + at(kMapPoint) + " " + at(to) + ";hover 1 1"},
                          {"reset", zoom + "drag " + at(kMapPoint) + " " + at(to) + ";dclick " + at(to)},
                          {"hover", "hover " + at(to)}});
  ASSERT_EQ(got.size(), 4u);
  const Image &zoomed = got[0], &dragged = got[1], &reset = got[2], &hover = got[3];
  const Box inside{200, 150, 700, 400};  // and shifted by (dx, dy), still inside the map
  EXPECT_GT(share_shifted(zoomed, dragged, inside, dx, dy), 0.97);
  EXPECT_LT(share_shifted(zoomed, dragged, inside, 0, 0), 0.5);  // it moved
  EXPECT_EQ(differing_pixels(reset, hover), 0u);
}

// A drag shorter than ImGui's drag threshold (6 px) pans the map by as much: the map panned only
// once ImGui called the mouse dragging, so a short drag did nothing and a slow one left the map
// 6 px behind the mouse.
TEST_F(GuiMouse, ShortDragPansTheMapByAsMuch) {
  const std::string size = "900x600", zoom = "wheel " + at(kMapPoint) + " 4;";
  const int dx = -4, dy = -3;
  const Point to{kMapPoint.x + dx, kMapPoint.y + dy};
  const auto got = shots("attention", size,
                         {{"zoomed", zoom + "hover 1 1"}, {"dragged", zoom + "drag " + at(kMapPoint) + " " + at(to) + ";hover 1 1"}});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_GT(differing_pixels(got[0], got[1]), 1000u);  // it moved
  EXPECT_GT(share_shifted(got[0], got[1], Box{200, 150, 700, 400}, dx, dy), 0.97);
}

// A double-click on a run in the "evicted by" list, where the list lies over the map, chooses the
// run and keeps the zoom: the picture is the one of a single click there. Its first click chose
// the run and closed the list; its second, on the map, reset the view as a double-click on the
// map does. The combo is where its text changes with `overlay`; its list has "(none)" and the
// test trace's three runs, the last over the map.
TEST_F(GuiMouse, DoubleClickInAListOverTheMapKeepsTheZoom) {
  const std::string size = "900x600", zoom = "wheel " + at(kMapPoint) + " 4;";
  const auto refs = shots("attention", size, {{"plain", ""}, {"overlay", "overlay streamingllm_b12"}});
  ASSERT_EQ(refs.size(), 2u);
  const Box text = top_diff(refs[0], refs[1]);
  ASSERT_FALSE(text.empty());
  const Point combo{text.x0 + 10, text.center().y};
  const auto opened = shots("attention", size, {{"open", zoom + "click " + at(combo)}, {"hover", zoom + "hover " + at(combo)}});
  ASSERT_EQ(opened.size(), 2u);
  const Box list = list_below(opened[0], opened[1], text);
  ASSERT_FALSE(list.empty()) << "the combo did not open";
  const Point last = list_row(list, 3, 4);
  const std::string open = zoom + "click " + at(combo) + ";";
  const auto got = shots("attention", size, {{"dclick", open + "dclick " + at(last)}, {"click", open + "click " + at(last)}});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);
}

// A right-click on a decode row shows that step: the picture is `step N` with the mouse there for
// exactly one N, not the step the trace opened at (its last, 15).
TEST_F(GuiMouse, RightClickOnADecodeRowShowsItsStep) {
  const std::string size = "900x600";
  const Point r{kMapPoint.x, 200};
  std::vector<std::pair<std::string, std::string>> scripts = {{"rclick", "rclick " + at(r)}};
  for (int step = 0; step < 16; ++step) scripts.push_back({"step" + std::to_string(step), "step " + std::to_string(step) + ";hover " + at(r)});
  const auto got = shots("attention", size, scripts);
  ASSERT_EQ(got.size(), scripts.size());
  std::vector<int> matches;
  for (int step = 0; step < 16; ++step)
    if (differing_pixels(got[0], got[1 + step]) == 0) matches.push_back(step);
  ASSERT_EQ(matches.size(), 1u);
  EXPECT_NE(matches[0], 15);
  EXPECT_LT(matches[0], 8);  // a row in the map's upper half
}

// Each bad point exits 2 with one line naming --script and the command, and writes no PNG.
TEST_F(GuiMouse, BadPointsExitTwoWithOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"hover 800 10", "'hover 800 10': 800,10 is outside the window (0..799, 0..599)"},
      {"click 10 -1", "'click 10 -1': 10,-1 is outside the window (0..799, 0..599)"},
      {"click 1 2 3", "'click 1 2 3' expects two integers"},
      {"hover x 3", "'hover x 3' expects an integer, not 'x'"},
      {"click", "'click' expects two integers"},
      {"select 1 2;click 5 600", "'click 5 600': 5,600 is outside the window (0..799, 0..599)"}};
  std::vector<std::string> runs;
  for (const auto& [script, message] : cases)
    runs.push_back("\"" + trace_ + "\" --view heads --size 800x600 --screenshot \"" + png("bad") + "\" --script \"" + script + "\"");
  ASSERT_EQ(gui_batch(runs), std::vector<int>(runs.size(), 2)) << err_;
  std::string want;
  for (const auto& [script, message] : cases) want += "kvscope: --script: " + message + "\n";
  EXPECT_EQ(err_, want);
  EXPECT_FALSE(fs::exists(png("bad")));
}

}  // namespace
