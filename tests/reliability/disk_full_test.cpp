// Exhausted disks (a file-size limit on the child, 20 limits each) and unwritable targets: exit
// code 2, one line on stderr naming the file, no partial or temporary file, the old trace intact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "analysis/trace.h"
#include "tests/reliability/process_util.h"

namespace kvs {
namespace {

using namespace kvs::rel;

constexpr int kIterations = 20;

std::vector<std::string> record_args(const std::string& out, int steps) {
  return {"record", "--model", kModel, "--tokenizer", kTokenizer, "--prompt", "Once upon a time",
          "--steps", std::to_string(steps), "--out", out, "--quiet", "--threads", "1"};
}

// Expects exactly one line on stderr, starting "kvscope: " and naming `path`.
void expect_one_line_naming(const std::string& err, const std::string& path) {
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(err.rfind("kvscope: ", 0), 0u) << err;
  EXPECT_NE(err.find(path), std::string::npos) << err;
}

class DiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::printf("[ seed     ] %u (kill/limit schedule)\n", seed_);
    if (!have_model()) GTEST_SKIP() << "stories260K not found: " << kModel;
  }
  ScratchDir dir_{"diskfull"};
  std::string err_;  // the child's stderr
  const unsigned seed_ = std::random_device{}();  // printed by SetUp, to replay a schedule
  std::mt19937 rng_{seed_};
};

TEST_F(DiskFullTest, RecordOnAFullDiskLeavesNoFile) {
  const std::string out = dir_.path + "/rec.h5";
  ASSERT_EQ(run_kvscope(record_args(out, 40)), 0);
  const long full_size = (long)fs::file_size(out);
  fs::remove(out);
  std::uniform_int_distribution<long> limit(1, full_size - 1);
  for (int i = 0; i < kIterations; ++i) {
    const long cap = i == 0 ? 1 : limit(rng_);
    EXPECT_EQ(run_kvscope(record_args(out, 40), &err_, cap), 2) << "file-size limit " << cap;
    expect_one_line_naming(err_, out);
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(temp_files(dir_.path), std::vector<std::string>{});
  }
}

TEST_F(DiskFullTest, SimulateOnAFullDiskKeepsTheOldTrace) {
  const std::string path = dir_.path + "/sim.h5";
  ASSERT_EQ(run_kvscope(record_args(path, 40)), 0);
  const std::string old_bytes = read_bytes(path);
  const std::vector<std::string> args = {"simulate", path, "--policy", "h2o", "--policy", "window", "--budget", "16"};
  // The updated trace is written as a copy: any limit below the old size + the runs fails.
  std::uniform_int_distribution<long> limit(1, (long)old_bytes.size() + 4096);
  for (int i = 0; i < kIterations; ++i) {
    const long cap = limit(rng_);
    EXPECT_EQ(run_kvscope(args, &err_, cap), 2) << "file-size limit " << cap;
    expect_one_line_naming(err_, path);
    EXPECT_EQ(read_bytes(path), old_bytes) << "file-size limit " << cap;
    EXPECT_EQ(temp_files(dir_.path), std::vector<std::string>{});
  }
}

TEST_F(DiskFullTest, UnwritableTargetsFailWithOneLine) {
  // Tests may run as root, where permissions do not stop writes: use paths no one can create.
  const std::string not_a_folder = dir_.path + "/plain-file";
  { std::ofstream(not_a_folder) << "x"; }
  const std::vector<std::string> targets = {not_a_folder + "/trace.h5", "/proc/kvscope-no-such/trace.h5",
                                            dir_.path + "/missing-folder/trace.h5", dir_.path};
  for (int i = 0; i < kIterations; ++i) {
    const std::string& out = targets[i % targets.size()];
    EXPECT_EQ(run_kvscope(record_args(out, 2), &err_), 2) << out;
    expect_one_line_naming(err_, out);
    EXPECT_FALSE(fs::exists(out) && !fs::is_directory(out)) << out;
  }
  EXPECT_EQ(temp_files(dir_.path), std::vector<std::string>{});
}

}  // namespace
}  // namespace kvs
