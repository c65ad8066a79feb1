// FileLock: flock(LOCK_EX) on the file a path names, retaken when the path was renamed over.
#include "analysis/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "analysis/atomic_file.h"

namespace kvs {

FileLock::FileLock(const std::string& path) {
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw FileError(std::strerror(errno));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw FileError(std::strerror(err));
    }
    struct stat now;
    if (::fstat(fd, &st_) == 0 && ::stat(path.c_str(), &now) == 0 && now.st_dev == st_.st_dev &&
        now.st_ino == st_.st_ino) {
      fd_ = fd;
      return;
    }
    ::close(fd);  // replaced (or removed) while we waited: lock what the path names now
  }
}

FileLock::~FileLock() { ::close(fd_); }

}  // namespace kvs
