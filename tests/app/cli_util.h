// End-to-end helpers for the kvscope command-line tests: run the built binary with arguments and
// capture its exit code, stdout and stderr; temporary folders; the shared test models.
#pragma once
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/test_paths.h"

extern char** environ;

namespace kvs::cli_test {

namespace fs = std::filesystem;

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

// A fresh folder under /tmp, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kvscope-cli-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Names of the entries in the folder, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
};

struct CliResult {
  int code = -1;     // exit status; 128 + signal when killed
  std::string out;   // stdout
  std::string err;   // stderr
};

// Runs the kvscope binary with `args` (no shell), stdout and stderr captured through files.
inline CliResult run_kvscope(const std::vector<std::string>& args) {
  TempDir io;
  const std::string out_path = io.file("stdout"), err_path = io.file("stderr");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const std::string binary = test::kvscope_binary();
  std::vector<std::string> argv_s{binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn " + binary + " failed");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("waitpid failed");
  }
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_bytes(out_path);
  r.err = read_bytes(err_path);
  return r;
}

// The shared test models (docs: /work/shared/models/SOURCES.md).
inline std::string shared(const std::string& rel) { return test::shared_path("models/" + rel); }
inline std::string stories_bin() { return shared("stories260K/stories260K.bin"); }
inline std::string stories_gguf() { return shared("stories260K/stories260K.gguf"); }
inline std::string tok512() { return shared("stories260K/tok512.bin"); }
inline std::string tiny_random_gguf() { return shared("fixtures/llama-2-tiny-random.gguf"); }

// Number of '\n'-terminated lines in `s`.
inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Fails unless `r` is the CLI's bad-input answer: exit code 2, nothing on stdout and exactly one
// line "kvscope: <thing>...: <problem>" on stderr that names `thing` and contains `problem`.
inline ::testing::AssertionResult is_input_error(const CliResult& r, const std::string& thing,
                                                 const std::string& problem) {
  auto fail = [&](const std::string& why) {
    return ::testing::AssertionFailure() << why << "\n  exit code " << r.code << "\n  stdout: " << r.out
                                         << "\n  stderr: " << r.err;
  };
  if (r.code != 2) return fail("exit code is not 2");
  if (!r.out.empty()) return fail("stdout is not empty");
  if (count_lines(r.err) != 1 || r.err.back() != '\n') return fail("stderr is not exactly one line");
  if (r.err.rfind("kvscope: ", 0) != 0) return fail("stderr does not start with 'kvscope: '");
  if (r.err.find(thing) == std::string::npos) return fail("stderr does not name '" + thing + "'");
  if (r.err.find(problem) == std::string::npos) return fail("stderr does not say '" + problem + "'");
  return ::testing::AssertionSuccess();
}

// Records a trace of stories260K (greedy) with the CLI, on one thread (the test machine is small
// and busy); returns its result.
inline CliResult record_stories(const std::string& out, const std::string& prompt, int steps,
                                const std::string& model = stories_bin()) {
  return run_kvscope({"record", "--model", model, "--prompt", prompt, "--steps", std::to_string(steps),
                      "--out", out, "--quiet", "--threads", "1"});
}

}  // namespace kvs::cli_test
