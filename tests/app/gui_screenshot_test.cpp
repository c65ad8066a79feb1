// GUI smoke test under Xvfb: every view renders a trace to a PNG that is not blank, a scripted
// interaction (step forward, select a head) changes the pixels, bad input in screenshot mode
// exits 2 with one line on stderr, and --screenshot replaces nothing but a PNG. Skips when the
// app or xvfb-run is not available.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "analysis/policy_omnikv.h"
#include "analysis/trace.h"
#include "inference/cuda_backend.h"
#include "tests/app/gui_screenshot.h"
#include "tests/test_paths.h"

namespace fs = std::filesystem;
using namespace kvs::gui_test;

namespace {

const char* kViews[] = {"run", "timeline", "lanes", "attention", "heads", "layers", "metrics", "compare", "all"};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class GuiScreenshot : public ScreenshotFixture {};

// Each view with the trace is not blank (pixel variance) and shows data: it differs from the same
// view rendered with no trace open (title and a one-line notice) in a good share of its pixels.
// The Run view is the recording form, the same with or without a trace: variance only.
TEST_F(GuiScreenshot, EveryViewRendersAPictureThatIsNotBlank) {
  std::vector<std::string> runs;
  for (const char* view : kViews) {
    runs.push_back("\"" + trace_ + "\" --screenshot \"" + png(view) + "\" --view " + view + " --size 960x600");
    runs.push_back("--screenshot \"" + png(std::string(view) + "_empty") + "\" --view " + view + " --size 960x600");
  }
  ASSERT_EQ(gui_batch(runs), std::vector<int>(runs.size(), 0));
  for (const char* view : kViews) {
    SCOPED_TRACE(view);
    const Image img = load_png(png(view)), blank = load_png(png(std::string(view) + "_empty"));
    ASSERT_EQ(img.w, 960);
    ASSERT_EQ(img.h, 600);
    EXPECT_GT(luminance_stddev(img), 15.0) << "view " << view << " looks blank";
    if (std::string(view) != "run") {
      EXPECT_GT(differing_pixels(img, blank), (size_t)(960 * 600 / 50)) << "view " << view << " shows no data";
    }
  }
}

TEST_F(GuiScreenshot, ScriptedStepAndHeadSelectionChangeWhatIsDrawn) {
  const std::string base = "\"" + trace_ + "\" --size 1200x800 --step 3 --screenshot ";
  const std::string heads = "\"" + trace_ + "\" --view heads --size 800x600 --screenshot ";
  const std::vector<std::string> runs = {
      base + "\"" + png("before") + "\"",
      base + "\"" + png("after") + "\" --script \"step+1;select 2 3\"",
      base + "\"" + png("again") + "\" --script \"step+1;select 2 3\"",
      heads + "\"" + png("heads0") + "\"",
      heads + "\"" + png("heads1") + "\" --script \"select 1 2\""};
  ASSERT_EQ(gui_batch(runs), std::vector<int>(runs.size(), 0));
  const Image before = load_png(png("before")), after = load_png(png("after"));
  ASSERT_EQ(before.rgb.size(), after.rgb.size());
  EXPECT_GT(differing_pixels(before, after), 500u);
  // The same script twice draws the same picture: the difference comes from the interaction.
  EXPECT_EQ(differing_pixels(after, load_png(png("again"))), 0u);
  // Selecting a head alone changes the head grid.
  EXPECT_GT(differing_pixels(load_png(png("heads0")), load_png(png("heads1"))), 50u);
}

// On the prefill map, choosing a run tints the prompt keys it had evicted when decoding began.
TEST_F(GuiScreenshot, PrefillMapShowsTheKeysARunEvicted) {
  const std::string base = "\"" + trace_ + "\" --view attention --size 900x600 --screenshot ";
  const std::vector<std::string> runs = {
      base + "\"" + png("plain") + "\" --script \"map prefill\"",
      base + "\"" + png("tinted") + "\" --script \"map prefill;overlay streamingllm_b12\""};
  ASSERT_EQ(gui_batch(runs), std::vector<int>(runs.size(), 0)) << err_;
  const Image plain = load_png(png("plain")), tinted = load_png(png("tinted"));
  ASSERT_EQ(plain.rgb.size(), tinted.rgb.size());
  // StreamingLLM at budget 12 keeps 4 sinks + 8 recent of 40 prompt keys: most columns tinted.
  EXPECT_GT(differing_pixels(plain, tinted), (size_t)(900 * 500 / 4));
}

// The Run view's Record and Simulate, driven by a script: stories260K records a trace, two
// StreamingLLM runs (without and with sinks), OmniKV and KVzip are simulated into it, and Compare
// shows the StreamingLLM pair. OmniKV gets the filter layers `kvscope simulate` would choose;
// KVzip's repeat-pass scores, which a recording lacks, are computed on the trace's model first.
// Then the head grid scores the retrieval heads on that model: stories260K copies none of the
// needles, so that job fails with its reason (exit 2) and stores nothing. Opened again, the
// trace's live re-run caches as the recording did.
TEST_F(GuiScreenshot, RecordAndSimulateFromTheRunView) {
  const std::string model = kvs::test::shared_path("models/stories260K/stories260K.bin");
  if (!fs::exists(model)) GTEST_SKIP() << "test model missing: " << model;
  const std::string out = (dir_ / "recorded.h5").string();
  // device cuda: the GPU where this machine has one (storing bf16), else a notice and the CPU
  // (its cache in fp16).
  const std::string script = "model " + model + ";device cuda;gpu-dtype bf16;kv-dtype fp16;prompt Once upon a time, there was a little girl;steps 12;out " +
                             out + ";policies streamingllm|streamingllm:sinks=0|omnikv|kvzip;budget 8;record;simulate;sinkpair";
  ASSERT_EQ(gui("--screenshot \"" + png("recorded") + "\" --view compare --size 960x600 --script \"" + script + "\""), 0) << err_;
  kvs::TraceReader reader(out);
  EXPECT_EQ(reader.meta().n_steps, 12);
  EXPECT_EQ(reader.meta().device, kvs::cuda_usable() ? "cuda" : "cpu");
  EXPECT_EQ(reader.meta().device_dtype, kvs::cuda_usable() ? "bf16" : "fp16");
  const auto runs = reader.run_names();
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_NE(std::find(runs.begin(), runs.end(), "kvzip_b8"), runs.end());
  kvs::PolicySpec omnikv{"omnikv", {}, 8};
  kvs::resolve_omnikv_spec(omnikv, reader);
  ASSERT_TRUE(omnikv.params.count("filters")) << "the recorded trace has no layer similarity";
  EXPECT_NE(std::find(runs.begin(), runs.end(), omnikv.run_name()), runs.end()) << omnikv.run_name();
  EXPECT_GT(luminance_stddev(load_png(png("recorded"))), 15.0);
  const std::string before = read_file(out);
  ASSERT_EQ(gui("\"" + out + "\" --screenshot \"" + png("retrieval") + "\" --view heads --script retrieval"), 2) << err_;
  EXPECT_NE(err_.find("kvscope: retrieval scores: none of the 5 needle trials was kept"), std::string::npos) << err_;
  EXPECT_TRUE(read_file(out) == before);
  // Opened again, the trace sets the KV cache choice to its recording's: a live re-run on the
  // CPU, with no kv-dtype given, caches in it.
  ASSERT_EQ(gui("\"" + out + "\" --screenshot \"" + png("rerun") + "\" --view run --script \"device cpu;policies h2o;budget 8;rerun\""), 0) << err_;
  EXPECT_EQ(kvs::TraceReader(out).read_run("h2o_b8_forced", false).device_dtype, kvs::cuda_usable() ? "bf16" : "fp16");
}

// A scripted recording never replaces a file: not the open trace, not another one.
TEST_F(GuiScreenshot, ScriptedRecordLeavesExistingFilesAlone) {
  const std::string model = kvs::test::shared_path("models/stories260K/stories260K.bin");
  if (!fs::exists(model)) GTEST_SKIP() << "test model missing: " << model;
  const std::string other = (dir_ / "other.h5").string();
  fs::copy_file(trace_, other);
  const std::string before = read_file(trace_);
  const std::string record = "model " + model + ";prompt Once;steps 2;record";
  const std::vector<int> codes = gui_batch(
      {"\"" + trace_ + "\" --screenshot \"" + png("a") + "\" --script \"out " + trace_ + ";" + record + "\"",
       "\"" + trace_ + "\" --screenshot \"" + png("b") + "\" --script \"out " + other + ";" + record + "\""});
  ASSERT_EQ(codes, (std::vector<int>{2, 2})) << err_;
  EXPECT_NE(err_.find("kvscope: --script: 'record' " + trace_ + " is the open trace; choose another output"),
            std::string::npos) << err_;
  EXPECT_NE(err_.find("kvscope: --script: 'record': " + other + " exists; name another with 'out PATH'"),
            std::string::npos) << err_;
  EXPECT_TRUE(read_file(trace_) == before);
  EXPECT_TRUE(read_file(other) == before);
}

// --screenshot OUT used to overwrite anything: the trace it showed, a read-only model file. Now
// OUT must be absent or a PNG (its signature), a regular file, not the trace shown; the PNG is
// written under a temporary name and renamed into place.
TEST_F(GuiScreenshot, ScreenshotReplacesOnlyAPng) {
  const std::string model = (dir_ / "model.bin").string(), fifo = (dir_ / "fifo").string();
  std::ofstream(model) << "model weights, not a picture";
  ASSERT_EQ(::chmod(model.c_str(), 0444), 0);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string trace_bytes = read_file(trace_);
  const std::string shown = "\"" + trace_ + "\" --view heads --screenshot ";
  const std::vector<int> codes = gui_batch({shown + "\"" + trace_ + "\"", shown + "\"" + model + "\"",
                                            shown + "\"" + fifo + "\"", shown + "\"" + png("ok") + "\""});
  ASSERT_EQ(codes, (std::vector<int>{2, 2, 2, 0})) << err_;
  EXPECT_EQ(err_, "kvscope: " + trace_ + ": is the trace being shown; not replacing it\n" +
                      "kvscope: " + model + ": exists and is not a PNG image; not replacing it (remove it or choose "
                      "another name)\n" +
                      "kvscope: " + fifo + ": is a FIFO, not a regular file; not replacing it\n");
  EXPECT_TRUE(read_file(trace_) == trace_bytes);
  EXPECT_EQ(read_file(model), "model weights, not a picture");
  EXPECT_TRUE(fs::is_fifo(fifo));
  // An earlier PNG is replaced.
  const std::string first = read_file(png("ok"));
  ASSERT_EQ(gui("\"" + trace_ + "\" --view layers --screenshot \"" + png("ok") + "\""), 0) << err_;
  EXPECT_NE(read_file(png("ok")), first);
  EXPECT_GT(load_png(png("ok")).w, 0);
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST_F(GuiScreenshot, FileThatIsNotHdf5ExitsTwoWithOneLine) {
  const std::string bad = (dir_ / "not_a_trace.h5").string();
  std::ofstream(bad) << "this is not an HDF5 file\n";
  EXPECT_EQ(gui("\"" + bad + "\" --screenshot \"" + png("bad") + "\""), 2);
  EXPECT_FALSE(fs::exists(png("bad")));
  ASSERT_FALSE(err_.empty());
  EXPECT_EQ(err_.find('\n'), err_.size() - 1) << err_;
  EXPECT_NE(err_.find("not_a_trace.h5"), std::string::npos) << err_;
}

TEST_F(GuiScreenshot, UnknownViewOrScriptCommandExitsTwo) {
  EXPECT_EQ(gui("\"" + trace_ + "\" --screenshot \"" + png("x") + "\" --view nosuchview"), 2);
  EXPECT_NE(err_.find("--view"), std::string::npos) << err_;
  EXPECT_EQ(gui("\"" + trace_ + "\" --screenshot \"" + png("y") + "\" --script \"frobnicate 3\""), 2);
  EXPECT_NE(err_.find("--script"), std::string::npos) << err_;
  EXPECT_EQ(gui("\"" + trace_ + "\" --screenshot \"" + png("z") + "\" --script \"gpu-dtype fp8\""), 2);
  EXPECT_NE(err_.find("'gpu-dtype fp8' expects auto, fp16, bf16 or fp32"), std::string::npos) << err_;
}

// --view chooses what a screenshot renders: without --screenshot it would be ignored, and the
// app would open. --step counts from 0.
TEST_F(GuiScreenshot, ViewWithoutScreenshotAndNegativeStepExitTwo) {
  EXPECT_EQ(gui("\"" + trace_ + "\" --view lanes"), 2);
  EXPECT_NE(err_.find("--view: chooses what --screenshot renders"), std::string::npos) << err_;
  EXPECT_EQ(gui("\"" + trace_ + "\" --screenshot \"" + png("s") + "\" --step -1"), 2);
  EXPECT_NE(err_.find("--step"), std::string::npos) << err_;
  EXPECT_FALSE(fs::exists(png("s")));
}

// Script arguments are checked against the trace: each bad one exits 2 with a line naming the
// command and what it expects (an out-of-range run index crashed the app, non-numbers gave
// "internal error: stoi", others were ignored or clamped without a word).
TEST_F(GuiScreenshot, ScriptArgumentsOutOfRangeOrUnknownExitTwo) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"runs 50 60", "'runs 50 60': 50 is outside 0.."},
      {"budget -3", "'budget -3': -3 is outside 1.."},
      {"budget abc", "'budget abc' expects an integer, not 'abc'"},
      {"tau abc", "'tau abc' expects a number, not 'abc'"},
      {"step 99999", "'step 99999': 99999 is outside 0.."},
      {"select 0 99", "'select 0 99': 99 is outside 0.."},
      {"overlay nosuch", "'overlay nosuch' names no run of the trace"},
      {"stat nosuch", "'stat nosuch' names no statistic of the trace"},
      {"mode foo", "'mode foo' expects one of runs, traces, forced, free"},
      {"log maybe", "'log maybe' expects one of on, off"},
      {"policies nosuch", "'policies nosuch' names an unknown policy 'nosuch'"},
      {"demo nosuch", "'demo nosuch' names no demo prompt"},
      {"given 1,99", "'given 1,99': given: layer 99 outside 0.."}};
  std::vector<std::string> runs;
  for (const auto& [script, message] : cases)
    runs.push_back("\"" + trace_ + "\" --screenshot \"" + png("bad") + "\" --script \"" + script + "\"");
  // Commands that read the trace, with none open (the layer view's crashed reading it).
  const std::vector<std::string> no_trace = {"filters 3", "given 1,2", "stat entropy", "sinkpair", "runs 0 1"};
  for (const std::string& script : no_trace)
    runs.push_back("--screenshot \"" + png("bad") + "\" --script \"" + script + "\"");
  // A job a command starts that fails: its one line, exit 2.
  runs.push_back("\"" + trace_ + "\" --screenshot \"" + png("bad") + "\" --script \"policies h2o:foo=1;simulate\"");
  runs.push_back("\"" + trace_ + "\" --screenshot \"" + png("good") + "\" --view compare --script \"mode traces;mode free\"");
  const std::vector<int> codes = gui_batch(runs);
  ASSERT_EQ(codes.size(), cases.size() + no_trace.size() + 2);
  EXPECT_EQ(codes[codes.size() - 2], 2);
  EXPECT_NE(err_.find("kvscope: --policy h2o: unknown parameter 'foo'"), std::string::npos) << err_;
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(codes[i], 2) << cases[i].first;
    EXPECT_NE(err_.find("kvscope: --script: " + cases[i].second), std::string::npos) << cases[i].first << "\n" << err_;
  }
  for (size_t i = 0; i < no_trace.size(); ++i) {
    EXPECT_EQ(codes[cases.size() + i], 2) << no_trace[i];
    EXPECT_NE(err_.find("kvscope: --script: '" + no_trace[i] + "' needs an open trace"), std::string::npos)
        << no_trace[i] << "\n" << err_;
  }
  EXPECT_EQ(codes.back(), 0) << err_;
  EXPECT_FALSE(fs::exists(png("bad")));
}

}  // namespace
