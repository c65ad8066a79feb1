// The views that must show whole in their panels of the tiled layout, at the sizes a projector
// or a laptop gives (1024x768, 1280x720, 1366x768) and the app's first 1600x1000: drawn headless
// with the app's font and style on the sample traces, the attention map, the head grid and the
// layer similarity leave nothing to scroll to (the optimizer's plan and the map's axis titles
// fell below the panel's edge at 1280x720, the head grid's cells at 1024x768); and so they do
// with text 1.5 and 2 times as large in windows as much larger (View > Text size, high-DPI
// screens: "display" ran 2 px past the attention map's edge at 22.5 px, as a small button's width
// was measured without its side padding).
#include <gtest/gtest.h>

#ifdef KVSCOPE_GUI
#include <imgui.h>
#include <imgui_internal.h>  // ImGuiWindow::ScrollMax

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "app/gui/app_state.h"
#include "app/gui/layout.h"
#include "app/views/view.h"
#include "tests/app/headless_imgui.h"
#include "tests/test_paths.h"

namespace kvs {
namespace {

struct Fit {
  ImVec2 scroll_max;   // what the view's window has to scroll, in px
  size_t csv_rows = 0;  // what it shows (0: still loading or empty)
};

// Draws view `id` in its tiled panel of a display_w x display_h window for a few frames (the
// data it reads in the background arriving in between) and measures its last frame.
Fit draw_tiled(AppState& app, View& view, float display_w, float display_h) {
  ImGuiIO& io = ImGui::GetIO();
  io.DisplaySize = ImVec2(display_w, display_h);
  Fit fit;
  for (int frame = 0; frame < 6; ++frame) {
    io.DeltaTime = 1.0f / 60;
    ImGui::NewFrame();
    const Rect r = tiled_rect(view.id(), work_area(display_w, display_h, ImGui::GetFrameHeight()), ui_px(1));
    ImGui::SetNextWindowPos(ImVec2(r.x, r.y));
    ImGui::SetNextWindowSize(ImVec2(r.w, r.h));
    ImGui::Begin(view.title(), nullptr, ImGuiWindowFlags_NoCollapse);
    view.draw(app);
    fit.scroll_max = ImGui::GetCurrentWindow()->ScrollMax;
    ImGui::End();
    ImGui::EndFrame();
    for (int i = 0; i < 2; ++i) {  // a job's result can start the next (the similarity after the trace)
      app.io.wait_idle();
      app.io.drain();
      app.engine.wait_idle();
      app.engine.drain();
    }
  }
  fit.csv_rows = view.csv(app).rows.size();
  return fit;
}

class GuiFit : public ::testing::TestWithParam<std::string> {};

TEST_P(GuiFit, TiledViewsShowWholeAtProjectorAndLaptopSizes) {
  const std::string trace = test::source_path("sample_traces/" + GetParam());
  if (!std::filesystem::exists(trace)) GTEST_SKIP() << "sample trace missing: " << trace;
  ImGuiContext* context = gui_test::headless_imgui(1600, 1000, true);
  AppState app(true);
  app.open_trace(trace);
  app.io.wait_idle();
  app.io.drain();
  ASSERT_TRUE(app.trace) << app.status;
  const std::vector<std::unique_ptr<View>> views = make_views("");
  const std::vector<std::pair<float, float>> sizes = {{1024, 768}, {1280, 720}, {1366, 768}, {1600, 1000}};
  // And with the text 1.5 and 2 times as large (View > Text size; a high-DPI screen's default) in
  // a window as much larger: the views scale with their text.
  const std::vector<float> text_scales = {1.0f, 1.5f, 2.0f};
  // An OmniKV run overlaid on the attention map: its legend ("red: evicted", "haze: inactive")
  // joins the line above the map.
  const auto omnikv = std::find_if(app.trace->runs.begin(), app.trace->runs.end(),
                                   [](const RunData& r) { return r.policy == "omnikv"; });
  ASSERT_NE(omnikv, app.trace->runs.end());
  // Each size twice: as the trace opens, then with a choice of filter layers typed beside the
  // optimizer's (a second plan in the layer similarity's column) and the OmniKV run overlaid.
  for (const float scale : text_scales) {
    setup_fonts_and_style(kDefaultTextSize * scale);
    gui_test::build_font_atlas();
    for (const std::string given : {"", "1,3"})
      for (const auto& [w, h] : sizes)
        for (const auto& view : views) {
          const std::string id = view->id();
          if (id != "attention" && id != "heads" && id != "layers") continue;
          view->command(app, "given", given);  // "": none
          view->command(app, "overlay", given.empty() ? "none" : omnikv->name);
          const float dw = std::round(w * scale), dh = std::round(h * scale);
          const Fit fit = draw_tiled(app, *view, dw, dh);
          char text[32];
          std::snprintf(text, sizeof text, ", text %g px", kDefaultTextSize * scale);
          SCOPED_TRACE(id + " at " + std::to_string((int)dw) + "x" + std::to_string((int)dh) + text +
                       (given.empty() ? "" : ", given " + given + " and overlay " + omnikv->name));
          EXPECT_GT(fit.csv_rows, 0u) << "the view showed no data";
          EXPECT_EQ(fit.scroll_max.y, 0.0f) << "its panel scrolls by " << fit.scroll_max.y << " px";
          EXPECT_EQ(fit.scroll_max.x, 0.0f) << "its panel scrolls sideways by " << fit.scroll_max.x << " px";
        }
  }
  app.io.wait_idle();
  app.engine.wait_idle();
  ImGui::DestroyContext(context);
}

// SmolLM2's 30 layers x 9 heads, and stories260K's 5 x 8 with a longer decode.
INSTANTIATE_TEST_SUITE_P(SampleTraces, GuiFit, ::testing::Values("smollm2-sink.h5", "stories260K-story.h5"),
                         [](const auto& info) { return info.param.substr(0, info.param.find('-')); });

}  // namespace
}  // namespace kvs

#else
TEST(GuiFit, SkippedWithoutTheDesktopApp) { GTEST_SKIP() << "built without the desktop app"; }
#endif
