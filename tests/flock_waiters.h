// Test support: whether some process waits for a flock() on a given file (/proc/locks lists
// waiters as "-> FLOCK ..."), so that tests can act while a lock is contended, not by sleeping.
#pragma once
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace kvs::test {

// True when /proc/locks shows a process waiting for a flock on the file with inode `ino`.
inline bool flock_waiter_on(ino_t ino) {
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    if (line.find("-> FLOCK") == std::string::npos) continue;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      const size_t colon = w.rfind(':');
      if (colon != std::string::npos && w.find(':') != colon && w.substr(colon + 1) == std::to_string(ino)) return true;
    }
  }
  return false;
}

// Waits up to `seconds` for a flock waiter on the file at `path`; true when one appeared.
inline bool wait_for_flock_waiter(const std::string& path, double seconds) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (flock_waiter_on(st.st_ino)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace kvs::test
