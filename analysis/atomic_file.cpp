// Output targets, temporary sibling names, exclusive creation, byte copies and fsync + rename
// publication.
#include "analysis/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "inference/errors.h"

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

// "a FIFO", "a folder", ... for a file that is not a regular one.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

// The text of the symbolic link `path` ("?" when it cannot be read).
std::string link_text(const std::string& path) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  return n < 0 ? std::string("?") : std::string(buf, (size_t)n);
}

// Writes `bytes` into the new file `temp` (created exclusively) and publishes it as `target`;
// on an error removes `temp` and throws InputError naming `path`.
template <class Fill>
void publish_through_temp(const std::string& path, const std::string& target, Fill fill) {
  remove_stale_temps(target);
  const std::string temp = temp_sibling(target);
  try {
    fill(temp);
    publish_file(temp, target);
  } catch (const FileError& e) {
    remove_quietly(temp);
    throw input_error(path, std::string("cannot write (") + e.what() + ")");
  }
}

// Checks `target`'s folder (require_writable_folder) and returns `target`; errors name `path`.
std::string in_writable_folder(const std::string& path, const std::string& target) {
  require_writable_folder(path, target);
  return target;
}

}  // namespace

void require_writable_folder(const std::string& path, const std::string& target) {
  std::string folder = folder_of(target);
  struct stat st;
  while (::stat(folder.c_str(), &st) != 0) {  // not there yet: what creating it would write into
    if (errno != ENOENT || folder == "." || folder == "/") return;
    folder = folder_of(folder);
  }
  if (S_ISDIR(st.st_mode) && !(st.st_mode & S_IWUSR))
    throw input_error(path, "is in the read-only folder " + folder + " (its owner has no write permission); not writing into it");
}

std::string output_target(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return in_writable_folder(path, path);  // nothing there yet
  if (S_ISREG(st.st_mode)) return in_writable_folder(path, path);
  if (!S_ISLNK(st.st_mode)) throw input_error(path, "is " + kind_of(st.st_mode) + ", not a regular file; not replacing it");
  const std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  if (!real || ::stat(real.get(), &st) != 0) {
    if (errno == ENOENT)
      throw input_error(path, "is a symbolic link to " + link_text(path) + ", which does not exist; not writing through it");
    throw input_error(path, std::string("is a symbolic link that cannot be followed (") + std::strerror(errno) + ")");
  }
  if (!S_ISREG(st.st_mode))
    throw input_error(path, "is a symbolic link to " + kind_of(st.st_mode) + " (" + real.get() +
                                "), not a regular file; not replacing it");
  return in_writable_folder(path, real.get());
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  publish_through_temp(path, output_target(path), [&](const std::string& temp) {
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail_errno();
    int err = write_all(fd, bytes.data(), bytes.size());
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) throw FileError(std::strerror(err));
  });
}

void copy_file_atomically(const std::string& from, const std::string& to) {
  publish_through_temp(to, output_target(to), [&](const std::string& temp) { copy_file_bytes(from, temp); });
}

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

void copy_mode_and_owner(const struct stat& like, const std::string& path) {
  // Owner first: chown clears the set-user-ID and set-group-ID bits that chmod then sets.
  if (::chown(path.c_str(), like.st_uid, like.st_gid) != 0 && errno != EPERM) fail_errno();
  if (::chmod(path.c_str(), like.st_mode & 07777) != 0) fail_errno();
}

void require_owner_write(const std::string& path, const struct stat& st, const std::string& action) {
  if (!(st.st_mode & S_IWUSR))
    throw input_error(path, "is read-only (its owner has no write permission); not " + action + " it");
}

void publish_file(const std::string& temp, const std::string& final_path) {
  fsync_path(temp, O_RDONLY);
  if (::rename(temp.c_str(), final_path.c_str()) != 0) fail_errno();
  fsync_path(folder_of(final_path), O_RDONLY | O_DIRECTORY);
}

void remove_stale_temps(const std::string& final_path) {
  const std::string folder = folder_of(final_path);
  const size_t slash = final_path.find_last_of('/');
  const std::string prefix = final_path.substr(slash == std::string::npos ? 0 : slash + 1) + ".tmp-";
  DIR* d = ::opendir(folder.c_str());
  if (!d) return;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<pid>-<16 hex>" exactly, as temp_sibling() writes it.
    const std::string tail = name.substr(prefix.size());
    const size_t dash = tail.find('-');
    if (dash == 0 || dash == std::string::npos || dash > 9 || tail.size() != dash + 17) continue;
    bool ok = true;
    for (size_t i = 0; i < tail.size(); ++i)
      ok = ok && (i == dash || (i < dash ? std::isdigit((unsigned char)tail[i]) : std::isxdigit((unsigned char)tail[i])));
    const int pid = ok ? std::atoi(tail.c_str()) : 0;
    if (pid <= 0 || pid == (int)::getpid()) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) ::unlinkat(::dirfd(d), name.c_str(), 0);
  }
  ::closedir(d);
}

void remove_quietly(const std::string& path) { ::unlink(path.c_str()); }

}  // namespace kvs
