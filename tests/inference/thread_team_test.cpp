// thread_team: OMP_STACKSIZE read as libgomp reads it, the threads whose stacks fit, and a team
// started under a memory limit or a pids cgroup's with as many threads as fit, where libgomp
// alone ends the process. The limits are set in forked children (RLIMIT_DATA, a cgroup they
// join), so this process runs no parallel region before forking: libgomp's threads do not
// survive a fork.
#include "inference/thread_team.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <functional>

#include "tests/data_room.h"
#include "tests/scratch_cgroup.h"

namespace kvs {
namespace {

using thread_team_detail::parse_stacksize;

// Runs `body` in a child (its stderr to /dev/null) once `confine` has limited it; returns the
// child's exit code (100 where `confine` failed), or 128 + the signal that ended it.
int in_child(const std::function<bool()>& confine, const std::function<int()>& body) {
  std::fflush(nullptr);  // (what stdio holds is not written twice)
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, 2);
    ::_exit(confine() ? body() : 100);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// In a child whose data limit leaves `room` bytes above what it holds now.
int in_child_with_room(uint64_t room, const std::function<int()>& body) {
  return in_child([room] { return test::limit_data_room(room); }, body);
}

// In a child that joins the cgroup at `dir` first.
int in_child_in_cgroup(const std::string& dir, const std::function<int()>& body) {
  return in_child([&dir] { return static_cast<bool>(std::ofstream(dir + "/cgroup.procs") << ::getpid()); }, body);
}

// Eight threads asked of libgomp alone: the team's size, if it does not end the process.
int libgomp_team_of_eight() {
  int started = 0;
  omp_set_num_threads(8);
#pragma omp parallel
  {
#pragma omp single
    started = omp_get_num_threads();
  }
  return started;
}

// Eight threads asked through start_thread_team.
int started_team_of_eight() {
  omp_set_num_threads(8);
  return start_thread_team();
}

TEST(ThreadTeam, ATeamStartsWithTheThreadsWhoseStacksFitWhereLibgompAloneEndsTheProcess) {
  const uint64_t room = thread_stack_bytes() * 5 / 2;  // two stacks and a half
  EXPECT_EQ(in_child_with_room(room, libgomp_team_of_eight), 1) << "the third stack does not fit: exit(1)";
  EXPECT_EQ(in_child_with_room(room, started_team_of_eight), 3) << "the calling thread and two more";
  EXPECT_EQ(in_child_with_room(thread_stack_bytes() * 10, started_team_of_eight), 8) << "room for all";
}

TEST(ThreadTeam, ATeamStartsWithTheThreadsAPidsLimitAllows) {
  // A container's task limit below the machine's cores: the third thread cannot start.
  const test::ScratchCgroup cgroup("pids", "pids.max", "3");
  if (cgroup.path.empty()) GTEST_SKIP() << "no pids cgroup can be made here (cgroup v1, as root)";
  EXPECT_EQ(in_child_in_cgroup(cgroup.path, libgomp_team_of_eight), 1) << "libgomp alone: exit(1)";
  EXPECT_EQ(in_child_in_cgroup(cgroup.path, [] { return static_cast<int>(std::min<uint64_t>(task_room(), 99)); }), 2)
      << "the child is one task of three";
  EXPECT_EQ(in_child_in_cgroup(cgroup.path, started_team_of_eight), 3);
}

TEST(ThreadTeam, AsManyThreadsAsAskedFitWhereMemoryIsPlentiful) {
  EXPECT_EQ(threads_that_fit(4), 4);
  EXPECT_EQ(threads_that_fit(1), 1);
  EXPECT_EQ(threads_that_fit(0), 1) << "the calling thread always runs";
  EXPECT_EQ(in_child_with_room(thread_stack_bytes() / 2, [] { return threads_that_fit(8); }), 1)
      << "no room for another stack";
}

TEST(ThreadTeam, ATeamGrantedWholeIsNotWeighedAgainstMemory) {
  // Exit code: 0 when a team granted whole stays granted with no room left, and a larger one is
  // cut to the calling thread.
  const int code = in_child([] { return true; }, [] {
    const int asked = omp_get_max_threads() + 2;
    if (team_size_for(asked) != asked) return 1;
    if (!test::limit_data_room(thread_stack_bytes() / 2)) return 2;
    if (threads_that_fit(asked) != 1) return 3;
    if (team_size_for(asked) != asked) return 4;  // its stacks are taken already
    if (team_size_for(omp_get_max_threads()) != omp_get_max_threads()) return 5;  // the running team
    return team_size_for(asked + 1) == 1 ? 0 : 6;  // it would grow: weighed
  });
  EXPECT_EQ(code, 0);
}

TEST(ThreadTeam, StackSizeIsReadAsLibgompReadsIt) {
  EXPECT_EQ(parse_stacksize("512"), 512u << 10) << "kilobytes without a unit";
  EXPECT_EQ(parse_stacksize("2M"), 2u << 20);
  EXPECT_EQ(parse_stacksize(" 16 k "), 16u << 10);
  EXPECT_EQ(parse_stacksize("100B"), 100u);
  EXPECT_EQ(parse_stacksize("1g"), 1ull << 30);
  EXPECT_EQ(parse_stacksize(""), std::nullopt);
  EXPECT_EQ(parse_stacksize("M"), std::nullopt);
  EXPECT_EQ(parse_stacksize("2MB"), std::nullopt);
  EXPECT_EQ(parse_stacksize("-1"), std::nullopt);
  EXPECT_EQ(parse_stacksize("99999999999999999999"), std::nullopt);
  EXPECT_EQ(parse_stacksize("17179869184G"), std::nullopt) << "past 64 bits once scaled";
}

TEST(ThreadTeam, OmpStacksizeSetsTheStackCounted) {
  const uint64_t by_default = thread_stack_bytes();
  EXPECT_GE(by_default, 16u << 10);
  ::setenv("OMP_STACKSIZE", "2M", 1);
  const uint64_t set = thread_stack_bytes();
  ::setenv("OMP_STACKSIZE", "two megabytes", 1);
  const uint64_t malformed = thread_stack_bytes();
  ::unsetenv("OMP_STACKSIZE");
  EXPECT_GE(set, 2u << 20);
  EXPECT_LT(set, (2u << 20) + (1u << 20)) << "2 MiB and a guard page";
  EXPECT_EQ(malformed, by_default) << "ignored, as libgomp ignores it";
}

}  // namespace
}  // namespace kvs
