// Forked-child parsing of untrusted HDF5 metadata (see h5_isolation.h).
#include "analysis/h5_isolation.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <vector>

#include "analysis/h5_util.h"
#include "inference/host_memory.h"

// Present when built with a sanitizer: lets the child drop libFuzzer's crash reporting.
extern "C" void __sanitizer_set_death_callback(void (*)(void)) __attribute__((weak));

namespace kvs::h5 {
namespace {

constexpr int kOutOfMemoryExit = 3;  // the child's exit code when its memory bound was reached
constexpr int kExitCalledExit = 4;   // the child's exit code when the probe called exit()

// One field of /proc/self/status in bytes ("VmSize", "VmPeak"), 0 when unreadable.
uint64_t vm_bytes(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  const std::size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') {
      kb = std::strtoull(line + n + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

uint64_t child_limit = 0, child_bound = 0;  // in the child: its address-space limit, and the growth allowed
uint64_t child_failures_at_start = 0;       // in the child: allocation_failures() when it began

// Whether the child ran out of memory: the last call failed for it, a libhdf5 call failed for it
// on the way (a malloc of 2.2 GB for a corrupt global-heap string returned null under the bound,
// the error went on as a clean one, and the parent, unbounded, then made that allocation), or
// its peak came near its limit. (vm_bytes reads 0 where not even a FILE could be allocated.)
bool child_out_of_memory() {
  return errno == ENOMEM || allocation_failures() != child_failures_at_start ||
         vm_bytes("VmPeak") + (child_bound >> 4) >= child_limit;
}

// A crash in the child right after an allocation failed (libhdf5 does not check every one) is
// the memory's fault, not the file's: the out-of-memory code; any other crash ends it as before.
void crash_in_child(int sig) {
  if (errno == ENOMEM) ::_exit(kOutOfMemoryExit);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Runs first when the child calls exit() (libhdf5 does on some failures, a failed allocation among
// them) and ends it at once, so that no other exit handler runs here: libhdf5's own would close,
// and so flush, the files the parent holds open.
void exit_in_child() { ::_exit(child_out_of_memory() ? kOutOfMemoryExit : kExitCalledExit); }

[[noreturn]] void child_main(const std::function<void()>& probe, unsigned timeout_s, uint64_t memory_bytes) {
  // The forking thread held h5::mutex(); here its owner is a thread that does not exist, so the
  // (single-threaded) child starts from a fresh, unlocked one.
  new (&mutex()) std::recursive_mutex();
  for (int sig : {SIGINT, SIGTERM, SIGALRM}) std::signal(sig, SIG_DFL);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, crash_in_child);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (devnull >= 0) ::dup2(devnull, STDERR_FILENO);
  ::alarm(timeout_s);
  // A corrupted size once made libhdf5 grow to 3 GB here, and the parent would have repeated it:
  // the address space may grow by memory_bytes, and reaching that bound (a failed allocation, or
  // a peak at the bound) is this child's own exit code. Under a sanitizer the address space is
  // already reserved, so the bound holds only for its own failures.
  child_bound = memory_bytes;
  child_failures_at_start = allocation_failures();
  child_limit = vm_bytes("VmSize") + memory_bytes;
  const rlimit as{child_limit, child_limit};
  ::setrlimit(RLIMIT_AS, &as);
  std::atexit(exit_in_child);
  errno = 0;
  try {
    probe();
  } catch (const std::bad_alloc&) {
    ::_exit(kOutOfMemoryExit);
  } catch (...) {
    // A clean error: the parent meets it again in-process and reports it with its context.
  }
  ::_exit(child_out_of_memory() ? kOutOfMemoryExit : 0);  // no exit handlers (above)
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL, likely out of memory";
    default: return "signal " + std::to_string(sig);
  }
}

struct WalkState {
  uint64_t max_bytes;
  std::string error;  // the first failure (exceptions must not cross libhdf5's C frames)
};

// Runs a callback body; a failure is noted and the walk goes on, so that every object is parsed
// here before the parent meets it.
template <class Body>
herr_t guarded_callback(WalkState* st, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    if (st->error.empty()) st->error = e.what();
  }
  return 0;
}

// Reads one value of `type` laid out as `space` (an attribute or a whole dataset).
template <class Read>
void read_value(hid_t type, hid_t space, uint64_t max_bytes, Read&& read) {
  const hssize_t points = H5Sget_simple_extent_npoints(space);
  if (points < 0) throw Error("unreadable dataspace");
  if (points == 0) return;
  if (H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) > 0) {
    if (static_cast<uint64_t>(points) > max_bytes) throw Error("more strings than the file has bytes");
    Handle mem = type_handle(H5Tcopy(H5T_C_S1), "datatype");
    check(H5Tset_size(mem, H5T_VARIABLE), "datatype");
    check(H5Tset_cset(mem, H5Tget_cset(type)), "datatype");
    std::vector<char*> ptrs(static_cast<std::size_t>(points), nullptr);  // [points]
    check(read(mem.get(), ptrs.data()), "read strings");
    H5Dvlen_reclaim(mem, space, H5P_DEFAULT, ptrs.data());
    return;
  }
  if (H5Tdetect_class(type, H5T_VLEN) > 0) throw Error("variable-length data other than strings");
  const std::size_t size = H5Tget_size(type);
  if (size == 0 || static_cast<uint64_t>(points) > max_bytes / size) throw Error("value larger than the file");
  std::vector<unsigned char> buf(static_cast<std::size_t>(points) * size);  // [points * size]
  check(read(type, buf.data()), "read");
}

// Reads the first and last element of a dataset, which walks its chunk index at both ends.
void read_end_elements(hid_t dataset, hid_t type) {
  if (H5Tdetect_class(type, H5T_VLEN) > 0 || H5Tget_size(type) == 0 || H5Tget_size(type) > 4096) return;
  const std::vector<hsize_t> dims = dataset_dims(dataset);
  for (const hsize_t d : dims)
    if (d == 0) return;
  std::vector<unsigned char> one(H5Tget_size(type));  // [element bytes]
  for (const bool last : {false, true}) {
    std::vector<hsize_t> start(dims.size(), 0), count(dims.size(), 1);
    if (last)
      for (std::size_t i = 0; i < dims.size(); ++i) start[i] = dims[i] - 1;
    Handle file_space = space_handle(H5Dget_space(dataset), "dataspace");
    if (!dims.empty())
      check(H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr), "select");
    const hsize_t n = 1;
    Handle mem_space = space_handle(H5Screate_simple(1, &n, nullptr), "dataspace");
    check(H5Dread(dataset, type, mem_space, file_space, H5P_DEFAULT, one.data()), "read");
  }
}

herr_t visit_attribute(hid_t obj, const char* name, const H5A_info_t*, void* data) {
  auto* st = static_cast<WalkState*>(data);
  return guarded_callback(st, [&] {
    Handle attr = attr_handle(H5Aopen(obj, name, H5P_DEFAULT), "attribute");
    Handle type = type_handle(H5Aget_type(attr), "attribute type");
    Handle space = space_handle(H5Aget_space(attr), "attribute space");
    read_value(type, space, st->max_bytes, [&](hid_t mem, void* buf) { return H5Aread(attr, mem, buf); });
  });
}

herr_t visit_object(hid_t root, const char* name, const H5O_info_t* info, void* data) {
  auto* st = static_cast<WalkState*>(data);
  return guarded_callback(st, [&] {
    Handle obj(check(H5Oopen(root, name, H5P_DEFAULT), std::string("object ") + name), H5Oclose);
    hsize_t idx = 0;
    check(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, visit_attribute, st), "attributes");
    if (info->type != H5O_TYPE_DATASET) return;
    Handle type = type_handle(H5Dget_type(obj), "datatype");
    check_chunks(obj);
    if (H5Tget_class(type) == H5T_STRING) {
      Handle space = space_handle(H5Dget_space(obj), "dataspace");
      read_value(type, space, st->max_bytes,
                 [&](hid_t mem, void* buf) { return H5Dread(obj, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf); });
    } else {
      read_end_elements(obj, type);
    }
  });
}

}  // namespace

ProbeFailure run_isolated(const std::function<void()>& probe, unsigned timeout_s, uint64_t memory_bytes) {
  const pid_t pid = ::fork();
  if (pid < 0) return {};
  if (pid == 0) child_main(probe, timeout_s, memory_bytes);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return {};
  }
  if (WIFEXITED(status)) {
    switch (WEXITSTATUS(status)) {
      case 0: return {};
      case kOutOfMemoryExit: {
        // Where the host had less than the child's bound, the host ran out first.
        const uint64_t available = host_memory_available();
        if (available < memory_bytes)
          return {"reading its HDF5 metadata ran out of host memory (" + memory_size_text(available) + " available)",
                  true};
        return {"reading its HDF5 metadata needed more than " + std::to_string(memory_bytes >> 20) + " MB of memory"};
      }
      case kExitCalledExit: return {"the HDF5 library gave up reading it (it called exit)"};
      default:
        return {"the HDF5 library failed reading it (memory error, exit code " + std::to_string(WEXITSTATUS(status)) +
                ")"};
    }
  }
  if (WIFSIGNALED(status)) {
    if (WTERMSIG(status) == SIGALRM)
      return {"reading its HDF5 metadata did not finish within " + std::to_string(timeout_s) + " s"};
    return {"the HDF5 library crashed reading it (" + signal_name(WTERMSIG(status)) + ")"};
  }
  return {};
}

void parse_all_metadata(hid_t file, uint64_t max_bytes) {
  WalkState st{max_bytes, {}};
  const herr_t status = H5Ovisit(file, H5_INDEX_NAME, H5_ITER_NATIVE, visit_object, &st);
  if (!st.error.empty()) throw Error(st.error);
  check(status, "object headers");
}

}  // namespace kvs::h5
