// An exclusive advisory lock (flock) on a file that its updaters replace by rename: held for a
// whole read-modify-rename, it makes concurrent updaters take turns so that none loses another's
// change.
#pragma once
#include <sys/stat.h>

#include <string>

namespace kvs {

class FileLock {
 public:
  // Waits until this process holds the lock of the file `path` names now. A holder that renamed
  // a new file over `path` while this one waited leaves the old file locked to nobody: the lock
  // is then taken again on the new file, so the new holder reads the previous one's result.
  // Throws FileError (analysis/atomic_file.h) when `path` cannot be opened.
  explicit FileLock(const std::string& path);
  ~FileLock();  // releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // The locked file's status (inode, permission bits, owner).
  const struct stat& status() const { return st_; }

 private:
  int fd_ = -1;
  struct stat st_ {};
};

}  // namespace kvs
