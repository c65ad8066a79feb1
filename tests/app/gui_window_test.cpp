// The layout follows the app's window under Xvfb: a window grown or shrunk keeps every view at its
// share of the window (back at the first size, pixel for pixel the same picture), View's "Tile
// all views" and "Alone with the timeline" as the script's `tile` and `alone VIEW`, a double-click
// on a title bar, and bad input. Skips when the app or xvfb-run is not available.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/app/gui_screenshot.h"

using namespace kvs::gui_test;

namespace {

class GuiWindow : public ScreenshotFixture {};

// The share of the box's pixels that are the bare background (glClearColor 0.08, 0.08, 0.09):
// where no view is.
double bare_share(const Image& img, int x0, int y0, int x1, int y1) {
  size_t bare = 0, all = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x, ++all) {
      const unsigned char* p = img.at(x, y);
      bare += p[0] == 20 && p[1] == 20 && p[2] == 23;
    }
  return (double)bare / (double)all;
}

// Opened at 1024x768 and grown to 1600x1000, the views fill the larger window; a window shrunk
// and grown back shows the very picture it showed (the layout is kept as fractions, not
// re-measured from rounded pixels at the small size).
TEST_F(GuiWindow, TheViewsFollowTheWindowBothWays) {
  const std::vector<Image> grown = shots("all", "1024x768", {{"grown", "resize 1600x1000"}});
  ASSERT_EQ(grown.size(), 1u);
  ASSERT_EQ(grown[0].w, 1600);
  EXPECT_LT(bare_share(grown[0], 1100, 700, 1590, 950), 0.01);  // Compare's corner, past 1024x768
  const std::vector<Image> round =
      shots("all", "1600x1000", {{"plain", ""}, {"round", "resize 800x600;resize 1600x1000"}});
  ASSERT_EQ(round.size(), 2u);
  EXPECT_EQ(differing_pixels(round[0], round[1]), 0u);
}

// `alone VIEW` shows one view below the timeline; `tile` brings back every view where the tiled
// layout puts it.
TEST_F(GuiWindow, AloneShowsOneViewAndTileBringsBackEveryView) {
  const std::vector<Image> pics = shots("all", "1280x720", {{"plain", ""}, {"alone", "alone attention"},
                                                             {"back", "alone attention;tile"}});
  ASSERT_EQ(pics.size(), 3u);
  EXPECT_GT(differing_pixels(pics[0], pics[1]), (size_t)(1280 * 720 / 4));
  EXPECT_EQ(differing_pixels(pics[0], pics[2]), 0u);
}

// A double-click on the attention map's title bar (tiled at 1280x720: y 308..329) shows it alone,
// as `alone attention` does; a double-click on its title bar there (y 117) brings back the layout
// from before. The mouse stays where it clicked, so each picture is compared with one hovering
// the same point.
TEST_F(GuiWindow, ADoubleClickOnATitleBarShowsTheViewAloneAndASecondBringsBackTheLayout) {
  const std::vector<Image> pics = shots("all", "1280x720", {{"dclick", "dclick 100 318"},
                                                             {"alone", "alone attention;hover 100 318"},
                                                             {"back", "dclick 100 318;dclick 100 127"},
                                                             {"plain", "hover 100 127"}});
  ASSERT_EQ(pics.size(), 4u);
  EXPECT_EQ(differing_pixels(pics[0], pics[1]), 0u);
  EXPECT_EQ(differing_pixels(pics[2], pics[3]), 0u);
  EXPECT_GT(differing_pixels(pics[0], pics[3]), (size_t)(1280 * 720 / 4));
}

TEST_F(GuiWindow, BadLayoutCommandsExitTwoWithOneLine) {
  const std::string views = "run, lanes, attention, heads, layers, metrics, compare";
  expect_refused({
      {"--script \"alone timeline\"", "--script: 'alone timeline' expects a view other than the timeline: " + views},
      {"--script \"alone nosuch\"", "--script: 'alone nosuch' expects a view other than the timeline: " + views},
      {"--script \"tile now\"", "--script: 'tile now' takes no value"},
      {"--script \"resize 10x10\"", "--script: 'resize 10x10' expects WxH between 64x64 and 8192x8192"},
      {"--script \"resize 800x600x2\"", "--script: 'resize 800x600x2' expects WxH between 64x64 and 8192x8192"},
  });
}

}  // namespace
