// Host memory a large allocation may still take, and the one-line error when it cannot: a model
// whose fp32 weights, or a recording whose prefill evidence, would not fit is refused before the
// allocation, which would otherwise end in std::bad_alloc ("internal error") or, with the
// kernel's overcommit, in the out-of-memory killer's SIGKILL partway through. The GPU's own
// counterpart is cuda::OutOfMemory.
#pragma once
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "inference/errors.h"

namespace kvs {

// Bytes this process may still allocate: the least of the machine's available memory
// (/proc/meminfo MemAvailable + SwapFree), the room of its memory cgroup and of each cgroup above
// it (v2 memory.max, v1 memory.limit_in_bytes, less the usage: a systemd scope's, a Slurm job's,
// a container's) and its address-space and data limits (RLIMIT_AS less VmSize, RLIMIT_DATA less
// VmData). UINT64_MAX when none of them can be read.
uint64_t host_memory_available();

// "1.5 GiB", "538.0 MiB", "12.0 KiB".
std::string memory_size_text(uint64_t bytes);

// "<what>: needs 8.6 GiB of host memory for <purpose>; 5.2 GiB available"
InputError host_memory_error(const std::string& what, uint64_t bytes, const std::string& purpose,
                             uint64_t available);

// Throws host_memory_error when `bytes` is more than host_memory_available().
void require_host_memory(const std::string& what, uint64_t bytes, const std::string& purpose);

// Whether `e` says the host had no memory for what was asked: an allocation that failed
// (std::bad_alloc) or a thread that could not start (std::system_error, EAGAIN).
bool out_of_host_memory(const std::exception& e);

// "1.2 GiB available", or "the memory left is unknown" where host_memory_available() cannot say.
std::string memory_left_text();

// The one line to show for an error caught at the top of a command or a UI job: e.what(), or,
// where out_of_host_memory(e) (whose what() says little), "out of host memory (an allocation
// failed; 1.2 GiB available)" or "(a thread could not start; …)".
std::string error_text(const std::exception& e);

// The parts of host_memory_available(), from the files' text (tests feed their own).
namespace host_memory_detail {
std::string read_text(const char* path);  // a file's whole text ("" where unreadable)
uint64_t meminfo_room(const std::string& meminfo);                         // MemAvailable + SwapFree, bytes
uint64_t cgroup_room(const std::string& limit, const std::string& usage);  // limit - usage; "max": UINT64_MAX
uint64_t status_kib(const std::string& status, const std::string& field);  // "VmSize:  1234 kB" -> 1234 * 1024
// The folders under `mount` of the cgroup that /proc/self/cgroup's text puts this process in for
// `controller` ("" for cgroup v2's single hierarchy, "memory" for v1's), then of each one above
// it, `mount` itself last (where that path is not mounted, as in a container that sees only its
// own cgroup, the folders that do not exist read as no limit, and `mount` is the container's).
std::vector<std::string> cgroup_dirs(const std::string& proc_cgroup, const std::string& controller,
                                     const std::string& mount);
// The least room (limit file less usage file, cgroup_room) over this process's cgroup and each
// one above it (each limits all below it; cgroup_dirs), in cgroup v2 (the v2 files under
// /sys/fs/cgroup) and in v1's `controller` hierarchy (the v1 files under /sys/fs/cgroup/<controller>):
// memory here, the number of tasks in thread_team.h.
uint64_t cgroup_tree_room(const std::string& controller, const char* v2_limit, const char* v2_usage,
                          const char* v1_limit, const char* v1_usage);
}  // namespace host_memory_detail

}  // namespace kvs
