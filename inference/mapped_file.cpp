// Read-only memory map of a model file (POSIX mmap), with bounds-checked ranges; path kinds.
#include "inference/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "inference/errors.h"

namespace kvs {

PathKind path_kind(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status s = std::filesystem::status(path, ec);
  if (s.type() == std::filesystem::file_type::not_found) return PathKind::Missing;
  if (ec) throw input_error(path, "cannot access (" + ec.message() + ")");
  if (std::filesystem::is_regular_file(s)) return PathKind::RegularFile;
  if (std::filesystem::is_directory(s)) return PathKind::Folder;
  return PathKind::Other;
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; regular files ignore it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) throw input_error(path, std::string("cannot open (") + std::strerror(errno) + ")");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw input_error(path, "not a regular file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw input_error(path, std::string("cannot map (") + std::strerror(err) + ")");
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

const uint8_t* MappedFile::range(uint64_t offset, uint64_t bytes, const std::string& what) const {
  if (offset > size_ || bytes > size_ - offset) {
    throw input_error(
        path_, "truncated file (" + what + " ends past " + std::to_string(size_) + " bytes)");
  }
  return data_ + offset;
}

}  // namespace kvs
