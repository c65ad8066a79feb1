// The forked-child parse of untrusted HDF5 files: crashes, hangs and failures of the child become
// reasons; clean exceptions and success do not; a child that calls exit() runs none of the
// parent's exit handlers; the host's memory running out is told apart from the file's fault; a
// sound trace's metadata walk passes.
#include "analysis/h5_isolation.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "analysis/h5_util.h"
#include "tests/data_room.h"
#include "tests/test_paths.h"

namespace kvs::h5 {
namespace {

constexpr uint64_t kBound = uint64_t{256} << 20;  // the probe child's memory bound here

TEST(H5Isolation, FinishedChildGivesNoReason) {
  EXPECT_EQ(run_isolated([] {}, 10, kBound).why, "");
  EXPECT_EQ(run_isolated([] { throw std::runtime_error("clean error"); }, 10, kBound).why, "");
}

TEST(H5Isolation, CrashingChildIsNamed) {
  const std::string why = run_isolated([] { std::raise(SIGSEGV); }, 10, kBound).why;
  EXPECT_EQ(why, "the HDF5 library crashed reading it (SIGSEGV)");
  EXPECT_EQ(run_isolated([] { std::abort(); }, 10, kBound).why, "the HDF5 library crashed reading it (SIGABRT)");
}

TEST(H5Isolation, ACrashRightAfterAFailedAllocationIsTheMemorysFault) {
  // libhdf5 does not check every allocation: a null pointer met after one failed.
  const ProbeFailure failed = run_isolated([] {
    errno = ENOMEM;
    std::raise(SIGSEGV);
  }, 10, kBound);
  EXPECT_EQ(failed.why, "reading its HDF5 metadata needed more than 256 MB of memory");
}

TEST(H5Isolation, ChildFailingWithAnExitCodeIsNamed) {
  EXPECT_EQ(run_isolated([] { ::_exit(1); }, 10, kBound).why,
            "the HDF5 library failed reading it (memory error, exit code 1)");
}

TEST(H5Isolation, ChildPastItsMemoryBoundIsNamed) {
  const ProbeFailure failed = run_isolated([] {
    std::vector<char> big(std::size_t{2} << 30);  // 2 GiB against a 256 MiB bound
    big[0] = 1;
  }, 10, kBound);
  const std::string& why = failed.why;
  EXPECT_FALSE(failed.host_out_of_memory) << "the host has more than the bound";
  // std::bad_alloc -> the bound's own message; under a sanitizer its allocator reports the
  // failure and exits with its code ("memory error, exit code N").
  EXPECT_NE(why.find("memory"), std::string::npos) << why;
  EXPECT_NE(why, "");
}

std::string exit_marker;  // a file mark_if_in_probe creates when it runs in the probe's child
pid_t probe_pid = 0;

void mark_if_in_probe() {
  if (::getpid() != probe_pid) return;
  if (FILE* f = std::fopen(exit_marker.c_str(), "w")) std::fclose(f);
}

TEST(H5Isolation, ChildCallingExitEndsWithoutTheParentsExitHandlers) {
  // libhdf5 calls exit() on some failures; its own exit handler, registered in the parent, would
  // then close and flush the parent's open files from the child.
  exit_marker = ::testing::TempDir() + "h5_isolation_exit_marker";
  std::remove(exit_marker.c_str());
  std::atexit(mark_if_in_probe);  // as libhdf5's, registered before the fork
  const ProbeFailure failed = run_isolated([] {
    probe_pid = ::getpid();
    std::exit(7);
  }, 10, kBound);
  EXPECT_EQ(failed.why, "the HDF5 library gave up reading it (it called exit)");
  EXPECT_FALSE(failed.host_out_of_memory);
  EXPECT_FALSE(std::filesystem::exists(exit_marker)) << "the parent's exit handlers ran in the child";
}

// In a forked process whose data limit leaves 32 MiB: run_isolated's reason for a probe that
// asks for 64 MiB (its bound is 256 MiB, so the host runs out first). Exit code 0 when the reason
// says so and blames the host's memory, not the file.
int probe_beyond_the_hosts_memory() {
  if (!test::limit_data_room(32u << 20)) return 2;
  const ProbeFailure failed = run_isolated([] {
    std::vector<char> big(std::size_t{64} << 20);
    big[0] = 1;
  }, 10, kBound);
  const bool said = failed.why.rfind("reading its HDF5 metadata ran out of host memory (", 0) == 0 &&
                    failed.why.find(" available)") != std::string::npos;
  return failed.host_out_of_memory && said ? 0 : 1;
}

TEST(H5Isolation, AChildOutOfTheHostsMemoryBlamesTheHostNotTheFile) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(probe_beyond_the_hosts_memory());
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(H5Isolation, HangingChildIsStoppedByItsAlarm) {
  EXPECT_EQ(run_isolated([] { for (;;) ::pause(); }, 1, kBound).why,
            "reading its HDF5 metadata did not finish within 1 s");
}

// A libhdf5 allocation that fails under the child's bound and comes out as a clean error, the
// failed allocation's errno overwritten on the way (as a fuzzed trace's 2.2 GB global-heap string
// did): the file asked for more memory than it may have. The child used to finish "cleanly", and
// the parent, unbounded, then made the allocation.
TEST(H5Isolation, AFailedLibhdf5AllocationEndedAsACleanErrorIsTheBound) {
  const std::string path = ::testing::TempDir() + "h5_isolation_big_string.h5";
  {
    const std::lock_guard<std::recursive_mutex> lock(mutex());
    init();
    Handle file = file_handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create");
    write_attr(file, "big", std::string(std::size_t{64} << 20, 'x'));  // a 64 MiB string
  }
  constexpr uint64_t kSmallBound = uint64_t{16} << 20;
  const ProbeFailure failed = run_isolated([&] {
    Handle file = file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), "open");
    try {
      (void)read_attr_string(file, "big");
    } catch (const Error&) {
      errno = 0;  // what later calls leave of the failed allocation's ENOMEM
    }
  }, 10, kSmallBound);
  std::filesystem::remove(path);
  // The bound's own message; under a sanitizer its allocator may report the failure itself and
  // exit with its code ("memory error, exit code N").
  EXPECT_NE(failed.why.find("memory"), std::string::npos) << failed.why;
  EXPECT_FALSE(failed.host_out_of_memory);
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
