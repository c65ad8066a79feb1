// App plumbing without a window: the background worker (a newer request supersedes a queued one,
// cancellation, results and errors back on the UI thread, a failed allocation as out of memory),
// --script parsing (the mouse's points included), colormaps and value scaling, the head grid's
// defaults and placement.
#include <gtest/gtest.h>

#ifdef KVSCOPE_GUI
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <GLFW/glfw3.h>

#include "app/gui/axis_ticks.h"
#include "app/gui/colormap.h"
#include "app/gui/script.h"
#include "app/gui/script_input.h"
#include "app/gui/worker.h"
#include "app/views/head_grid.h"
#include "inference/errors.h"

namespace kvs {
namespace {

TEST(Worker, NewerRequestSupersedesQueuedOneOfTheSameKey) {
  Worker w;
  std::atomic<bool> release{false};
  std::vector<std::string> ran;  // written by the worker thread, read after wait_idle
  w.submit("busy", "blocker", [&](JobContext&) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ran.push_back("blocker");
  });
  while (w.running_label() != "blocker") std::this_thread::sleep_for(std::chrono::milliseconds(1));
  w.submit("step", "step 1", [&](JobContext&) { ran.push_back("step 1"); });
  w.submit("other", "other", [&](JobContext&) { ran.push_back("other"); });
  w.submit("step", "step 2", [&](JobContext&) { ran.push_back("step 2"); });
  release = true;
  w.wait_idle();
  EXPECT_EQ(ran, (std::vector<std::string>{"blocker", "other", "step 2"}));
}

TEST(Worker, CancelStopsTheRunningJobAndDropsQueuedOnes) {
  Worker w;
  std::atomic<bool> started{false}, saw_cancel{false}, queued_ran{false};
  w.submit("a", "long", [&](JobContext& ctx) {
    started = true;
    for (int i = 0; i < 5000 && !ctx.cancelled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    saw_cancel = ctx.cancelled();
  });
  w.submit("b", "queued", [&](JobContext&) { queued_ran = true; });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  w.cancel_all();
  w.wait_idle();
  EXPECT_TRUE(saw_cancel);
  EXPECT_FALSE(queued_ran);
  EXPECT_FALSE(w.busy());
}

TEST(Worker, ResultsAndErrorsReachTheUiThreadOnDrain) {
  Worker w;
  std::string error;
  int result = 0;
  w.set_error_handler([&](const std::string& m) { error = m; });
  w.submit("x", "compute", [&](JobContext&) { w.post([&] { result = 42; }); });
  w.submit("y", "fail", [](JobContext&) { throw InputError("trace.h5: truncated"); });
  w.wait_idle();
  EXPECT_EQ(result, 0);  // nothing runs on the UI side before drain()
  w.drain();
  EXPECT_EQ(result, 42);
  EXPECT_EQ(error, "trace.h5: truncated");
}

TEST(Worker, AFailedAllocationReadsAsOutOfHostMemory) {
  Worker w;
  std::string error;
  w.set_error_handler([&](const std::string& m) { error = m; });
  w.submit("x", "load", [](JobContext&) { throw std::bad_alloc(); });
  w.wait_idle();
  w.drain();
  EXPECT_EQ(error.rfind("out of host memory (an allocation failed; ", 0), 0u) << error;
}

TEST(Script, ParsesStepsSelectionAndViewCommands) {
  const auto c = parse_script(" step+1; select 2 3 ;step-4;log on;;step 7");
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0].verb, "step");
  EXPECT_EQ(c[0].arg, "+1");
  EXPECT_EQ(c[1].verb, "select");
  EXPECT_EQ(c[1].arg, "2 3");
  EXPECT_EQ(c[2].arg, "-4");
  EXPECT_EQ(c[3].verb, "log");
  EXPECT_EQ(c[3].arg, "on");
  EXPECT_EQ(c[4].arg, "7");
}

// The scripted mouse's points are pixels of the window; anything else names the command.
TEST(Script, MousePointsAreWindowPixels) {
  const std::vector<MouseFrame> hover = mouse_command_frames(ScriptCommand{"hover", "0 599"}, 800, 600);
  ASSERT_EQ(hover.size(), 1u);
  EXPECT_EQ(hover[0], (MouseFrame{{0, 599}}));
  for (const char* verb : {"hover", "click", "ctrlclick", "dclick", "rclick", "wheel", "drag"})
    EXPECT_TRUE(is_mouse_command(ScriptCommand{verb, "1 2"})) << verb;
  EXPECT_FALSE(is_mouse_command(ScriptCommand{"select", "1 2"}));
  EXPECT_FALSE(is_mouse_command(ScriptCommand{"key", "left"}));
  const auto message = [](const std::string& verb, const std::string& arg) {
    try {
      mouse_command_frames(ScriptCommand{verb, arg}, 800, 600);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message("hover", "800 0"), "--script: 'hover 800 0': 800,0 is outside the window (0..799, 0..599)");
  EXPECT_EQ(message("click", "1 2.5"), "--script: 'click 1 2.5' expects an integer, not '2.5'");
  EXPECT_EQ(message("click", "1"), "--script: 'click 1' expects two integers");
  EXPECT_EQ(message("rclick", "1 2 3"), "--script: 'rclick 1 2 3' expects two integers");
  EXPECT_EQ(message("wheel", "1 2"), "--script: 'wheel 1 2' expects three integers");
  EXPECT_EQ(message("wheel", "1 2 0"), "--script: 'wheel 1 2 0': 0 notches is outside -20..-1, 1..20");
  EXPECT_EQ(message("wheel", "1 2 21"), "--script: 'wheel 1 2 21': 21 notches is outside -20..-1, 1..20");
  EXPECT_EQ(message("drag", "1 2 3"), "--script: 'drag 1 2 3' expects four integers");
  EXPECT_EQ(message("drag", "1 2 3 600"), "--script: 'drag 1 2 3 600': 3,600 is outside the window (0..799, 0..599)");
  EXPECT_EQ(message("drag", "1 2 x 6"), "--script: 'drag 1 2 x 6' expects an integer, not 'x'");
  EXPECT_EQ(script_int_pair("runs", "3 -1", 0, 5, -2, 0), std::make_pair(3, -1));
}

// What each mouse command plays, frame by frame: the buttons ImGui needs to see pressed and
// released on separate frames, one notch a frame, a drag in steps no longer than kDragStep.
TEST(Script, MouseCommandsPlayTheFramesAHandWould) {
  const auto frames = [](const std::string& verb, const std::string& arg) {
    return mouse_command_frames(ScriptCommand{verb, arg}, 800, 600);
  };
  const PixelPoint p{10, 20};
  EXPECT_EQ(frames("click", "10 20"), (std::vector<MouseFrame>{{p}, {p, true}, {p}}));
  EXPECT_EQ(frames("rclick", "10 20"), (std::vector<MouseFrame>{{p}, {p, false, true}, {p}}));
  EXPECT_EQ(frames("dclick", "10 20"), (std::vector<MouseFrame>{{p}, {p, true}, {p}, {p, true}, {p}}));
  // Ctrl held from the frame before the press to the one after the release.
  EXPECT_EQ(frames("ctrlclick", "10 20"),
            (std::vector<MouseFrame>{{p, false, false, 0, true}, {p, true, false, 0, true}, {p, false, false, 0, true}, {p}}));
  EXPECT_EQ(frames("wheel", "10 20 -2"), (std::vector<MouseFrame>{{p}, {p, false, false, -1}, {p, false, false, -1}}));
  EXPECT_EQ(frames("wheel", "10 20 3").size(), 4u);
  // 40 px left and 10 up: three moves of 13-14 px along the line (none over kDragStep), the button
  // down until the last frame.
  const std::vector<MouseFrame> drag = frames("drag", "100 50 60 40");
  const std::vector<MouseFrame> want = {{{100, 50}}, {{100, 50}, true}, {{87, 47}, true}, {{74, 44}, true},
                                        {{60, 40}, true}, {{60, 40}}};
  EXPECT_EQ(drag, want);
  for (size_t i = 1; i < drag.size(); ++i) {
    EXPECT_LE(std::abs(drag[i].at.x - drag[i - 1].at.x), kDragStep);
    EXPECT_LE(std::abs(drag[i].at.y - drag[i - 1].at.y), kDragStep);
  }
  EXPECT_EQ(frames("drag", "5 5 5 5").size(), 4u);  // a drag that does not move still presses and releases
}

// The script's keyboard: a key down on one frame and up on the next; text typed on one frame;
// anything else names the command and the keys there are.
TEST(Script, KeyCommandsPlayTheFramesAHandWould) {
  EXPECT_TRUE(is_key_command(ScriptCommand{"key", "left"}));
  EXPECT_TRUE(is_key_command(ScriptCommand{"type", "12"}));
  EXPECT_FALSE(is_key_command(ScriptCommand{"click", "1 2"}));
  const std::vector<KeyFrame> right = key_command_frames(ScriptCommand{"key", "right"});
  ASSERT_EQ(right.size(), 2u);
  EXPECT_GE(right[0].key, 0);
  EXPECT_EQ(right[1], KeyFrame{});
  EXPECT_NE(key_command_frames(ScriptCommand{"key", "home"})[0].key, right[0].key);
  EXPECT_EQ(key_command_frames(ScriptCommand{"type", "0.5"}), (std::vector<KeyFrame>{{-1, "0.5"}}));
  const std::vector<KeyFrame> ctrl_o = key_command_frames(ScriptCommand{"key", "ctrl+o"});  // Ctrl held on both
  EXPECT_EQ(ctrl_o, (std::vector<KeyFrame>{{GLFW_KEY_O, "", true}, {-1, "", true}}));
  EXPECT_EQ(key_command_frames(ScriptCommand{"key", "ctrl+home"})[0], (KeyFrame{key_command_frames(ScriptCommand{"key", "home"})[0].key, "", true}));
  const auto message = [](const std::string& verb, const std::string& arg) {
    try {
      key_command_frames(ScriptCommand{verb, arg});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message("key", "pgup"),
            "--script: 'key pgup' expects one of left, right, up, down, home, end, space, enter, escape, tab, backspace, "
            "delete, f1, =, -, 0, each also as ctrl+NAME, or ctrl+ a letter");
  EXPECT_EQ(key_command_frames(ScriptCommand{"key", "ctrl+="}),  // View > Text size's Larger
            (std::vector<KeyFrame>{{GLFW_KEY_EQUAL, "", true}, {-1, "", true}}));
  EXPECT_NE(message("key", "o"), "(accepted)");  // a letter alone is typed, not pressed
  EXPECT_NE(message("key", "ctrl+"), "(accepted)");
  EXPECT_NE(message("key", "ctrl+oo"), "(accepted)");
  EXPECT_EQ(message("type", ""), "--script: 'type' expects the text to type");
}

// The attention map's axes: round numbers, never more than asked for, within the range.
TEST(AxisTicks, RoundNumbersWithinTheRange) {
  EXPECT_EQ(axis_ticks(0, 39, 5), (std::vector<int>{0, 10, 20, 30}));
  EXPECT_EQ(axis_ticks(0, 4, 10), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(axis_ticks(3.2, 17.9, 4), (std::vector<int>{5, 10, 15}));
  EXPECT_EQ(axis_ticks(0, 2047, 6), (std::vector<int>{0, 500, 1000, 1500, 2000}));
  EXPECT_EQ(axis_ticks(10, 11, 1).size(), 1u);
  EXPECT_TRUE(axis_ticks(5, 4, 3).empty());
  for (int n : {1, 3, 7, 12}) EXPECT_LE((int)axis_ticks(0, 12345, n).size(), n);
}

// Each statistic of the head grid starts with its own tau (one shared 0.5 outlined 263 of 270
// heads on entropy, whose values are nats, mostly above 1).
TEST(HeadGrid, EachStatisticHasItsOwnTauAndUnit) {
  std::vector<float> entropy;
  for (int i = 0; i < 100; ++i) entropy.push_back(0.5f + 0.03f * (float)i);  // 0.5 .. 3.47 nats
  const float t = default_head_tau("entropy", entropy);
  int above = 0;
  for (float v : entropy) above += v >= t;
  EXPECT_GE(above, 9);
  EXPECT_LE(above, 11);  // the top tenth
  EXPECT_FLOAT_EQ(default_head_tau("retrieval_score", entropy), 0.1f);
  EXPECT_FLOAT_EQ(default_head_tau("sink_mass", entropy), 0.5f);
  EXPECT_FLOAT_EQ(default_head_tau("alpha", {0.1f, 0.2f, 0.9f}), 0.2f);  // the median gate
  EXPECT_EQ(head_stat_unit("entropy"), "nats");
  EXPECT_EQ(head_stat_unit("sink_mass"), "");
  EXPECT_FLOAT_EQ(default_head_tau("entropy", {}), 0.0f);
}

// SmolLM2's 30 x 9 grid (controls 220 x 94 px, axis titles 36 px, layer numbers 34 px).
HeadGridLayout smollm2_grid(float w, float h) { return head_grid_layout(w, h, 30, 9, 220, 94, 36, 34, 1); }

// In the tiled layout at 1200x700 the grid's panel has about 385 x 150 px: below the controls the
// cells did not fit (only layer 0 showed without scrolling); beside them the whole grid does.
TEST(HeadGrid, BelowOrBesideItsControlsWhicheverGivesLargerCells) {
  const HeadGridLayout small = smollm2_grid(385, 150);
  EXPECT_TRUE(small.beside);
  EXPECT_LE(36 + 30 * small.cell_h, 150.0f);
  EXPECT_GE(small.cell_h, 3.0f);
  EXPECT_LE(34 + 9 * small.cell_w + 220, 385.0f);
  EXPECT_GE(small.cell_w, 8.0f);
  // 1920x1080 tiled (640 x 260): beside, with taller cells than below would give.
  const HeadGridLayout tiled = smollm2_grid(640, 260);
  EXPECT_TRUE(tiled.beside);
  EXPECT_GT(tiled.cell_h, (260.0f - 94 - 36) / 30);
  // The view alone at 1600x1000 or 1200x700: below, as large as before.
  const HeadGridLayout large = smollm2_grid(1584, 950);
  EXPECT_FALSE(large.beside);
  EXPECT_FLOAT_EQ(large.cell_w, 64.0f);
  EXPECT_FLOAT_EQ(large.cell_h, (950.0f - 94 - 36) / 30);
  EXPECT_FALSE(smollm2_grid(1184, 650).beside);
  // stories260K's 5 x 8 grid in the same panel would fit below in 6 px rows; beside, its cells are
  // larger (20 x 25 px rather than 47 x 6).
  const HeadGridLayout few = head_grid_layout(414, 158, 5, 8, 217, 93, 34, 39, 1);
  EXPECT_TRUE(few.beside);
  EXPECT_GT(few.cell_h, 20.0f);
  // Too narrow to put anything beside: below, cells shrunk to 3 px (the window scrolls).
  const HeadGridLayout tiny = smollm2_grid(200, 100);
  EXPECT_FALSE(tiny.beside);
  EXPECT_FLOAT_EQ(tiny.cell_h, 3.0f);
}

// Text twice as large (View > Text size) in a panel twice as large: the same choice, cells twice
// the size (the limits on cells follow the text, or a large panel of large text would cap them).
TEST(HeadGrid, LaidOutAlikeAtTwiceTheTextInAPanelTwiceAsLarge) {
  for (const auto& [w, h] : {std::pair{385.0f, 150.0f}, {640.0f, 260.0f}, {1584.0f, 950.0f}, {200.0f, 100.0f}}) {
    const HeadGridLayout one = smollm2_grid(w, h), two = head_grid_layout(2 * w, 2 * h, 30, 9, 440, 188, 72, 68, 2);
    SCOPED_TRACE(std::to_string((int)w) + "x" + std::to_string((int)h));
    EXPECT_EQ(two.beside, one.beside);
    EXPECT_FLOAT_EQ(two.cell_w, 2 * one.cell_w);
    EXPECT_FLOAT_EQ(two.cell_h, 2 * one.cell_h);
  }
}

TEST(Colormap, ViridisAndMagmaEndpoints) {
  auto rgb = [](uint32_t c) { return std::vector<int>{(int)(c & 255), (int)((c >> 8) & 255), (int)((c >> 16) & 255)}; };
  // matplotlib: viridis(0) = #440154, viridis(1) = #fde725; magma(0) = #000004, magma(1) = #fcfdbf.
  const auto v0 = rgb(colormap_color(Colormap::kViridis, 0.0f)), v1 = rgb(colormap_color(Colormap::kViridis, 1.0f));
  const auto m0 = rgb(colormap_color(Colormap::kMagma, 0.0f)), m1 = rgb(colormap_color(Colormap::kMagma, 1.0f));
  const std::vector<int> want[] = {{0x44, 0x01, 0x54}, {0xfd, 0xe7, 0x25}, {0x00, 0x00, 0x04}, {0xfc, 0xfd, 0xbf}};
  const std::vector<int>* got[] = {&v0, &v1, &m0, &m1};
  for (int i = 0; i < 4; ++i)
    for (int ch = 0; ch < 3; ++ch) EXPECT_NEAR((*got[i])[ch], want[i][ch], 1) << "colour " << i << " channel " << ch;
  EXPECT_EQ(colormap_color(Colormap::kViridis, -1.0f), colormap_color(Colormap::kViridis, 0.0f));
  EXPECT_EQ(colormap_color(Colormap::kViridis, 0.0f) >> 24, 255u);  // opaque
}

TEST(Colormap, LinearAndLogScaling) {
  const float v[] = {0.0f, 0.5f, 1.0f, 0.01f, 1e-6f};
  float out[5];
  scale_values(v, 5, false, 0.0f, 1e-4f, out);
  EXPECT_FLOAT_EQ(out[1], 0.5f);
  EXPECT_FLOAT_EQ(out[2], 1.0f);
  scale_values(v, 5, true, 0.0f, 1e-4f, out);
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[2], 1.0f);
  EXPECT_NEAR(out[3], 0.5f, 1e-6f);  // 1e-2 is halfway between 1e-4 and 1 in log scale
  EXPECT_FLOAT_EQ(out[4], 0.0f);     // below the floor
}

// The log scale's floor follows the values: a head with all but a millionth of its mass on one key
// gets decades enough to show the rest (a fixed 1e-4 made its map flat), never fewer than four.
TEST(Colormap, LogFloorFollowsTheValues) {
  std::vector<float> sink(100, 1e-6f);
  sink[0] = 1.0f;
  EXPECT_FLOAT_EQ(log_floor(sink.data(), sink.size()), 1e-6f);
  std::vector<float> spread(100);
  for (int i = 0; i < 100; ++i) spread[i] = 0.01f * (float)(i + 1);
  EXPECT_FLOAT_EQ(log_floor(spread.data(), spread.size()), 1e-4f) << "at least four decades";
  std::vector<float> tiny(100, 1e-12f);
  tiny[0] = 1.0f;
  EXPECT_FLOAT_EQ(log_floor(tiny.data(), tiny.size()), 1e-8f) << "at most eight";
  const std::vector<float> zeros(10, 0.0f);
  EXPECT_FLOAT_EQ(log_floor(zeros.data(), zeros.size()), 1e-4f);
}

}  // namespace
}  // namespace kvs

#else
TEST(GuiWorker, SkippedWithoutTheDesktopApp) { GTEST_SKIP() << "built without the desktop app"; }
#endif
