// Helpers for the reliability tests: run the kvscope binary as a child (optionally under a
// file-size or memory limit), kill it, and inspect the folder it wrote into.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_paths.h"

namespace kvs::rel {

namespace fs = std::filesystem;

inline const std::string kModel = test::shared_path("models/stories260K/stories260K.bin");
inline const std::string kTokenizer = test::shared_path("models/stories260K/tok512.bin");

inline bool have_model() { return fs::exists(kModel) && fs::exists(kTokenizer); }

// Starts `kvscope args...` with stdout to /dev/null and stderr to `stderr_fd` (-1 = /dev/null).
// fsize_limit > 0 caps the size of files the child may write. SIGXFSZ keeps its default action
// (terminate), as in a user's shell: kvscope must ignore it itself so that the write fails with
// EFBIG, as on a full disk. data_limit > 0 caps the memory it may allocate (RLIMIT_DATA). A
// non-empty `cgroup` is the folder of a cgroup the child joins first (through its cgroup.procs).
inline pid_t spawn_kvscope(const std::vector<std::string>& args, int stderr_fd = -1, long fsize_limit = 0,
                           long data_limit = 0, const std::string& cgroup = "") {
  std::vector<std::string> all = {test::kvscope_binary()};
  all.insert(all.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int null_fd = ::open("/dev/null", O_WRONLY);
  ::dup2(null_fd, 1);
  ::dup2(stderr_fd >= 0 ? stderr_fd : null_fd, 2);
  if (fsize_limit > 0) {
    ::signal(SIGXFSZ, SIG_DFL);
    struct rlimit rl = {(rlim_t)fsize_limit, (rlim_t)fsize_limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
  }
  if (data_limit > 0) {
    struct rlimit rl = {(rlim_t)data_limit, (rlim_t)data_limit};
    ::setrlimit(RLIMIT_DATA, &rl);
  }
  if (!cgroup.empty() && !(std::ofstream(cgroup + "/cgroup.procs") << ::getpid())) ::_exit(126);
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

// Waits for the child; returns its exit code, or 128 + signal when it was killed.
inline int wait_child(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

// Runs `kvscope args...` to completion; its stderr goes to *err when given (through a pipe, so
// a file-size limit does not cut it).
inline int run_kvscope(const std::vector<std::string>& args, std::string* err = nullptr, long fsize_limit = 0,
                       long data_limit = 0, const std::string& cgroup = "") {
  int fds[2] = {-1, -1};
  if (err && ::pipe(fds) != 0) return -1;
  const pid_t pid = spawn_kvscope(args, fds[1], fsize_limit, data_limit, cgroup);
  if (err) {
    ::close(fds[1]);
    err->clear();
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) != 0) {
      if (n > 0) err->append(buf, (size_t)n);
      else if (errno != EINTR) break;
    }
    ::close(fds[0]);
  }
  return wait_child(pid);
}

// Seconds one full run of `kvscope args...` takes (it must succeed).
inline double time_kvscope(const std::vector<std::string>& args, int* rc) {
  const auto t0 = std::chrono::steady_clock::now();
  *rc = run_kvscope(args);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Names in `dir` that look like temporary siblings ("<name>.tmp-<pid>-<hex>").
inline std::vector<std::string> temp_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// A fresh folder under /tmp, removed by the destructor.
struct ScratchDir {
  std::string path;
  explicit ScratchDir(const std::string& tag) {
    path = (fs::temp_directory_path() / ("kvscope-" + tag + "-" + std::to_string(::getpid()))).string();
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace kvs::rel
