// Shared by the scripted-mouse GUI tests (gui_mouse_test, gui_tooltip_test, gui_map_mouse_test):
// where two pictures differ (a control a command changed, a combo's list, a tooltip), how two
// tooltips' texts differ, the head grid's and a map's cells read off the pictures, and the fixture
// whose helpers hover cells and compare their tooltips.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tests/app/gui_screenshot.h"

namespace kvs::gui_test {

// The first `rows` rows of where two pictures differ: the topmost control a script command
// changed (a slider's grab, a checkbox's mark, a combo's text).
inline Box top_diff(const Image& a, const Image& b, int rows = 12) {
  const int y0 = diff_box(a, b).y0;
  return box_of(a, [&](int x, int y) { return y >= y0 && y < y0 + rows && !same_pixel(a, b, x, y); });
}

// Where two pictures differ right of column x0 (a plot's hover marks the step under the mouse
// with a line just left of the tooltip).
inline Box diff_right_of(const Image& a, const Image& b, int x0) {
  return box_of(a, [&](int x, int y) { return x > x0 && !same_pixel(a, b, x, y); });
}

// The list a click on a combo opened: where the picture with it open (`open`) differs from the one
// with the mouse on the combo (`hover`) below the combo's frame, whose text (`text`) is at its
// middle. Opening it changes the frame too (the list takes the hover from it).
inline Box list_below(const Image& open, const Image& hover, const Box& text) {
  const Box changed = diff_box(open, hover);
  const int frame_bottom = 2 * text.center().y - changed.y0;
  return box_of(open, [&](int x, int y) { return y > frame_bottom && !same_pixel(open, hover, x, y); });
}

// The middle of row `row` of a combo's list of `rows` rows.
inline Point list_row(const Box& list, int row, int rows) { return {list.x0 + 20, list.y0 + list.height() * (2 * row + 1) / (2 * rows)}; }

inline bool white(const Image& img, int x, int y) {
  const unsigned char* p = img.at(x, y);
  return p[0] >= 200 && p[1] >= 200 && p[2] >= 200;
}

// The head grid's selection outline in `selected` that is not in `other` (the same view with
// another head selected): white where the two differ.
inline Box selection_outline(const Image& selected, const Image& other) {
  return box_of(selected, [&](int x, int y) { return !same_pixel(selected, other, x, y) && white(selected, x, y); });
}

inline double luminance(const Image& img, int x, int y) {
  const unsigned char* p = img.at(x, y);
  return 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
}

// The tooltip a hover added to the picture without it: where they differ. ImGui puts it beside
// the mouse, right of it and below its tip, unless it would leave the window.
inline Box tooltip_box(const Image& hovered, const Image& plain, Point mouse) {
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
inline size_t text_differences(const Image& a, Box ba, const Image& b, Box bb) {
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
inline std::vector<int> cell_starts(const Image& plain, int y, int x_from, int x_to, const unsigned char* gap) {
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

// The layer similarity matrix's cells (the test trace's 3 layers): `matrix` spans them from the
// first column's left edge to the last one's right edge.
struct LayerCells {
  Box matrix;
  double pitch() const { return matrix.width() / 3.0; }
  Point center(int row, int col) const {
    return {matrix.x0 + (int)((col + 0.5) * pitch()), matrix.y0 + (int)((row + 0.5) * pitch())};
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

  // The layer similarity matrix at `size`: where the pictures with layer 0 and with layer 2
  // selected differ, over both selection outlines (each a column of the matrix).
  LayerCells layer_similarity_cells(const std::string& size) {
    const auto corners = shots("layers", size, {{"first", "layer 0"}, {"last", "layer 2"}});
    LayerCells m;
    if (corners.size() != 2u) {
      ADD_FAILURE() << "no layer similarity";
      return m;
    }
    m.matrix = diff_box(corners[0], corners[1]);
    return m;
  }
};

}  // namespace kvs::gui_test
