// View > Text size under Xvfb: Ctrl+= and Ctrl+- step the text as --text-size and the script's
// `text-size` set it (the same picture, the tiled layout tiled again at the new size), Ctrl+0
// goes back to the monitor's size, and bad sizes exit 2 with one line. The steps and the range
// themselves without a window. Skips the pictures when the app or xvfb-run is not available.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/app/gui_screenshot.h"

#ifdef KVSCOPE_GUI
#include "app/gui/text_size.h"
#include "inference/errors.h"
#endif

using namespace kvs::gui_test;

namespace {

class GuiTextSize : public ScreenshotFixture {};

// 15 px steps to 17 with Ctrl+= and to 13 with Ctrl+-: each picture is the one the app draws when
// it starts at that size, and Ctrl+0 (the monitor's size: 15 under Xvfb) brings back the first.
TEST_F(GuiTextSize, ShortcutsStepTheTextAsTheFlagSetsIt) {
  const std::vector<Image> pics =
      shots("all", "1280x720",
            {{"plain", ""}, {"larger", "key ctrl+="}, {"set17", "text-size 17"}, {"smaller", "key ctrl+-"},
             {"set13", "text-size 13"}, {"back", "key ctrl+=;key ctrl+=;key ctrl+0"}});
  ASSERT_EQ(pics.size(), 6u);
  const std::string flag_png = png("flag17");
  ASSERT_EQ(gui("\"" + trace_ + "\" --size 1280x720 --text-size 17 --screenshot \"" + flag_png + "\""), 0) << err_;
  const Image flag = load_png(flag_png);
  EXPECT_GT(differing_pixels(pics[0], pics[1]), (size_t)(1280 * 720 / 20));  // the text changed size
  EXPECT_EQ(differing_pixels(pics[1], pics[2]), 0u);
  EXPECT_EQ(differing_pixels(pics[1], flag), 0u);
  EXPECT_GT(differing_pixels(pics[0], pics[3]), (size_t)(1280 * 720 / 20));
  EXPECT_EQ(differing_pixels(pics[3], pics[4]), 0u);
  EXPECT_EQ(differing_pixels(pics[0], pics[5]), 0u);
}

TEST_F(GuiTextSize, BadSizesExitTwoWithOneLine) {
  expect_refused({
      {"--text-size 9", "--text-size: expects a text size in pixels from 10 to 40, not '9'"},
      {"--text-size big", "--text-size: expects a text size in pixels from 10 to 40, not 'big'"},
      {"--text-size 20px", "--text-size: expects a text size in pixels from 10 to 40, not '20px'"},
      {"--script \"text-size 41\"", "--script: 'text-size 41': 41 is outside 10..40"},
      {"--script \"text-size\"", "--script: 'text-size' expects a number, not ''"},
  });
}

#ifdef KVSCOPE_GUI
TEST(TextSize, StepsWithinTheRangeAndStopAtItsEnds) {
  EXPECT_EQ(kvs::larger_text_size(15), 17.0f);
  EXPECT_EQ(kvs::smaller_text_size(15), 13.0f);
  EXPECT_EQ(kvs::larger_text_size(22.5f), 24.0f);  // a monitor's size between two steps
  EXPECT_EQ(kvs::smaller_text_size(22.5f), 21.0f);
  EXPECT_EQ(kvs::larger_text_size(kvs::kMaxTextSize), kvs::kMaxTextSize);
  EXPECT_EQ(kvs::smaller_text_size(kvs::kMinTextSize), kvs::kMinTextSize);
  float px = kvs::kMinTextSize;
  for (int i = 0; i < 20; ++i) px = kvs::larger_text_size(px);
  EXPECT_EQ(px, kvs::kMaxTextSize);
}

TEST(TextSize, TheMonitorsSizeFollowsItsScale) {
  EXPECT_EQ(kvs::monitor_text_size(1), kvs::kDefaultTextSize);
  EXPECT_EQ(kvs::monitor_text_size(1.5f), 23.0f);  // 22.5, in whole pixels
  EXPECT_EQ(kvs::monitor_text_size(2), 30.0f);
  EXPECT_EQ(kvs::monitor_text_size(4), kvs::kMaxTextSize);
  EXPECT_EQ(kvs::monitor_text_size(0), kvs::kDefaultTextSize);  // a scale the platform could not tell
}

TEST(TextSize, ParsesPixelsWithinTheRange) {
  EXPECT_EQ(kvs::parse_text_size("--text-size", "21"), 21.0f);
  EXPECT_EQ(kvs::parse_text_size("--text-size", "22.5"), 22.5f);
  for (const char* bad : {"", "9.9", "40.5", "nan", "inf", "-15", "15 px"})
    EXPECT_THROW(kvs::parse_text_size("--text-size", bad), kvs::InputError) << bad;
}
#endif

}  // namespace
