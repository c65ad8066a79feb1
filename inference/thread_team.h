// How many threads the process's memory and task limits leave room for, and a thread's OpenMP team
// started while there is room. libgomp ends the process (`libgomp: Thread creation failed`, exit 1)
// when it cannot start a thread of a parallel region, and it starts a thread's team at that
// thread's first region: after the model's weights and the cache were allocated, where a tight
// memory limit (ulimit -v, RLIMIT_DATA) leaves no room for the threads' stacks. Started first,
// the team takes its stacks before them, and the large allocations' checks
// (inference/host_memory.h) see what is left. A pids cgroup's limit (a container's) fails a
// thread the same way, on a machine with more cores than the limit allows tasks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace kvs {

// Bytes a new thread's stack reserves: OMP_STACKSIZE (or GOMP_STACKSIZE) where set, as libgomp
// reads it, else the default thread stack (RLIMIT_STACK's soft limit, or glibc's default where it
// is unlimited), plus its guard page.
uint64_t thread_stack_bytes();

// Tasks (threads) the process's pids cgroups leave room for: the least, over its cgroup and each
// one above it, of pids.max less pids.current (cgroup v2, or v1's pids hierarchy; a container's
// --pids-limit); UINT64_MAX where none is set.
uint64_t task_room();

// How many of `wanted` threads can run: the calling thread, and as many others as there is room
// for a stack each in the host memory the process may still take (inference/host_memory.h) and
// for a task each in its pids cgroups. Those already running count as new (they took their
// stacks already: a count on the safe side).
int threads_that_fit(int wanted);

// The threads a parallel region of the calling thread may take of `wanted`: all of them where the
// thread's team already has that many (the running team, or one granted whole before: their
// stacks are taken), else threads_that_fit(wanted). Asked before every region that sets its own
// count (a decode step's), it reads the memory left only where the team would grow.
int team_size_for(int wanted);

// Limits the calling thread's OpenMP team to threads_that_fit(its size) and starts it now (a
// parallel region); returns how many threads it has. Each of KVScope's threads that runs parallel
// regions calls it first.
int start_thread_team();

namespace thread_team_detail {
// OMP_STACKSIZE's value in bytes: a number with an optional B, K, M or G (kilobytes without one),
// spaces around; nullopt when malformed (libgomp then ignores it too).
std::optional<uint64_t> parse_stacksize(const std::string& text);
}  // namespace thread_team_detail

}  // namespace kvs
