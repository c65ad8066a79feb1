// --device on the commands that run the model: a bad value is one line and exit 2; cuda on a
// machine or build that cannot run it falls back to the CPU with a one-line notice and records
// the same trace; cpu never mentions CUDA. --gpu-dtype: a bad value likewise; the trace names the
// storage type that ran.
#include <gtest/gtest.h>

#include "analysis/trace.h"
#include "cli_util.h"
#include "inference/cuda_backend.h"

namespace kvs::cli_test {
namespace {

TEST(CliDevice, UnknownDeviceIsOneLineAndExitTwo) {
  TempDir out;
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   "4", "--device", "gpu", "--out", out.file("t.h5")});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kvscope: --device: expected cpu, cuda or auto, got 'gpu'\n");
  EXPECT_FALSE(std::filesystem::exists(out.file("t.h5")));
}

TEST(CliDevice, UnknownGpuDtypeIsOneLineAndExitTwo) {
  TempDir out;
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   "4", "--gpu-dtype", "fp8", "--out", out.file("t.h5")});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "kvscope: --gpu-dtype: expected auto, fp16 or bf16, got 'fp8'\n");
  EXPECT_FALSE(std::filesystem::exists(out.file("t.h5")));
}

TEST(CliDevice, CudaWithoutAGpuFallsBackToTheCpuWithANotice) {
  std::string why;
  if (cuda_usable(&why)) GTEST_SKIP() << "a GPU is present";
  TempDir out;
  const CliResult cuda = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time",
                                      "--steps", "8", "--device", "cuda", "--out", out.file("cuda.h5")});
  const CliResult cpu = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time",
                                     "--steps", "8", "--device", "cpu", "--out", out.file("cpu.h5")});
  ASSERT_EQ(cuda.code, 0) << cuda.err;
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  EXPECT_EQ(cuda.out, cpu.out);
  const std::string notice = "kvscope: --device cuda: " + why + "; running on the CPU\n";
  EXPECT_EQ(cuda.err.substr(0, notice.size()), notice);
  EXPECT_EQ(cpu.err.find("CUDA"), std::string::npos) << cpu.err;
  EXPECT_EQ(count_lines(cuda.err), count_lines(cpu.err) + 1);
  EXPECT_EQ(TraceReader(out.file("cuda.h5")).meta().device, "cpu");  // where it really ran
  // --quiet prints nothing but errors, and the notice is not one.
  const CliResult quiet = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                       "8", "--device", "cuda", "--quiet", "--out", out.file("quiet.h5")});
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
}

TEST(CliDevice, TheTraceSaysWhichDeviceRanIt) {
  TempDir out;
  for (const char* device : {"cpu", "auto"}) {
    const std::string path = out.file(std::string(device) + ".h5");
    const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                     "2", "--device", device, "--out", path});
    ASSERT_EQ(r.code, 0) << r.err;
    const bool gpu = std::string(device) == "auto" && cuda_usable();
    EXPECT_EQ(TraceReader(path).meta().device, gpu ? "cuda" : "cpu");
    EXPECT_EQ(TraceReader(path).meta().device_dtype, gpu ? "fp16" : "fp32");  // stories260K is F32
  }
  const std::string bf16 = out.file("bf16.h5");
  const CliResult r = run_kvscope({"record", "--model", stories_bin(), "--prompt", "Once upon a time", "--steps",
                                   "2", "--gpu-dtype", "bf16", "--out", bf16});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(TraceReader(bf16).meta().device_dtype, cuda_usable() ? "bf16" : "fp32");
}

}  // namespace
}  // namespace kvs::cli_test
