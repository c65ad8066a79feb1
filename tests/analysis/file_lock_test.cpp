// FileLock: holders of one file's lock take turns, and a waiter whose file was renamed over
// while it waited ends up holding the new file (the one the path names), not the old inode.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <thread>

#include "analysis/atomic_file.h"
#include "analysis/file_lock.h"
#include "tests/flock_waiters.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using testing::TempDir;

ino_t inode(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

TEST(FileLock, WaiterTakesTheFileRenamedOverThePathWhileItWaited) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  testing::write_bytes(path, "old");
  std::atomic<bool> locked{false};
  ino_t waiter_inode = 0;
  std::string waiter_read;
  std::thread waiter;
  {
    FileLock first(path);
    EXPECT_EQ(first.status().st_ino, inode(path));
    waiter = std::thread([&] {
      FileLock second(path);
      locked = true;
      waiter_inode = second.status().st_ino;
      waiter_read = testing::read_bytes(path);
    });
    ASSERT_TRUE(test::wait_for_flock_waiter(path, 20.0)) << "the second lock never waited";
    EXPECT_FALSE(locked);
    // The first holder's update: a new file renamed over the path, then the lock released.
    const std::string temp = dir.file("t.h5.new");
    testing::write_bytes(temp, "new");
    ASSERT_EQ(std::rename(temp.c_str(), path.c_str()), 0);
  }
  waiter.join();
  EXPECT_TRUE(locked);
  EXPECT_EQ(waiter_inode, inode(path)) << "the waiter holds the replaced file's lock";
  EXPECT_EQ(waiter_read, "new");
}

TEST(FileLock, MissingFileIsAFileError) {
  TempDir dir;
  EXPECT_THROW(FileLock(dir.file("missing.h5")), FileError);
}

}  // namespace
}  // namespace kvs
