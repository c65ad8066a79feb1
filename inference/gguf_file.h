// GGUF (v2/v3) container parser: header, metadata key/values, tensor infos and the aligned data
// section, over a memory-mapped file. Every offset and size is checked against the file size.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inference/mapped_file.h"

namespace kvs {

enum class GgufType : uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};

// One metadata value. Scalars fill `number` (and `integer` for integer types) or `text`;
// arrays fill `strings` (string elements) or `numbers` (numeric/bool elements); nested arrays
// are validated but their elements are not kept.
struct GgufValue {
  GgufType type = GgufType::UInt8;
  GgufType element_type = GgufType::UInt8;  // arrays only
  double number = 0.0;
  int64_t integer = 0;
  std::string text;
  std::vector<std::string> strings;  // [n] string arrays
  std::vector<double> numbers;       // [n] numeric arrays
  uint64_t array_size = 0;
};

// GGML tensor types this project can read, by their GGUF numbers.
enum GgmlType : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_0 = 2,
  kGgmlQ4_1 = 3,
  kGgmlQ5_0 = 6,
  kGgmlQ5_1 = 7,
  kGgmlQ8_0 = 8,
  kGgmlQ2_K = 10,
  kGgmlQ3_K = 11,
  kGgmlQ4_K = 12,
  kGgmlQ5_K = 13,
  kGgmlQ6_K = 14,
  kGgmlIQ4_NL = 20,
  kGgmlIQ4_XS = 23,
  kGgmlBF16 = 30,
};

// Whether read_f32 can convert tensors of this GGML type.
bool ggml_type_supported(uint32_t type);

// Name of a GGML type number ("Q4_K" for 12), "type N" when unknown.
std::string ggml_type_name(uint32_t type);

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ne0 (fastest, the input dimension) first
  uint32_t type = 0;
  uint64_t offset = 0;  // relative to the data section
  uint64_t elements() const;
};

class GgufFile {
 public:
  // Parses the header, metadata and tensor infos. Throws InputError naming the file on any
  // malformed or truncated structure.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;

  // Converts a tensor to fp32 [elements]; throws InputError for unsupported types or data that
  // leaves the file.
  std::vector<float> read_f32(const GgufTensorInfo& tensor) const;
  // Converts many tensors at once, each into `dst` [elements], sharing one parallel loop (one
  // OpenMP barrier per model instead of one per tensor). Checks every tensor before converting.
  struct Read {
    const GgufTensorInfo* tensor;
    float* dst;
  };
  void read_f32_into(const std::vector<Read>& reads) const;
  // The tensor's bytes as the file stores them (InputError where they leave the file).
  const uint8_t* raw(const GgufTensorInfo& tensor) const;

 private:
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t> tensor_index_;
};

// Whether the file at `path` starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

}  // namespace kvs
