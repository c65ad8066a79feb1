// Read-only memory map of a model file, with bounds-checked access for the loaders.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kvs {

class MappedFile {
 public:
  // Maps `path`; throws InputError ("<path>: cannot open (...)") when it cannot be read.
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
