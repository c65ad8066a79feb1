// Host memory left to this process (meminfo, memory cgroup, resource limits) and the error that
// names what would not fit.
#include "inference/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <new>
#include <sstream>
#include <system_error>

namespace kvs {

namespace {

constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

// The number after `key` at the start of a line ("MemAvailable:  123 kB"), or -1.
long long field_value(const std::string& text, const std::string& key) {
  std::size_t at = 0;
  while ((at = text.find(key, at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      long long v = -1;
      if (std::sscanf(text.c_str() + at + key.size(), " %lld", &v) == 1) return v;
      return -1;
    }
    at += key.size();
  }
  return -1;
}

// A resource limit less what the process uses of it (the /proc/self/status field, KiB).
uint64_t rlimit_room(int resource, const std::string& status, const char* field) {
  struct rlimit rl;
  if (::getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return kUnknown;
  const uint64_t used = host_memory_detail::status_kib(status, field);
  if (used == kUnknown) return kUnknown;
  return rl.rlim_cur > used ? rl.rlim_cur - used : 0;
}

}  // namespace

namespace host_memory_detail {

std::string read_text(const char* path) {
  std::ifstream f(path);
  if (!f) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

uint64_t meminfo_room(const std::string& meminfo) {
  const long long available = field_value(meminfo, "MemAvailable:");
  if (available < 0) return kUnknown;
  const long long swap = std::max(0LL, field_value(meminfo, "SwapFree:"));
  return static_cast<uint64_t>(available + swap) * 1024;
}

uint64_t cgroup_room(const std::string& limit, const std::string& usage) {
  unsigned long long lim = 0, used = 0;
  if (std::sscanf(limit.c_str(), "%llu", &lim) != 1 || std::sscanf(usage.c_str(), "%llu", &used) != 1)
    return kUnknown;  // "max" (no limit), or nothing to read
  if (lim >= (1ULL << 60)) return kUnknown;  // cgroup v1's "no limit" (a page-rounded LLONG_MAX)
  return lim > used ? lim - used : 0;
}

uint64_t status_kib(const std::string& status, const std::string& field) {
  const long long v = field_value(status, field + ":");
  return v < 0 ? kUnknown : static_cast<uint64_t>(v) * 1024;
}

std::vector<std::string> cgroup_dirs(const std::string& proc_cgroup, const std::string& controller,
                                     const std::string& mount) {
  std::string path;
  std::istringstream lines(proc_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // "hierarchy:controllers:path"; cgroup v2's one line has no controllers ("0::/user.slice").
    const std::size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::istringstream names(line.substr(a + 1, b - a - 1));
    bool match = controller.empty() && a + 1 == b;
    for (std::string name; !match && std::getline(names, name, ',');) match = name == controller;
    if (match) path = line.substr(b + 1);
  }
  std::vector<std::string> dirs;
  while (!path.empty() && path != "/") {
    dirs.push_back(mount + path);
    path.erase(path.rfind('/'));
  }
  dirs.push_back(mount);
  return dirs;
}

uint64_t cgroup_tree_room(const std::string& controller, const char* v2_limit, const char* v2_usage,
                          const char* v1_limit, const char* v1_usage) {
  const std::string proc_cgroup = read_text("/proc/self/cgroup");
  const auto room_under = [&](const std::string& version, const std::string& mount, const char* limit,
                              const char* usage) {
    uint64_t room = kUnknown;
    for (const std::string& dir : cgroup_dirs(proc_cgroup, version, mount))
      room = std::min(room, cgroup_room(read_text((dir + "/" + limit).c_str()),
                                        read_text((dir + "/" + usage).c_str())));
    return room;
  };
  return std::min(room_under("", "/sys/fs/cgroup", v2_limit, v2_usage),
                  room_under(controller, "/sys/fs/cgroup/" + controller, v1_limit, v1_usage));
}

}  // namespace host_memory_detail

uint64_t host_memory_available() {
  using namespace host_memory_detail;
  const std::string status = read_text("/proc/self/status");
  return std::min({meminfo_room(read_text("/proc/meminfo")),
                   cgroup_tree_room("memory", "memory.max", "memory.current", "memory.limit_in_bytes",
                                    "memory.usage_in_bytes"),
                   rlimit_room(RLIMIT_AS, status, "VmSize"), rlimit_room(RLIMIT_DATA, status, "VmData")});
}

std::string memory_size_text(uint64_t bytes) {
  char buf[32];
  const double kib = static_cast<double>(bytes) / 1024.0, mib = kib / 1024.0, gib = mib / 1024.0;
  if (gib >= 1.0)
    std::snprintf(buf, sizeof buf, "%.1f GiB", gib);
  else if (mib >= 0.1)
    std::snprintf(buf, sizeof buf, "%.1f MiB", mib);
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", kib);
  return buf;
}

InputError host_memory_error(const std::string& what, uint64_t bytes, const std::string& purpose,
                             uint64_t available) {
  return input_error(what, "needs " + memory_size_text(bytes) + " of host memory for " + purpose + "; " +
                               (available == kUnknown ? std::string("less") : memory_size_text(available)) +
                               " available");
}

void require_host_memory(const std::string& what, uint64_t bytes, const std::string& purpose) {
  const uint64_t available = host_memory_available();
  if (bytes > available) throw host_memory_error(what, bytes, purpose, available);
}

bool out_of_host_memory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return true;
  const auto* failed = dynamic_cast<const std::system_error*>(&e);
  return failed && failed->code() == std::errc::resource_unavailable_try_again;
}

std::string memory_left_text() {
  const uint64_t available = host_memory_available();
  return available == kUnknown ? std::string("the memory left is unknown") : memory_size_text(available) + " available";
}

std::string error_text(const std::exception& e) {
  if (!out_of_host_memory(e)) return e.what();
  const bool thread = !dynamic_cast<const std::bad_alloc*>(&e);
  return std::string("out of host memory (") + (thread ? "a thread could not start" : "an allocation failed") + "; " +
         memory_left_text() + ")";
}

}  // namespace kvs
