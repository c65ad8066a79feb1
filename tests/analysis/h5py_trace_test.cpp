// A trace written by the recorder opens in Python with h5py alone, by the documented names
// (tests/python/read_trace.py also runs the example of docs/trace-format.md on it).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "analysis/recorder.h"
#include "synthetic_engine.h"
#include "tests/test_paths.h"
#include "trace_test_util.h"
#include "tests/run_command.h"

namespace kvs {
namespace {

using namespace kvs::testing;

bool have_h5py() { return std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") == 0; }

// Runs read_trace.py on `path`; returns its output.
std::string read_with_h5py(const std::string& path) {
  std::string command = "/usr/bin/python3 " + test::source_path("tests/python/read_trace.py");
  command += " '" + path + "' " + test::source_path("docs/trace-format.md");
  return test::run_command(command);
}

void record(const std::string& path, bool float16, std::size_t budget) {
  std::mt19937 rng(9);
  const Prompt p = make_prompt(rng);
  TraceRecorder rec(path, tiny_meta(float16), 5, budget, 4);
  record_synthetic(rec, rng, p, 5);
  rec.finish(text_of);
}

TEST(H5pyReadsTrace, Float32WithPrefillMap) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 lacks h5py";
  TempDir dir;
  const std::string path = dir.file("f32.h5");
  record(path, false, kDefaultCaptureBudget);
  const std::string out = read_with_h5py(path);
  EXPECT_NE(out.find("OK"), std::string::npos) << out;
  EXPECT_NE(out.find("attends most to"), std::string::npos) << out;
}

TEST(H5pyReadsTrace, Float16ReductionsOnly) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 lacks h5py";
  TempDir dir;
  const std::string path = dir.file("f16.h5");
  record(path, true, 100);
  const std::string out = read_with_h5py(path);
  EXPECT_NE(out.find("OK"), std::string::npos) << out;
}

}  // namespace
}  // namespace kvs
