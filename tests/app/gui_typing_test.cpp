// Typing and playing under Xvfb, with the script's keyboard (`type`, `key`) and mouse:
//   Run view: a model path, a prompt, a step count and an output path typed into their boxes, and
//     a click on Record, record what the `model`, `prompt`, `steps`, `out` and `record` commands
//     record: the same tokens, and the same picture but for the button row;
//   Compare: a path typed into the second-trace box and a click on Open show what `compare PATH`
//     shows;
//   Ctrl+O: a path typed into the Open dialog and a click on Open show the trace as opening it at
//     start does;
//   timeline: Space plays (from the first step: the trace opens at its last) and Space pauses;
//     frames drawn after the pause leave the step where it was.
// Where a box or button is, is read off the pictures, as in gui_mouse_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/trace.h"
#include "tests/app/gui_screenshot.h"
#include "tests/test_paths.h"

namespace fs = std::filesystem;
using namespace kvs::gui_test;

namespace {

// Where two pictures differ, as bands of rows (rows less than 4 apart join a band), top to
// bottom, each with the horizontal extent of its differences.
std::vector<Box> diff_bands(const Image& a, const Image& b) {
  std::vector<Box> bands;
  for (int y = 0; y < a.h; ++y) {
    Box row;
    for (int x = 0; x < a.w; ++x)
      if (!same_pixel(a, b, x, y)) row.x0 = std::min(row.x0, x), row.x1 = std::max(row.x1, x);
    if (row.empty()) continue;
    if (bands.empty() || y - bands.back().y1 > 3) bands.push_back(Box{});
    Box& band = bands.back();
    band.x0 = std::min(band.x0, row.x0), band.x1 = std::max(band.x1, row.x1);
    band.y0 = std::min(band.y0, y), band.y1 = y;
  }
  return bands;
}

class GuiTyping : public ScreenshotFixture {};

TEST_F(GuiTyping, TypedRunSettingsAndRecordClickRecordAsTheirCommands) {
  const std::string model = kvs::test::shared_path("models/stories260K/stories260K.bin");
  if (!fs::exists(model)) GTEST_SKIP() << "test model missing: " << model;
  const std::string size = "1000x700";
  // The model, prompt, steps and output boxes: where two settings of each differ.
  const auto refs = shots("run", size, {{"a", "model a;prompt a;out a.h5;steps 1"},
                                        {"b", "model bbbbbbbbbb;prompt bbbbbbbbbb;out bbbbbbbbbb.h5;steps 9"}});
  ASSERT_EQ(refs.size(), 2u);
  const std::vector<Box> boxes = diff_bands(refs[0], refs[1]);
  ASSERT_EQ(boxes.size(), 4u);
  const Box &model_box = boxes[0], &prompt_box = boxes[1], &steps_box = boxes[2], &out_box = boxes[3];
  // Clicks right of a box's text put the cursor at its end; the steps box is clicked on its text.
  const Point model_end{model_box.x1 + 80, model_box.center().y}, prompt_in{prompt_box.x1 + 80, prompt_box.center().y};
  const Point steps_in{steps_box.x0 + 3, steps_box.center().y}, out_end{out_box.x1 + 80, out_box.center().y};
  const Point output_area{out_box.x0, out_box.y1 + 100};  // below the buttons: ends the prompt's editing
  // Record: the first thing on the output box's row, left of it.
  const int y = out_box.center().y;
  const auto left_of_out = row_runs(refs[0], y, 2, out_box.x0, refs[0].at(2, y));
  ASSERT_FALSE(left_of_out.empty());
  const Point record{left_of_out.front().first + 12, y};

  const std::string typed_out = (dir_ / "typed.h5").string(), cmd_out = (dir_ / "cmd.h5").string();
  const std::string typed = "model a;prompt a;out a.h5;steps 1;click " + at(model_end) + ";key backspace;type " + model +
                            ";key enter;click " + at(prompt_in) + ";key end;key backspace;type Once upon a time;click " +
                            at(output_area) + ";click " + at(steps_in) + ";key end;key backspace;type 2;key enter;click " +
                            at(out_end) + ";key backspace;key backspace;key backspace;key backspace;type " + typed_out +
                            ";key enter;click " + at(record);
  const std::string commands = "model " + model + ";prompt Once upon a time;steps 2;out " + cmd_out + ";record";
  const auto got = shots("run", size, {{"typed", typed}, {"commands", commands}});
  ASSERT_EQ(got.size(), 2u);
  ASSERT_TRUE(fs::exists(typed_out)) << "the click on Record recorded nothing";
  const kvs::TraceReader t(typed_out), c(cmd_out);
  EXPECT_EQ(t.meta().n_steps, 2);
  EXPECT_EQ(t.meta().model, c.meta().model);
  EXPECT_EQ(t.token_ids(), c.token_ids());
  // The same settings and output text; only the button row differs (Record under the mouse, the
  // output paths).
  const Box differ = diff_box(got[0], got[1]);
  EXPECT_GE(differ.y0, out_box.y0 - 12);
  EXPECT_LE(differ.y1, out_box.y1 + 12);
}

// Run view: a temperature or top-p typed into its box (Ctrl+click, the digits, Enter) past the
// box's range stays at its end (out of range, Record failed on --temperature / --top-p, flags the
// view does not show): 5 shows as 2 does, top-p 0 as 0.01; 0.5 shows otherwise.
TEST_F(GuiTyping, TemperatureAndTopPTypedPastTheirRangeStayAtItsEnd) {
  const std::string size = "1000x700";
  const auto refs = shots("run", size, {{"steps1", "steps 1"}, {"steps9", "steps 65536"}});
  ASSERT_EQ(refs.size(), 2u);
  const Box steps_box = diff_box(refs[0], refs[1]);
  ASSERT_FALSE(steps_box.empty());
  // The boxes right of the steps box on its row: temp, top-p, seed (labels are runs of letters).
  const int y = steps_box.center().y;
  std::vector<Point> boxes;
  for (const auto& [x0, x1] : row_runs(refs[0], y, steps_box.x1 + 1, refs[0].w - 2, refs[0].at(2, y)))
    if (x1 - x0 >= 50) boxes.push_back({(x0 + x1) / 2, y});
  ASSERT_GE(boxes.size(), 3u);
  const Point temp = boxes[0], top_p = boxes[1], away{2, refs[0].h - 3};
  auto typed = [&](Point box, const std::string& value) {
    return "ctrlclick " + at(box) + ";type " + value + ";key enter;hover " + at(away);
  };
  const auto got = shots("run", size,
                         {{"temp5", typed(temp, "5")}, {"temp2", typed(temp, "2")}, {"temp05", typed(temp, "0.5")},
                          {"top_p0", typed(top_p, "0")}, {"top_p001", typed(top_p, "0.01")}});
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);
  EXPECT_GT(differing_pixels(got[1], got[2]), 0u) << "typing did not reach the temperature box";
  EXPECT_EQ(differing_pixels(got[3], got[4]), 0u);
  EXPECT_GT(differing_pixels(got[3], refs[0]), 0u) << "typing did not reach the top-p box";
}

TEST_F(GuiTyping, ATypedSecondTracePathOpensAsTheCompareCommandDoes) {
  const std::string size = "1000x600", other = (dir_ / "other.h5").string();
  fs::copy_file(trace_, other);
  const auto refs = shots("compare", size, {{"empty", "mode traces"}, {"opened", "mode traces;compare " + other}});
  ASSERT_EQ(refs.size(), 2u);
  const std::vector<Box> bands = diff_bands(refs[0], refs[1]);
  ASSERT_GE(bands.size(), 2u);
  const Box& path_text = bands[0];  // the path in the box; the comparison below it
  const Point box{path_text.x0 + 20, path_text.center().y};
  // Open: the last thing on the box's row.
  const int y = box.y;
  const auto right_of_path = row_runs(refs[0], y, path_text.x1 + 1, refs[0].w - 2, refs[0].at(refs[0].w - 3, y));
  ASSERT_FALSE(right_of_path.empty());
  const Point open{right_of_path.back().second - 12, y};
  const auto got = shots("compare", size,
                         {{"typed", "mode traces;click " + at(box) + ";type " + other + ";click " + at(open)},
                          {"command", "mode traces;compare " + other + ";hover " + at(open)}});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u);
  EXPECT_GT(differing_pixels(got[0], refs[0]), 10000u) << "nothing was compared";
}

// The runs of one colour along column x from y0 down: where each run of pixels unlike `bg` starts
// and ends (the controls stacked under a point).
std::vector<std::pair<int, int>> runs_down(const Image& img, int x, int y0, const unsigned char* bg) {
  std::vector<std::pair<int, int>> runs;
  for (int y = y0, start = -1; y < img.h; ++y) {
    const bool other = !std::equal(bg, bg + 3, img.at(x, y));
    if (other && start < 0) start = y;
    if (!other && start >= 0) runs.push_back({start, y - 1}), start = -1;
  }
  return runs;
}

TEST_F(GuiTyping, APathTypedIntoTheOpenDialogOpensTheTrace) {
  const std::string size = "900x400", common = " --view timeline --size " + size + " --screenshot ";
  ASSERT_EQ(gui_batch({common + "\"" + png("dialog") + "\" --script \"key ctrl+o\""}), std::vector<int>{0}) << err_;
  const Image dialog = load_png(png("dialog"));
  ASSERT_GT(dialog.w, 0);
  // The dialog in the middle, over the dimmed view: its title bar is the first thing down the
  // middle column below the view's own controls; down its left side, the title bar, the path
  // box and the row of buttons, Open first.
  const int mid = dialog.w / 2;
  const unsigned char* dim = dialog.at(mid, dialog.h / 4);
  int top = dialog.h / 4;
  while (top < dialog.h && std::equal(dim, dim + 3, dialog.at(mid, top))) ++top;
  ASSERT_LT(top, dialog.h);
  int left = mid;
  while (left > 0 && !std::equal(dim, dim + 3, dialog.at(left - 1, top + 2))) --left;
  const int x = left + 20;
  const std::vector<std::pair<int, int>> stack = runs_down(dialog, x, top + 2, dialog.at(left + 3, top + 30));
  ASSERT_GE(stack.size(), 3u);  // the title bar's lower part, the path box, Open
  const Point path_box{x, (stack[1].first + stack[1].second) / 2}, open{x, (stack[2].first + stack[2].second) / 2};
  const std::vector<int> codes = gui_batch(
      {common + "\"" + png("typed") + "\" --script \"key ctrl+o;click " + at(path_box) + ";type " + trace_ + ";click " +
           at(open) + "\"",
       "\"" + trace_ + "\"" + common + "\"" + png("at_start") + "\" --script \"hover " + at(open) + "\"",
       common + "\"" + png("none") + "\" --script \"hover " + at(open) + "\""});
  ASSERT_EQ(codes, (std::vector<int>{0, 0, 0})) << err_;
  const Image typed = load_png(png("typed")), at_start = load_png(png("at_start")), none = load_png(png("none"));
  EXPECT_EQ(differing_pixels(typed, at_start), 0u);
  EXPECT_GT(differing_pixels(typed, none), 1000u) << "no trace was opened";
}

TEST_F(GuiTyping, SpacePlaysAndPauses) {
  const std::string size = "900x300";
  // Each `key` command draws a few frames (1/60 s each on ImGui's clock) at the default 8 steps/s.
  const std::string played = "key space;key f1;key f1;key space";
  std::vector<std::pair<std::string, std::string>> scripts = {{"played", played},
                                                              {"after", played + ";key f1;key f1;key f1;key f1"}};
  for (int k = 0; k <= 4; ++k) scripts.push_back({"step" + std::to_string(k), "step " + std::to_string(k)});
  const auto got = shots("timeline", size, scripts);
  ASSERT_EQ(got.size(), scripts.size());
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u) << "the step moved after the pause";
  int shown = -1;
  for (int k = 0; k <= 4; ++k)
    if (differing_pixels(got[0], got[2 + k]) == 0) shown = k;
  EXPECT_GE(shown, 1) << "playing did not move from the first step, or went past step 4";
}

}  // namespace
