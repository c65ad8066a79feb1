// Read-only memory map of a model file, with bounds-checked access for the loaders; and what a
// path names, told without opening it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kvs {

// What a path names, found by stat alone: nothing is opened, so a FIFO or a device cannot block.
// Throws InputError "<path>: cannot access (<reason>)" when stat fails other than for a missing
// path (e.g. inside a folder the user may not read).
enum class PathKind { Missing, RegularFile, Folder, Other };
PathKind path_kind(const std::string& path);

class MappedFile {
 public:
  // Maps `path`; throws InputError ("<path>: cannot open (...)") when it cannot be read, and
  // "<path>: not a regular file" for anything else (a FIFO is opened without blocking, and refused).
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Pointer to bytes [offset, offset+bytes); throws InputError "<path>: truncated file (<what>
  // ends past N bytes)" when the range leaves the file.
  const uint8_t* range(uint64_t offset, uint64_t bytes, const std::string& what) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace kvs
