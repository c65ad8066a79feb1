// Thread stacks against the host memory left, and a thread's OpenMP team started early.
#include "inference/thread_team.h"

#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <mutex>

#include "inference/host_memory.h"

namespace kvs {

namespace thread_team_detail {

std::optional<uint64_t> parse_stacksize(const std::string& text) {
  std::size_t i = 0;
  const auto skip_spaces = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  skip_spaces();
  if (i == text.size() || !std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
  uint64_t value = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    if (value > (std::numeric_limits<uint64_t>::max() - 9) / 10) return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  skip_spaces();
  int shift = 10;  // kilobytes without a unit
  if (i < text.size()) {
    switch (std::tolower(static_cast<unsigned char>(text[i]))) {
      case 'b': shift = 0; break;
      case 'k': shift = 10; break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      default: return std::nullopt;
    }
    ++i;
    skip_spaces();
    if (i != text.size()) return std::nullopt;
  }
  if (value > (std::numeric_limits<uint64_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

}  // namespace thread_team_detail

uint64_t thread_stack_bytes() {
  pthread_attr_t attr;
  std::size_t stack = 8u << 20, guard = 4096;
  if (pthread_getattr_default_np(&attr) == 0) {
    pthread_attr_getstacksize(&attr, &stack);
    pthread_attr_getguardsize(&attr, &guard);
    pthread_attr_destroy(&attr);
  }
  for (const char* name : {"OMP_STACKSIZE", "GOMP_STACKSIZE"}) {
    if (const char* v = std::getenv(name)) {
      if (const std::optional<uint64_t> bytes = thread_team_detail::parse_stacksize(v)) return *bytes + guard;
    }
  }
  return static_cast<uint64_t>(stack) + guard;
}

uint64_t task_room() {
  return host_memory_detail::cgroup_tree_room("pids", "pids.max", "pids.current", "pids.max", "pids.current");
}

int threads_that_fit(int wanted) {
  wanted = std::max(wanted, 1);
  if (wanted == 1) return 1;
  const uint64_t stacks = host_memory_available() / std::max<uint64_t>(thread_stack_bytes(), 1);  // with room
  const uint64_t others = std::min({stacks, task_room(), static_cast<uint64_t>(wanted) - 1});
  return static_cast<int>(others + 1);
}

int team_size_for(int wanted) {
  thread_local int granted = 0;  // the largest team granted whole on this thread
  if (wanted <= std::max(granted, omp_get_max_threads())) return wanted;
  const int fit = threads_that_fit(wanted);
  if (fit == wanted) granted = wanted;
  return fit;
}

int start_thread_team() {
  // One thread at a time: two workers starting together (a recording's writer and analyses) each
  // read the same room and each took it; the second team's thread then failed in libgomp (once,
  // near a memory limit, OutOfMemory.LimitsAroundTheThreadsStacksEndInATraceOrOneLine).
  static std::mutex starting;
  const std::lock_guard<std::mutex> lock(starting);
  omp_set_num_threads(threads_that_fit(omp_get_max_threads()));
  int started = 1;
#pragma omp parallel
  {
#pragma omp single
    started = omp_get_num_threads();  // (a region doing nothing would be compiled away)
  }
  return started;
}

}  // namespace kvs
