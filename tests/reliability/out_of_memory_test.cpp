// A machine with too little memory for the model or the recording: kvscope says so in one line
// (what, how much it needs, how much is left), exits with code 2 and writes nothing, instead of
// "internal error: std::bad_alloc" or the out-of-memory killer. The child's memory is capped with
// RLIMIT_DATA, which host_memory_available() counts in.
#include <gtest/gtest.h>

#include <algorithm>

#include "inference/loader.h"
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

TEST(OutOfMemory, AModelWhoseWeightsDoNotFitIsRefusedInOneLine) {
  const std::string model = default_model_path();  // SmolLM2: 538 MB of fp32 weights
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  ScratchDir dir("oom");
  const std::string out = dir.path + "/t.h5";
  std::string err;
  const int code = run_kvscope({"record", "--model", model, "--prompt", "Hello", "--steps", "2", "--out", out,
                                "--quiet", "--threads", "1"},
                               &err, 0, 300L << 20);
  EXPECT_EQ(code, 2) << err;
  expect_one_line(err, "kvscope: " + model + ": needs ");
  EXPECT_NE(err.find("of host memory for its weights as fp32"), std::string::npos) << err;
  EXPECT_TRUE(fs::is_empty(dir.path)) << "nothing written";
}

TEST(OutOfMemory, EveryLimitEndsInATraceOrOneLine) {
  // Whatever runs out first (at 400 MiB the weights, at 700 the cache's address space), the
  // answer is one line and code 2, or a trace where it fits; never a crash or a partial file.
  const std::string model = default_model_path();
  if (model.empty()) GTEST_SKIP() << "SmolLM2-135M-Instruct is not in the model cache";
  ScratchDir dir("oom-sweep");
  const std::string out = dir.path + "/t.h5";
  int refused = 0;
  for (long mb : {400L, 700L, 1100L, 2000L}) {
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
  EXPECT_GE(refused, 1) << "400 MiB holds neither the weights nor the cache";
}

}  // namespace
}  // namespace kvs
