// The forked-child parse of untrusted HDF5 files: crashes, hangs and failures of the child become
// reasons; clean exceptions and success do not; a sound trace's metadata walk passes.
#include "analysis/h5_isolation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <stdexcept>
#include <vector>

#include "analysis/h5_util.h"
#include "tests/test_paths.h"

namespace kvs::h5 {
namespace {

constexpr uint64_t kBound = uint64_t{256} << 20;  // the probe child's memory bound here

TEST(H5Isolation, FinishedChildGivesNoReason) {
  EXPECT_EQ(run_isolated([] {}, 10, kBound), "");
  EXPECT_EQ(run_isolated([] { throw std::runtime_error("clean error"); }, 10, kBound), "");
}

TEST(H5Isolation, CrashingChildIsNamed) {
  const std::string why = run_isolated([] { std::raise(SIGSEGV); }, 10, kBound);
  EXPECT_EQ(why, "the HDF5 library crashed reading it (SIGSEGV)");
  EXPECT_EQ(run_isolated([] { std::abort(); }, 10, kBound), "the HDF5 library crashed reading it (SIGABRT)");
}

TEST(H5Isolation, ChildFailingWithAnExitCodeIsNamed) {
  EXPECT_EQ(run_isolated([] { ::_exit(1); }, 10, kBound), "the HDF5 library failed reading it (memory error, exit code 1)");
}

TEST(H5Isolation, ChildPastItsMemoryBoundIsNamed) {
  const std::string why = run_isolated([] {
    std::vector<char> big(std::size_t{2} << 30);  // 2 GiB against a 256 MiB bound
    big[0] = 1;
  }, 10, kBound);
  // std::bad_alloc -> the bound's own message; under a sanitizer its allocator reports the
  // failure and exits with its code ("memory error, exit code N").
  EXPECT_NE(why.find("memory"), std::string::npos) << why;
  EXPECT_NE(why, "");
}

TEST(H5Isolation, HangingChildIsStoppedByItsAlarm) {
  EXPECT_EQ(run_isolated([] { for (;;) ::pause(); }, 1, kBound), "reading its HDF5 metadata did not finish within 1 s");
}

TEST(H5Isolation, SoundTraceMetadataParses) {
  const std::lock_guard<std::recursive_mutex> lock(mutex());
  init();
  Handle fapl = file_access();
  const std::string path = test::source_path("tests/fuzz/corpus/trace_bytes/with_runs.h5");
  Handle file = file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "open");
  EXPECT_NO_THROW(parse_all_metadata(file, 1u << 20));
}

}  // namespace
}  // namespace kvs::h5
