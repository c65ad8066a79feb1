// The scripted mouse and keyboard under Xvfb (`click`, `ctrlclick`, `dclick`, `hover`, `key`,
// `type`) on each view's controls (docs/gui.md):
//   head grid: a click selects the head under it, exactly as `select L H` does;
//   layer similarity: a click on the matrix selects its column's layer as `layer L` does;
//   metrics: a click on a plot moves the timeline as `step N` does; the legend hides and shows a
//     run; a plot's hover lists the runs shown with their values, a title's says what it measures;
//   compare: the run pickers choose A and B as `runs A B` does;
//   lanes: "selected head only" and the zoom slider take clicks as `lanes head`, `zoom X` do;
//   layer similarity: the "filter layers k" slider takes a click as `filters K` does;
//   timeline: |<, <, >, >|, the step slider and the keys <-, ->, Home, End move the step as
//     `step N` does; F1 shows the help and hides it;
//   lanes, layers, heads: values typed into sliders are taken, within the sliders' ranges;
// and bad points exit 2 with one line. Where a control or a cell is, is read off the pictures
// (the selection's outline, the lanes' and runs' colours, the plot's frame), not hard-coded.
// Tooltips over cells: gui_tooltip_test; the attention map's wheel, drag and clicks:
// gui_map_mouse_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/app/gui_mouse.h"

#ifdef KVSCOPE_GUI
#include "analysis/lanes.h"
#include "app/gui/widgets.h"
#endif

using namespace kvs::gui_test;

namespace {

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
  const LayerCells cells = layer_similarity_cells(size);
  ASSERT_FALSE(cells.matrix.empty());
  const double pitch = cells.pitch();
  ASSERT_GT(pitch, 10.0);
  ASSERT_NEAR(cells.matrix.height(), 3 * pitch, 3.0);  // a square: the outlines' columns, nothing else
  // Layer 1's column, in the matrix's top row (layer 0's keys against layer 1's attention).
  const Point cell = cells.center(0, 1);
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

// Each bad point exits 2 with one line naming --script and the command, and writes no PNG.
TEST_F(GuiMouse, BadPointsExitTwoWithOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"hover 800 10", "'hover 800 10': 800,10 is outside the window (0..799, 0..599)"},
      {"click 10 -1", "'click 10 -1': 10,-1 is outside the window (0..799, 0..599)"},
      {"click 1 2 3", "'click 1 2 3' expects two integers"},
      {"hover x 3", "'hover x 3' expects an integer, not 'x'"},
      {"click", "'click' expects two integers"},
      {"select 1 2;click 5 600", "'click 5 600': 5,600 is outside the window (0..799, 0..599)"}};
  std::vector<std::pair<std::string, std::string>> refused;
  for (const auto& [script, message] : cases)
    refused.push_back({"--view heads --size 800x600 --script \"" + script + "\"", "--script: " + message});
  expect_refused(refused);
}

}  // namespace
