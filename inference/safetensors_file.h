// Parser for .safetensors files: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inference/mapped_file.h"

namespace kvs {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;            // "F32", "F16", "BF16", ... as written
  std::vector<uint64_t> shape;  // row-major, outermost first
  uint64_t begin = 0, end = 0;  // byte range relative to the data section
  uint64_t elements() const;
};

class SafetensorsFile {
 public:
  // Maps and parses the file; checks that every tensor's byte range lies inside the data
  // section and matches its shape and dtype. Throws InputError naming the file (and tensor).
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;

  // Throws InputError naming the file and tensor unless its dtype is F32, F16 or BF16.
  void check_dtype(const SafetensorsTensor& t) const;
  // Converts an F32 / F16 / BF16 tensor into `dst` [elements] (check_dtype first).
  void read_f32(const SafetensorsTensor& t, float* dst) const;
  // The tensor's bytes as the file stores them [t.end - t.begin].
  const uint8_t* raw(const SafetensorsTensor& t) const;

 private:
  std::shared_ptr<MappedFile> file_;
  uint64_t data_offset_ = 0;
  std::map<std::string, SafetensorsTensor> tensors_;
};

// Bytes per element of a safetensors dtype, 0 when unknown.
uint64_t safetensors_dtype_size(const std::string& dtype);

}  // namespace kvs
