// Output targets and whole-file replacement (analysis/atomic_file.h): only regular files are
// replaced, a symbolic link is written through to its target, anything else (a device, a FIFO,
// a socket, a folder, a link to nothing) is refused and left as it was; a new write removes
// the temporary files of its own name that dead processes left, and no others.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "analysis/atomic_file.h"
#include "inference/errors.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// The message of the InputError `f` throws ("" when it throws none).
template <class F>
std::string input_error_of(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A pid that no process has (a child that has exited and been reaped).
int dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return (int)pid;
}

TEST(AtomicFile, WhatIsNotARegularFileIsRefusedAndLeftAsItWas) {
  TempDir dir;
  const std::string fifo = dir.file("fifo"), socket_path = dir.file("socket"), folder = dir.file("folder");
  const std::string device = dir.file("nulldev"), dangling = dir.file("dangling"), to_fifo = dir.file("to_fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path.c_str());
  ASSERT_EQ(::bind(sock, (const sockaddr*)&addr, sizeof addr), 0);
  fs::create_directory(folder);
  fs::create_symlink(dir.file("missing/zz.h5"), dangling);
  fs::create_symlink(fifo, to_fifo);
  std::vector<std::pair<std::string, std::string>> cases = {
      {fifo, "is a FIFO, not a regular file; not replacing it"},
      {socket_path, "is a socket, not a regular file; not replacing it"},
      {folder, "is a folder, not a regular file; not replacing it"},
      {dangling, "is a symbolic link to " + dir.file("missing/zz.h5") + ", which does not exist; not writing through it"},
      {to_fifo, "is a symbolic link to a FIFO (" + fifo + "), not a regular file; not replacing it"}};
  // A device node of our own (/dev/null's numbers) where the tests may make one (root).
  if (::mknod(device.c_str(), S_IFCHR | 0644, makedev(1, 3)) == 0)
    cases.push_back({device, "is a character device, not a regular file; not replacing it"});
  const std::string source = dir.file("source");
  testing::write_bytes(source, "bytes");
  for (const auto& c : cases) {
    const std::string& path = c.first;  // named, not bound: clang 14's lambdas cannot capture a binding
    const std::string& problem = c.second;
    SCOPED_TRACE(path);
    struct stat before;
    ASSERT_EQ(::lstat(path.c_str(), &before), 0);
    EXPECT_EQ(input_error_of([&] { output_target(path); }), path + ": " + problem);
    EXPECT_EQ(input_error_of([&] { write_file_atomically(path, "new"); }), path + ": " + problem);
    EXPECT_EQ(input_error_of([&] { copy_file_atomically(source, path); }), path + ": " + problem);
    struct stat after;
    ASSERT_EQ(::lstat(path.c_str(), &after), 0);
    EXPECT_EQ(after.st_mode, before.st_mode);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(after.st_rdev, before.st_rdev);
  }
  ::close(sock);
  EXPECT_FALSE(fs::exists(dir.file("missing")));
  for (const std::string& name : dir.entries()) EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
}

TEST(AtomicFile, SymlinkIsWrittenThroughToItsTarget) {
  TempDir dir;
  fs::create_directory(dir.file("real"));
  const std::string target = dir.file("real/data.csv"), link = dir.file("link.csv");
  testing::write_bytes(target, "old");
  fs::create_symlink("real/data.csv", link);  // relative, as `ln -s` makes them
  EXPECT_EQ(output_target(link), fs::canonical(target).string());
  EXPECT_EQ(output_target(target), target);
  EXPECT_EQ(output_target(dir.file("absent.csv")), dir.file("absent.csv"));
  write_file_atomically(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(testing::read_bytes(target), "new");
  const std::string source = dir.file("source");
  testing::write_bytes(source, "copied");
  copy_file_atomically(source, link);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(testing::read_bytes(target), "copied");
  EXPECT_EQ(testing::read_bytes(source), "copied");
  std::vector<std::string> names = dir.entries();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"link.csv", "real", "source"}));
}

TEST(AtomicFile, NewWriteRemovesOnlyItsOwnNamesTempsOfDeadProcesses) {
  TempDir dir;
  const std::string dead = std::to_string(dead_pid()), alive = std::to_string(::getppid());
  const std::string hex = "0123456789abcdef";
  const std::vector<std::string> stale = {"t.csv.tmp-" + dead + "-" + hex};
  const std::vector<std::string> kept = {
      "other.csv.tmp-" + dead + "-" + hex,       // another file's
      "xt.csv.tmp-" + dead + "-" + hex,          // a name that only ends like it
      "t.csv.tmp-" + alive + "-" + hex,          // its process still runs
      "t.csv.tmp-" + dead + "-" + hex + "0",     // not the exact pattern
      "t.csv.tmp-" + dead + "-0123456789abcdeg",
      "t.csv.tmp-" + dead + "-" + hex + ".bak"};
  for (const auto& list : {stale, kept})
    for (const std::string& name : list) testing::write_bytes(dir.file(name), "left over");
  write_file_atomically(dir.file("t.csv"), "a,b\n");
  for (const std::string& name : stale) EXPECT_FALSE(fs::exists(dir.file(name))) << name;
  for (const std::string& name : kept) EXPECT_TRUE(fs::exists(dir.file(name))) << name;
  EXPECT_EQ(testing::read_bytes(dir.file("t.csv")), "a,b\n");
}

}  // namespace
}  // namespace kvs
