// The attention map under the scripted mouse on Xvfb (`wheel`, `drag`, `dclick`, `rclick`,
// `hover`; docs/gui.md): the wheel zooms about the mouse, keeping the cell under it (the first
// pixel of a cell too) and scrolling no short panel; a drag pans (a short one too); a
// double-click resets (one begun on a list over the map does not); a right-click shows a row's
// step; in a short panel the "display" popup's log box turns the log scale off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/app/gui_mouse.h"

using namespace kvs::gui_test;

namespace {

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

// In a short panel (the view alone at 700x300, as tiled at 1280x720) the log scale, the colormap
// and "reset view" are in the popup of a "display" button: its log box turns the log scale off,
// as `log off` does. The button is the widest stretch of ImGui's button colour above the map (the
// combos' arrow squares are narrower); the box, the check mark the popup brought.
TEST_F(GuiMouse, ShortPanelsDisplayPopupTurnsTheLogScaleOff) {
  const std::string size = "700x300";
  const auto plain = shots("attention", size, {{"plain", ""}});
  ASSERT_EQ(plain.size(), 1u);
  const Image& img = plain[0];
  const unsigned char button[3] = {35, 69, 109}, check[3] = {66, 150, 250};
  const auto is = [](const Image& im, int x, int y, const unsigned char* c) {
    return std::equal(c, c + 3, im.at(x, y));
  };
  Box display;
  for (int y = 0; y < 100; ++y)
    for (int x = 0, run = 0; x < img.w; ++x) {
      run = is(img, x, y, button) ? run + 1 : 0;
      if (run < 40) continue;
      display.x0 = std::min(display.x0, x - run + 1), display.x1 = std::max(display.x1, x);
      display.y0 = std::min(display.y0, y), display.y1 = std::max(display.y1, y);
    }
  ASSERT_FALSE(display.empty()) << "no display button above the map";
  const auto open = shots("attention", size, {{"open", "click " + at(display.center())}});
  ASSERT_EQ(open.size(), 1u);
  const Box log_box =
      box_of(open[0], [&](int x, int y) { return is(open[0], x, y, check) && !is(img, x, y, check); });
  ASSERT_FALSE(log_box.empty()) << "the popup shows no checked log box";
  EXPECT_GT(log_box.y0, display.y1);  // below the button
  const std::string click_display = "click " + at(display.center());
  const auto got = shots("attention", size, {{"toggled", click_display + ";click " + at(log_box.center())},
                                             {"off", "log off;" + click_display + ";hover " + at(log_box.center())}});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);  // the box's click is `log off`, the popup still open
  EXPECT_GT(differing_pixels(got[0], open[0]), 5000u);  // the map's colours changed
}

}  // namespace
