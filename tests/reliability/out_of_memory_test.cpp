// A machine with too little memory for the model, the recording, its threads or reading a trace:
// kvscope says so in one line (what, how much it needs, how much is left), exits with code 2 and
// writes nothing, instead of "internal error: std::bad_alloc", libgomp's exit, the out-of-memory
// killer or blaming the trace file. The child's memory is capped with
// RLIMIT_DATA, which host_memory_available() counts in.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "inference/loader.h"
#include "inference/thread_team.h"
#include "tests/scratch_cgroup.h"
#include "tests/reliability/process_util.h"

namespace kvs {
namespace {

using namespace kvs::rel;

void expect_one_line(const std::string& err, const std::string& starts) {
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(err.rfind(starts, 0), 0u) << err;
  EXPECT_NE(err.find(" of host memory for "), std::string::npos) << err;
  EXPECT_NE(err.find(" available"), std::string::npos) << err;
}

// `record` of SmolLM2 (214 MiB of weights: its Q4_1 matrices kept as 4-bit panels, the embedding
// as fp32) under a data limit or in a cgroup: its weights refused in one line naming the model, nothing written.
void expect_weights_refused(const std::string& model, const std::vector<std::string>& extra, long data_limit,
                            const std::string& cgroup) {
  ScratchDir dir("oom");
  std::vector<std::string> args = {"record", "--model", model, "--prompt", "Hello", "--steps", "2",
                                   "--out", dir.path + "/t.h5", "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::string err;
  const int code = run_kvscope(args, &err, 0, data_limit, cgroup);
  EXPECT_EQ(code, 2) << err;
  expect_one_line(err, "kvscope: " + model + ": needs ");
  EXPECT_NE(err.find("of host memory for its weights ("), std::string::npos) << err;
  EXPECT_TRUE(fs::is_empty(dir.path)) << "nothing written";
}

TEST(OutOfMemory, AModelWhoseWeightsDoNotFitIsRefusedInOneLine) {
  const std::string model = default_model_path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  expect_weights_refused(model, {"--threads", "1"}, 150L << 20, "");
}

TEST(OutOfMemory, AMemoryCgroupsLimitIsSeen) {
  // A limit on the process's own cgroup (a systemd scope, a Slurm job), not the mount's root: the
  // checks read only the root's, and the weights of SmolLM2 met the out-of-memory killer (exit 137).
  const std::string model = default_model_path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  const test::ScratchCgroup cgroup("memory", "memory.limit_in_bytes", std::to_string(160ull << 20));
  if (cgroup.path.empty()) GTEST_SKIP() << "no memory cgroup can be made here (cgroup v1, as root)";
  expect_weights_refused(model, {}, 0, cgroup.path);
}

TEST(OutOfMemory, EveryLimitEndsInATraceOrOneLine) {
  // Whatever runs out first (at 200 MiB the weights, at 400 the cache's address space), the
  // answer is one line and code 2, or a trace where it fits; never a crash or a partial file.
  const std::string model = default_model_path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  ScratchDir dir("oom-sweep");
  const std::string out = dir.path + "/t.h5";
  int refused = 0;
  for (long mb : {200L, 400L, 700L, 2000L}) {
    std::string err;
    const int code = run_kvscope({"record", "--model", model, "--prompt", "Hello there", "--steps", "2", "--out", out,
                                  "--quiet", "--threads", "1"},
                                 &err, 0, mb << 20);
    SCOPED_TRACE(std::to_string(mb) + " MiB: " + err);
    if (code == 0) {
      EXPECT_TRUE(fs::exists(out));
      fs::remove(out);
    } else {
      ++refused;
      EXPECT_EQ(code, 2);
      EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
      EXPECT_EQ(err.rfind("kvscope: ", 0), 0u);
      EXPECT_EQ(err.find("internal error"), std::string::npos);
      EXPECT_TRUE(fs::is_empty(dir.path)) << "nothing written";
    }
  }
  EXPECT_GE(refused, 2) << "200 MiB holds neither the weights nor the cache, 400 not the cache";
}

TEST(OutOfMemory, LimitsAroundTheThreadsStacksEndInATraceOrOneLine) {
  // Each thread takes a stack (8 MiB by default) of the memory the model and the cache take:
  // where a limit left room for them but not for a team's stacks, libgomp ended the process
  // (`libgomp: Thread creation failed`, exit 1). The teams now start first, with the threads that
  // fit (inference/thread_team.h). Swept from the least limit a one-thread run records under to
  // where every thread of the run's teams has its stack.
  const std::string model = default_model_path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  ScratchDir dir("oom-threads");
  const std::string out = dir.path + "/t.h5";
  const auto record = [&](long limit, bool one_thread, std::string* err) {
    std::vector<std::string> args = {"record", "--model", model, "--prompt", "Hello there", "--steps", "2",
                                     "--out", out, "--quiet"};
    if (one_thread) args.insert(args.end(), {"--threads", "1"});
    const int code = run_kvscope(args, err, 0, limit);
    if (code == 0) fs::remove(out);
    return code;
  };
  std::string err;
  long lo = 200L << 20, hi = 2000L << 20;  // refused, recorded (EveryLimitEndsInATraceOrOneLine)
  ASSERT_EQ(record(hi, true, &err), 0) << err;
  while (hi - lo > (8L << 20)) {
    const long mid = (lo + hi) / 2;
    (record(mid, true, &err) == 0 ? hi : lo) = mid;
  }
  const long threads = std::max(2u, std::thread::hardware_concurrency());
  // Four teams: the main thread's, the trace writer's and the analyses' (OpenMP), the decode's.
  const long span = 4 * threads * static_cast<long>(thread_stack_bytes()) + (32L << 20);
  const long step = std::max(2L << 20, span / 24);
  for (long limit = hi - (16L << 20); limit <= hi + span; limit += step) {
    const int code = record(limit, false, &err);
    SCOPED_TRACE(std::to_string(limit >> 20) + " MiB: " + err);
    EXPECT_EQ(err.find("libgomp"), std::string::npos);
    if (code != 0) {
      EXPECT_EQ(code, 2);
      EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
      EXPECT_EQ(err.rfind("kvscope: ", 0), 0u);
      EXPECT_TRUE(fs::is_empty(dir.path)) << "nothing written";
    }
  }
  EXPECT_EQ(record(hi + span, false, &err), 0) << "room for every stack: " << err;
}

TEST(OutOfMemory, ATraceReadUnderTooLittleMemoryIsNeverCalledCorrupt) {
  // Reading a trace with almost no memory left used to read "corrupt HDF5 file: the HDF5 library
  // failed reading it (memory error, exit code 255)" or "unreadable trace (read: memory allocation
  // failed for raw data chunk)": the file was blamed for the host. Swept up from the least limit
  // kvscope starts under, past where simulate succeeds; the trace stays as it was when refused.
  if (!have_model()) GTEST_SKIP() << "stories260K not found: " << kModel;
  ScratchDir dir("oom-read");
  const std::string pristine = dir.path + "/recorded.h5", path = dir.path + "/t.h5";
  ASSERT_EQ(run_kvscope({"record", "--model", kModel, "--tokenizer", kTokenizer, "--prompt", "Once upon a time",
                         "--steps", "12", "--out", pristine, "--quiet"}),
            0);
  const std::string old_bytes = read_bytes(pristine);
  long least = 1L << 20;  // the least limit (to 1 MiB) kvscope starts under
  while (least < (64L << 20) && run_kvscope({"--version"}, nullptr, 0, least) != 0) least += 1L << 20;
  int read = 0;
  for (long limit = least; limit <= least + (24L << 20); limit += 1L << 20) {
    fs::copy_file(pristine, path, fs::copy_options::overwrite_existing);
    std::string err;
    const int code = run_kvscope({"simulate", path, "--budget", "8", "--policy", "h2o", "--policy", "streamingllm"},
                                 &err, 0, limit);
    SCOPED_TRACE(std::to_string(limit >> 20) + " MiB: " + err);
    if (code == 0) {
      ++read;
      continue;
    }
    EXPECT_EQ(code, 2);
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
    // The trace named, or an allocation of the simulation's own (no file to name).
    EXPECT_TRUE(err.rfind("kvscope: " + path + ": ", 0) == 0 || err.rfind("kvscope: out of host memory (", 0) == 0);
    EXPECT_EQ(err.find("corrupt"), std::string::npos);
    EXPECT_EQ(err.find("unreadable"), std::string::npos);
    EXPECT_TRUE(read_bytes(path) == old_bytes) << "the trace changed";
  }
  EXPECT_GE(read, 1) << "no limit in the sweep read the trace";
}

}  // namespace
}  // namespace kvs
