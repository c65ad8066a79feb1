// The layout's geometry without a window: the tiled layout covers the work area, a layout kept as
// fractions comes back to the same pixels and keeps touching windows touching at another size,
// a saved layout refit to the text size a start has, the window size the app opens at, the "[KVScope][Display]" entry of imgui.ini, and text cut to
// the width it has (the status bar, lane names).
#include <gtest/gtest.h>

#ifdef KVSCOPE_GUI
#include <imgui.h>

#include <optional>
#include <string>
#include <vector>

#include "app/gui/fonts.h"
#include "app/gui/layout.h"
#include "app/gui/widgets.h"
#include "app/gui/window_memory.h"
#include "tests/app/headless_imgui.h"

namespace kvs {
namespace {

const std::vector<std::string> kViewIds = {"timeline", "run", "lanes", "attention", "heads", "layers", "metrics",
                                           "compare"};

bool overlap(const Rect& a, const Rect& b) {
  return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

bool whole_pixels(const Rect& r) {
  return r.x == (float)(int)r.x && r.y == (float)(int)r.y && r.w == (float)(int)r.w && r.h == (float)(int)r.h;
}

// Every pixel of the work area belongs to exactly one view, whatever the size (odd ones too).
TEST(Layout, TiledViewsCoverTheWorkAreaInWholePixels) {
  const std::vector<std::pair<float, float>> sizes = {{1600, 1000}, {1280, 720}, {1023, 767}, {801, 599}};
  for (const auto& [w, h] : sizes) {
    const Rect work = work_area(w, h, 21);
    EXPECT_EQ(work.y, 21);
    EXPECT_EQ(work.h, h - 2 * 21 - 8);  // the menu bar above, the status bar (bar + 8) below
    double area = 0;
    for (size_t i = 0; i < kViewIds.size(); ++i) {
      const Rect r = tiled_rect(kViewIds[i], work, 1);
      EXPECT_TRUE(whole_pixels(r)) << kViewIds[i];
      EXPECT_GE(r.x, work.x);
      EXPECT_GE(r.y, work.y);
      EXPECT_LE(r.x + r.w, work.x + work.w);
      EXPECT_LE(r.y + r.h, work.y + work.h);
      area += (double)r.w * r.h;
      for (size_t j = 0; j < i; ++j) EXPECT_FALSE(overlap(r, tiled_rect(kViewIds[j], work, 1))) << kViewIds[i];
    }
    EXPECT_EQ(area, (double)work.w * work.h) << w << "x" << h;
  }
  const Rect work = work_area(1280, 720, 21), alone = alone_rect(work, 1);
  EXPECT_EQ(alone.y, tiled_rect("timeline", work, 1).y + tiled_rect("timeline", work, 1).h);
  EXPECT_EQ(alone.y + alone.h, work.y + work.h);
  EXPECT_EQ(alone.w, work.w);
}

// The tiled layout at 1600x1000 carried to 1024x768 and back: every window where it was, and
// windows that touched before touch at 1024x768 too.
TEST(Layout, FractionsComeBackToTheSamePixelsAndKeepWindowsTouching) {
  const Rect big = work_area(1600, 1000, 21), small = work_area(1024, 768, 21);
  for (const std::string& id : kViewIds) {
    const Rect r = tiled_rect(id, big, 1), f = to_fractions(r, big);
    EXPECT_EQ(from_fractions(f, big), r) << id;
    const Rect there = from_fractions(f, small);
    EXPECT_TRUE(whole_pixels(there)) << id;
    EXPECT_EQ(from_fractions(to_fractions(there, small), small), there) << id;
  }
  const Rect run = from_fractions(to_fractions(tiled_rect("run", big, 1), big), small);
  const Rect lanes = from_fractions(to_fractions(tiled_rect("lanes", big, 1), big), small);
  const Rect attention = from_fractions(to_fractions(tiled_rect("attention", big, 1), big), small);
  EXPECT_EQ(run.x + run.w, lanes.x);
  EXPECT_EQ(run.y + run.h, attention.y);
  EXPECT_EQ(lanes.x + lanes.w, small.x + small.w);
  EXPECT_TRUE(can_lay_out(small));
  EXPECT_FALSE(can_lay_out(work_area(0, 0, 21)));  // a minimized window
}

// The tiled layout of `work` at text_scale `scale`, as fractions of it.
std::vector<std::optional<Rect>> tiled_fractions(const Rect& work, float scale) {
  std::vector<std::optional<Rect>> f;
  for (const std::string& id : kViewIds) f.push_back(to_fractions(tiled_rect(id, work, scale), work));
  return f;
}

// Text 2x larger (bar 21 -> 42 px): the tiled layout is the tiled layout of the new size, its
// timeline twice as high.
TEST(Layout, TheTiledLayoutIsTiledAgainAtANewTextSize) {
  const Rect old_work = work_area(1600, 1000, 21), work = work_area(1600, 1000, 42);
  std::vector<std::optional<Rect>> f = tiled_fractions(old_work, 1);
  follow_text_size(kViewIds, std::vector<bool>(kViewIds.size(), true), f, old_work, 1, work, 2);
  for (size_t i = 0; i < kViewIds.size(); ++i)
    EXPECT_EQ(from_fractions(*f[i], work), tiled_rect(kViewIds[i], work, 2)) << kViewIds[i];
  EXPECT_EQ(from_fractions(*f[0], work).h, 192);
}

// One view alone with the timeline: the timeline takes the new height, the view's top follows it
// and its bottom stays at the work area's bottom. A layout whose timeline was moved by hand keeps
// every window's fractions.
TEST(Layout, WindowsOnTheTimelinesEdgeFollowItElseStay) {
  const Rect old_work = work_area(1600, 1000, 21), work = work_area(1600, 1000, 42);
  std::vector<std::optional<Rect>> f(kViewIds.size());
  std::vector<bool> visible(kViewIds.size(), false);
  visible[0] = visible[3] = true;  // timeline, attention
  f[0] = to_fractions(tiled_rect("timeline", old_work, 1), old_work);
  f[3] = to_fractions(alone_rect(old_work, 1), old_work);
  follow_text_size(kViewIds, visible, f, old_work, 1, work, 2);
  EXPECT_EQ(from_fractions(*f[0], work), tiled_rect("timeline", work, 2));
  EXPECT_EQ(from_fractions(*f[3], work), alone_rect(work, 2));
  EXPECT_FALSE(f[1].has_value());  // never placed: placed later, at the new size

  std::vector<std::optional<Rect>> moved = tiled_fractions(old_work, 1);
  moved[0] = Rect{0, 0.5f, 1, 0.1f};  // the timeline dragged down by hand
  const std::vector<std::optional<Rect>> before = moved;
  follow_text_size(kViewIds, std::vector<bool>(kViewIds.size(), true), moved, old_work, 1, work, 2);
  EXPECT_EQ(moved, before);
}

// A start opens the loaded layout (rectangles in px of the window it was saved in) at the text
// size it has now: the tiled layout saved at 15 px is the tiled layout at 30 px, whatever the
// window; a view alone with the timeline keeps its top on the timeline's new bottom; at the same
// text size every saved window comes back to its pixels; a view the layout lacks is tiled.
TEST(Layout, OpeningRefitsALayoutSavedAtAnotherTextSize) {
  const Rect saved_work = work_area(1600, 1000, 21), work = work_area(1280, 720, 42);
  std::vector<std::optional<Rect>> saved;
  for (const std::string& id : kViewIds) saved.push_back(tiled_rect(id, saved_work, 1));
  const std::vector<bool> all(kViewIds.size(), true);
  std::vector<std::optional<Rect>> f = opening_fractions(kViewIds, saved, all, saved_work, 1, work, 2);
  for (size_t i = 0; i < kViewIds.size(); ++i)
    EXPECT_EQ(from_fractions(*f[i], work), tiled_rect(kViewIds[i], work, 2)) << kViewIds[i];

  std::vector<std::optional<Rect>> alone(kViewIds.size());
  std::vector<bool> visible(kViewIds.size(), false);
  visible[0] = visible[3] = true;  // timeline, attention
  alone[0] = tiled_rect("timeline", saved_work, 1);
  alone[3] = alone_rect(saved_work, 1);
  f = opening_fractions(kViewIds, alone, visible, saved_work, 1, work, 2);
  EXPECT_EQ(from_fractions(*f[3], work), alone_rect(work, 2));
  EXPECT_EQ(from_fractions(*f[1], work), tiled_rect("run", work, 2));  // not in the layout: tiled

  std::vector<std::optional<Rect>> hand = saved;
  hand[3] = Rect{100, 300, 640, 400};  // moved by hand
  f = opening_fractions(kViewIds, hand, all, saved_work, 1, saved_work, 1);
  for (size_t i = 0; i < kViewIds.size(); ++i) EXPECT_EQ(from_fractions(*f[i], saved_work), *hand[i]) << kViewIds[i];
}

TEST(Layout, OpensAtTheSavedSizeWithinTheScreen) {
  EXPECT_EQ(opening_size({1600, 1000}, {1920, 1050}), (Extent{1600, 1000}));
  EXPECT_EQ(opening_size({1600, 1000}, {1366, 738}), (Extent{1366, 738}));
  EXPECT_EQ(opening_size({1280, 720}, {0, 0}), (Extent{1280, 720}));  // no monitor to ask
}

// A fresh context per test: the handler's entry is read from and written to the ini's text.
class DisplaySetting : public ::testing::Test {
 protected:
  void SetUp() override {
    ImGui::CreateContext();
    ImGui::GetIO().IniFilename = nullptr;
    register_display_settings(&saved_);
  }
  void TearDown() override { ImGui::DestroyContext(); }
  DisplaySettings saved_;
};

TEST_F(DisplaySetting, ReadsTheSavedSizeAndKeepsTheDefaultWithoutOne) {
  ImGui::LoadIniSettingsFromMemory("[Window][Run]\nPos=0,117\nSize=533,285\n");
  EXPECT_EQ(saved_.size, kDefaultWindow);  // a layout saved before the entry existed: 1600 x 1000
  ImGui::LoadIniSettingsFromMemory("[KVScope][Display]\nSize=abc\n");
  EXPECT_EQ(saved_.size, kDefaultWindow);
  ImGui::LoadIniSettingsFromMemory("[KVScope][Display]\nSize=1280,720\n");
  EXPECT_EQ(saved_.size, (Extent{1280, 720}));
  EXPECT_EQ(saved_.text_size, 0.0f);  // never chosen: the monitor's
}

TEST_F(DisplaySetting, ReadsTheTextSizeWithinItsRange) {
  ImGui::LoadIniSettingsFromMemory("[KVScope][Display]\nSize=1280,720\nTextSize=21\n");
  EXPECT_EQ(saved_.text_size, 21.0f);
  for (const char* bad : {"TextSize=9", "TextSize=41", "TextSize=big", "TextSize=nan"}) {
    ImGui::LoadIniSettingsFromMemory(("[KVScope][Display]\n" + std::string(bad) + "\n").c_str());
    EXPECT_EQ(saved_.text_size, 21.0f) << bad;
  }
}

TEST_F(DisplaySetting, WritesTheTextSizeOnlyOnceChosen) {
  ImGui::GetIO().DisplaySize = ImVec2(1024, 768);
  EXPECT_EQ(std::string(ImGui::SaveIniSettingsToMemory()).find("TextSize"), std::string::npos);
  saved_.text_size = 24;
  const std::string ini = ImGui::SaveIniSettingsToMemory();
  EXPECT_NE(ini.find("[KVScope][Display]\nSize=1024,768\nTextSize=24\n"), std::string::npos) << ini;
  saved_ = DisplaySettings{};
  ImGui::LoadIniSettingsFromMemory(ini.c_str());
  EXPECT_EQ(saved_.size, (Extent{1024, 768}));
  EXPECT_EQ(saved_.text_size, 24.0f);
}

// The text size the layout was saved at, known or not: an ini from before it was kept has none.
TEST_F(DisplaySetting, KeepsTheLayoutsTextSize) {
  ImGui::GetIO().DisplaySize = ImVec2(1024, 768);
  EXPECT_EQ(std::string(ImGui::SaveIniSettingsToMemory()).find("LayoutTextSize"), std::string::npos);
  saved_.layout_text_size = 23;
  const std::string ini = ImGui::SaveIniSettingsToMemory();
  EXPECT_NE(ini.find("[KVScope][Display]\nSize=1024,768\nLayoutTextSize=23\n"), std::string::npos) << ini;
  saved_ = DisplaySettings{};
  ImGui::LoadIniSettingsFromMemory(ini.c_str());
  EXPECT_EQ(saved_.layout_text_size, 23.0f);
  EXPECT_EQ(saved_.text_size, 0.0f);
  ImGui::LoadIniSettingsFromMemory("[KVScope][Display]\nLayoutTextSize=99\n");
  EXPECT_EQ(saved_.layout_text_size, 23.0f);  // out of range: not a size the app draws
}

// The menu bar's height without fonts, as the app's frame height is once they are set up.
TEST_F(DisplaySetting, MenuBarHeightIsTheFrameHeightAtThatTextSize) {
  for (float px : {10.0f, 15.0f, 17.0f, 23.0f, 40.0f}) {
    setup_fonts_and_style(px);
    ImGui::GetIO().Fonts->Build();
    ImGui::GetIO().DisplaySize = ImVec2(800, 600);
    ImGui::NewFrame();
    EXPECT_EQ(menu_bar_height(px), ImGui::GetFrameHeight()) << px;
    ImGui::EndFrame();
  }
}

TEST_F(DisplaySetting, WritesTheDisplaySizeOfTheTime) {
  ImGui::GetIO().DisplaySize = ImVec2(1024, 768);
  const std::string ini = ImGui::SaveIniSettingsToMemory();
  EXPECT_NE(ini.find("[KVScope][Display]\nSize=1024,768\n"), std::string::npos) << ini;
  ImGui::GetIO().DisplaySize = ImVec2(0, 0);  // minimized: nothing said
  EXPECT_EQ(std::string(ImGui::SaveIniSettingsToMemory()).find("[KVScope]"), std::string::npos);
}

TEST_F(DisplaySetting, WindowRectFromTheIniBeforeTheWindowExists) {
  ImGui::LoadIniSettingsFromMemory("[Window][Run]\nPos=10,20\nSize=300,200\n");
  EXPECT_EQ(window_rect("Run"), (Rect{10, 20, 300, 200}));
  EXPECT_FALSE(window_rect("Compare").has_value());
}

// ImGui's default font, as the app measures text between NewFrame and Render.
class TextWidth : public ::testing::Test {
 protected:
  void SetUp() override {
    gui_test::headless_imgui(800, 600);
    ImGui::NewFrame();
  }
  void TearDown() override {
    ImGui::EndFrame();
    ImGui::DestroyContext();
  }
  static float width(const std::string& s) { return ImGui::CalcTextSize(s.c_str()).x; }
};

TEST_F(TextWidth, ElideKeepsWhatFitsAndCutsTheRestInWholeCharacters) {
  EXPECT_EQ(elide("short", 200), "short");
  const std::string long_text = "prefill map of 31.5 MiB exceeds the capture budget of 8.0 MiB; kept column sums";
  const std::string cut = elide(long_text, 150);
  ASSERT_GE(cut.size(), 4u);
  EXPECT_EQ(cut.substr(cut.size() - 3), "...");
  EXPECT_LE(width(cut), 150.0f);
  const std::string kept = cut.substr(0, cut.size() - 3);
  EXPECT_EQ(long_text.rfind(kept, 0), 0u);                        // the text's start
  EXPECT_GT(width(long_text.substr(0, kept.size() + 1) + "..."), 150.0f);  // and no more of it fits
  const std::string accents = "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9";
  const std::string cut_accents = elide(accents, width(accents) / 2);
  EXPECT_EQ((cut_accents.size() - 3) % 2, 0u);  // two-byte characters, none halved
  EXPECT_EQ(elide(long_text, 1), "...");       // no room at all
}

}  // namespace
}  // namespace kvs

#else
TEST(GuiLayout, SkippedWithoutTheDesktopApp) { GTEST_SKIP() << "built without the desktop app"; }
#endif
