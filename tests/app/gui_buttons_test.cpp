// The Run view's "Simulate on open trace" and "Re-run live" buttons under Xvfb, clicked with the
// script's mouse on a stories260K trace: a click adds to the trace the runs that the `simulate`
// (`rerun`) command adds with the same settings — the same names, kept sets, metrics and, for
// live runs, tokens — and the app shows the same picture. Where the buttons are is read off a
// picture: the controls on the output box's row, left of it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/trace.h"
#include "tests/analysis/run_equal.h"
#include "tests/app/cli_util.h"
#include "tests/app/gui_screenshot.h"

namespace fs = std::filesystem;
using namespace kvs::gui_test;

namespace {

class GuiButtons : public ScreenshotFixture {
 protected:
  // The Record, Simulate, Re-run buttons and the mode box, left to right, on the Run view of the
  // open trace at `size`; empty (with a failure) when they cannot be found.
  std::vector<Point> button_row(const std::string& size) {
    const auto refs = shots("run", size, {{"out_a", "out a.h5"}, {"out_b", "out bbbbbbbbbbbb.h5"}});
    if (refs.size() != 2) return {};
    const Box out_box = diff_box(refs[0], refs[1]);  // the output path's text
    if (out_box.empty()) return ADD_FAILURE() << "the output box did not change with its path", std::vector<Point>{};
    const int y = out_box.center().y;
    std::vector<Point> controls;
    for (const auto& [x0, x1] : row_runs(refs[0], y, 2, out_box.x0, refs[0].at(2, y)))
      if (x1 - x0 >= 20) controls.push_back({(x0 + x1) / 2, y});  // a button, not a label's stroke
    return controls;
  }

  // A copy of the recorded trace in a folder of its own, `name`: each app run adds its runs to
  // its own copy.
  std::string copy_of(const std::string& recorded, const std::string& name) {
    const fs::path folder = dir_ / name;
    fs::create_directories(folder);
    fs::copy_file(recorded, folder / "trace.h5");
    return (folder / "trace.h5").string();
  }
};

// Every run of two traces alike: names, and each run field by field (kept sets, metrics, tokens, text).
void expect_same_runs(const std::string& a_path, const std::string& b_path) {
  const kvs::TraceReader a(a_path), b(b_path);
  ASSERT_EQ(a.run_names(), b.run_names());
  for (const std::string& name : a.run_names()) {
    SCOPED_TRACE(name);
    kvs::testing::expect_same_run(a.read_run(name, true), b.read_run(name, true), true);
  }
}

TEST_F(GuiButtons, SimulateAndRerunClicksAddTheRunsOfTheirCommands) {
  if (!fs::exists(kvs::cli_test::stories_bin())) GTEST_SKIP() << "test model missing: " << kvs::cli_test::stories_bin();
  const std::string recorded = (dir_ / "recorded.h5").string();
  const kvs::cli_test::CliResult rec = kvs::cli_test::record_stories(recorded, "Once upon a time", 12);
  ASSERT_EQ(rec.code, 0) << rec.err;
  trace_ = recorded;  // the buttons' row is found on the Run view of this trace
  const std::string size = "1000x700";
  const std::vector<Point> row = button_row(size);
  ASSERT_GE(row.size(), 4u) << "Record, Simulate, Re-run and the mode box";
  const Point simulate = row[1], rerun = row[2];

  // Budget 6 of the ~17 positions: both policies evict.
  const std::string setup = "policies h2o|tova;budget 6;mode free;";
  const std::string sim_click = copy_of(recorded, "sim_click"), sim_cmd = copy_of(recorded, "sim_cmd");
  const std::string rerun_click = copy_of(recorded, "rerun_click"), rerun_cmd = copy_of(recorded, "rerun_cmd");
  const auto got = shots("run", size,
                         {{"sim_click", setup + "click " + at(simulate)},
                          {"sim_cmd", setup + "simulate;hover " + at(simulate)},
                          {"rerun_click", setup + "click " + at(rerun)},
                          {"rerun_cmd", setup + "rerun;hover " + at(rerun)}},
                         {sim_click, sim_cmd, rerun_click, rerun_cmd});
  ASSERT_EQ(got.size(), 4u);

  const kvs::TraceReader simulated(sim_click), rerun_by_click(rerun_click);
  EXPECT_EQ(simulated.run_names(), (std::vector<std::string>{"h2o_b6", "tova_b6"}));
  EXPECT_EQ(rerun_by_click.run_names(), (std::vector<std::string>{"h2o_b6_free", "tova_b6_free"}));
  expect_same_runs(sim_click, sim_cmd);
  expect_same_runs(rerun_click, rerun_cmd);
  EXPECT_EQ(differing_pixels(got[0], got[1]), 0u) << "Simulate by click and by command show different pictures";
  EXPECT_EQ(differing_pixels(got[2], got[3]), 0u) << "Re-run by click and by command show different pictures";
}

}  // namespace
