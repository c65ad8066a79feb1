// A data limit (RLIMIT_DATA) that leaves a process a given room above what it holds now: tests
// that run something short of memory set it in a forked child.
#pragma once
#include <sys/resource.h>

#include <cstdint>

#include "inference/host_memory.h"

namespace kvs::test {

// Limits the calling process's data segment to its VmData plus `room` bytes; false where the
// limit could not be set.
inline bool limit_data_room(uint64_t room) {
  const uint64_t used = host_memory_detail::status_kib(host_memory_detail::read_text("/proc/self/status"), "VmData");
  const rlimit limit = {static_cast<rlim_t>(used + room), static_cast<rlim_t>(used + room)};
  return ::setrlimit(RLIMIT_DATA, &limit) == 0;
}

}  // namespace kvs::test
