// Temporary sibling names, exclusive creation, byte copies and fsync + rename publication.
#include "analysis/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace kvs {

namespace {

[[noreturn]] void fail_errno() { throw FileError(std::strerror(errno)); }

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) fail_errno();
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems refuse fsync on folders (EINVAL); the rename itself is still atomic.
  if (rc != 0 && !(err == EINVAL && (flags & O_DIRECTORY))) throw FileError(std::strerror(err));
}

// Writes n bytes; returns 0 or the errno of the failing write.
int write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += w;
    n -= (size_t)w;
  }
  return 0;
}

}  // namespace

std::string temp_sibling(const std::string& final_path) {
  std::random_device rd;
  const uint64_t r = ((uint64_t)rd() << 32) ^ rd();
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp-%d-%016llx", (int)::getpid(), (unsigned long long)r);
  return final_path + suffix;
}

void create_exclusive(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) fail_errno();
  ::close(fd);
}

void copy_file_bytes(const std::string& from, const std::string& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) fail_errno();
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    const int err = errno;
    ::close(in);
    throw FileError(std::strerror(err));
  }
  std::vector<char> buf(1 << 20);  // copy block
  int err = 0;
  while (err == 0) {
    const ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0) {
      if (errno != EINTR) err = errno;
      continue;
    }
    if (n == 0) break;
    err = write_all(out, buf.data(), (size_t)n);
  }
  ::close(in);
  if (::close(out) != 0 && err == 0) err = errno;
  if (err != 0) throw FileError(std::strerror(err));
}

void publish_file(const std::string& temp, const std::string& final_path) {
  fsync_path(temp, O_RDONLY);
  if (::rename(temp.c_str(), final_path.c_str()) != 0) fail_errno();
  fsync_path(folder_of(final_path), O_RDONLY | O_DIRECTORY);
}

void remove_stale_temps(const std::string& final_path) {
  const std::string folder = folder_of(final_path);
  DIR* d = ::opendir(folder.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const size_t at = name.rfind(".tmp-");
    if (at == std::string::npos) continue;
    int pid = 0;
    unsigned long long r = 0;
    int used = 0;
    const std::string tail = name.substr(at + 5);
    if (std::sscanf(tail.c_str(), "%d-%16llx%n", &pid, &r, &used) != 2 || used != (int)tail.size() ||
        tail.size() < 18 || pid <= 0 || pid == (int)::getpid())
      continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) ::unlinkat(::dirfd(d), name.c_str(), 0);
  }
  ::closedir(d);
}

void remove_quietly(const std::string& path) { ::unlink(path.c_str()); }

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace kvs
