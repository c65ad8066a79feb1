// A cgroup made for one test below the test process's own, in one controller's cgroup v1
// hierarchy, with one limit written (a memory or pids limit), removed by the destructor. Tests
// that need one skip where it cannot be made: cgroup v2, a hierarchy not mounted, not root.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "inference/host_memory.h"

namespace kvs::test {

struct ScratchCgroup {
  std::string path;  // the cgroup's folder; empty where none could be made
  // controller: "memory" or "pids"; limit_file and value: e.g. "pids.max" and "3".
  ScratchCgroup(const std::string& controller, const std::string& limit_file, const std::string& value) {
    const std::string mount = "/sys/fs/cgroup/" + controller;
    struct stat st;
    if (::stat(mount.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return;  // no v1 hierarchy of it here
    const std::string proc_cgroup = host_memory_detail::read_text("/proc/self/cgroup");
    const std::string own = host_memory_detail::cgroup_dirs(proc_cgroup, controller, mount).front();
    const std::string dir = own + "/kvscope-test-" + std::to_string(::getpid());
    if (::mkdir(dir.c_str(), 0755) != 0) return;
    if (std::ofstream(dir + "/" + limit_file) << value) path = dir;
    else ::rmdir(dir.c_str());
  }
  ~ScratchCgroup() {
    if (!path.empty()) ::rmdir(path.c_str());
  }
  ScratchCgroup(const ScratchCgroup&) = delete;
  ScratchCgroup& operator=(const ScratchCgroup&) = delete;
};

}  // namespace kvs::test
