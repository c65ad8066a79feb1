// GGUF parser. Layout: "GGUF", uint32 version, uint64 n_tensors, uint64 n_kv, then n_kv
// {string key, uint32 type, value}, then n_tensors {string name, uint32 n_dims, uint64 dims[],
// uint32 type, uint64 offset}, then the data section at the next multiple of general.alignment.
#include "inference/gguf_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "inference/errors.h"
#include "kernels/quant.h"

namespace kvs {
namespace {

constexpr int kMaxArrayDepth = 4;
constexpr uint64_t kMaxDims = 4;

class Cursor {
 public:
  explicit Cursor(const MappedFile& f) : f_(f) {}
  template <typename T>
  T read(const std::string& what) {
    T v;
    std::memcpy(&v, f_.range(pos_, sizeof(T), what), sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what);
    const uint8_t* p = f_.range(pos_, n, what);
    pos_ += n;
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  void skip(uint64_t n, const std::string& what) {
    f_.range(pos_, n, what);
    pos_ += n;
  }
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return f_.size() - pos_; }

 private:
  const MappedFile& f_;
  uint64_t pos_ = 0;
};

InputError truncated(const MappedFile& f, const std::string& what) {
  return input_error(
      f.path(), "truncated file (" + what + " ends past " + std::to_string(f.size()) + " bytes)");
}

// int64 of a float value, 0 when out of range.
int64_t to_integer(double d) { return std::isfinite(d) && std::fabs(d) < 9e18 ? int64_t(d) : 0; }

// clang-format off
// Bytes of one scalar of a numeric type, 0 for strings/arrays/unknown.
uint64_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UInt8: case GgufType::Int8: case GgufType::Bool: return 1;
    case GgufType::UInt16: case GgufType::Int16: return 2;
    case GgufType::UInt32: case GgufType::Int32: case GgufType::Float32: return 4;
    case GgufType::UInt64: case GgufType::Int64: case GgufType::Float64: return 8;
    default: return 0;
  }
}

// Reads one numeric scalar as (double, int64).
void read_number(Cursor& c, GgufType t, const std::string& what, double& d, int64_t& i) {
  switch (t) {
    case GgufType::UInt8: i = c.read<uint8_t>(what); break;
    case GgufType::Int8: i = c.read<int8_t>(what); break;
    case GgufType::Bool: i = c.read<uint8_t>(what) != 0; break;
    case GgufType::UInt16: i = c.read<uint16_t>(what); break;
    case GgufType::Int16: i = c.read<int16_t>(what); break;
    case GgufType::UInt32: i = c.read<uint32_t>(what); break;
    case GgufType::Int32: i = c.read<int32_t>(what); break;
    case GgufType::Int64: i = c.read<int64_t>(what); break;
    case GgufType::UInt64: {
      const uint64_t u = c.read<uint64_t>(what);
      i = static_cast<int64_t>(u);
      d = static_cast<double>(u);
      return;
    }
    case GgufType::Float32: d = c.read<float>(what); i = to_integer(d); return;
    case GgufType::Float64: d = c.read<double>(what); i = to_integer(d); return;
    default: return;
  }
  d = static_cast<double>(i);
}
// clang-format on

void read_value(Cursor& c, const MappedFile& f, GgufType type, const std::string& key,
                GgufValue& out, int depth) {
  const std::string what = "metadata " + key;
  out.type = type;
  if (type == GgufType::String) {
    out.text = c.read_string(what);
    return;
  }
  if (scalar_size(type) > 0) {
    read_number(c, type, what, out.number, out.integer);
    return;
  }
  if (type != GgufType::Array) {
    throw input_error(f.path(), "metadata " + key + " has unknown value type " +
                                    std::to_string(static_cast<uint32_t>(type)));
  }
  if (depth >= kMaxArrayDepth) throw input_error(f.path(), "metadata " + key + " nests too deep");
  const auto elem = static_cast<GgufType>(c.read<uint32_t>(what));
  const uint64_t n = c.read<uint64_t>(what);
  out.element_type = elem;
  out.array_size = n;
  if (elem == GgufType::String) {
    if (n > c.remaining() / 8) throw truncated(f, what);
    out.strings.reserve(n);
    for (uint64_t k = 0; k < n; ++k) out.strings.push_back(c.read_string(what));
  } else if (uint64_t sz = scalar_size(elem); sz > 0) {
    if (n > c.remaining() / sz) throw truncated(f, what);
    out.numbers.resize(n);
    double d;
    int64_t i;
    for (uint64_t k = 0; k < n; ++k) {
      read_number(c, elem, what, d, i);
      out.numbers[k] = d;
    }
  } else if (elem == GgufType::Array) {
    if (n > c.remaining() / 12) throw truncated(f, what);
    for (uint64_t k = 0; k < n; ++k) {
      GgufValue inner;
      read_value(c, f, GgufType::Array, key, inner, depth + 1);
    }
  } else {
    throw input_error(f.path(), "metadata " + key + " has unknown array element type " +
                                    std::to_string(static_cast<uint32_t>(elem)));
  }
}

// Storage unit of a supported tensor type: `weights` per block of `bytes` (1 weight for the
// plain float types); {0, 0} when the type is unsupported.
struct BlockLayout {
  uint64_t weights;
  uint64_t bytes;
};

BlockLayout block_layout(uint32_t type) {
  switch (type) {
    case kGgmlF32:
      return {1, 4};
    case kGgmlF16:
    case kGgmlBF16:
      return {1, 2};
    case kGgmlQ8_0:
      return {kQuantBlock, kQ8_0BlockBytes};
    case kGgmlQ4_0:
      return {kQuantBlock, kQ4_0BlockBytes};
    case kGgmlQ4_1:
      return {kQuantBlock, kQ4_1BlockBytes};
    case kGgmlQ5_0:
      return {kQuantBlock, kQ5_0BlockBytes};
    case kGgmlQ5_1:
      return {kQuantBlock, kQ5_1BlockBytes};
    case kGgmlIQ4_NL:
      return {kQuantBlock, kIQ4_NLBlockBytes};
    case kGgmlQ2_K:
      return {kQuantSuperBlock, kQ2_KBlockBytes};
    case kGgmlQ3_K:
      return {kQuantSuperBlock, kQ3_KBlockBytes};
    case kGgmlQ4_K:
      return {kQuantSuperBlock, kQ4_KBlockBytes};
    case kGgmlQ5_K:
      return {kQuantSuperBlock, kQ5_KBlockBytes};
    case kGgmlQ6_K:
      return {kQuantSuperBlock, kQ6_KBlockBytes};
    case kGgmlIQ4_XS:
      return {kQuantSuperBlock, kIQ4_XSBlockBytes};
    default:
      return {0, 0};
  }
}

// File bytes of `n` elements of a supported tensor type (whole blocks; a partial block is
// refused by read_f32_into); 0 when the type is unsupported.
uint64_t tensor_bytes(uint32_t type, uint64_t n) {
  const BlockLayout b = block_layout(type);
  return b.weights == 0 ? 0 : n / b.weights * b.bytes;
}

}  // namespace

bool ggml_type_supported(uint32_t type) { return block_layout(type).weights != 0; }

std::string ggml_type_name(uint32_t type) {
  static const char* const names[] = {
      "F32",     "F16",    "Q4_0",    "Q4_1",  "Q4_2",   "Q4_3",  "Q5_0",  "Q5_1",
      "Q8_0",    "Q8_1",   "Q2_K",    "Q3_K",  "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",
      "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
      "I8",      "I16",    "I32",     "I64",   "F64",    "IQ1_M", "BF16",  "Q4_0_4_4",
      "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",  "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (type < sizeof(names) / sizeof(names[0])) return names[type];
  return "type " + std::to_string(type);
}

uint64_t GgufTensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufFile::GgufFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) {
  const MappedFile& f = *file_;
  Cursor c(f);
  if (f.size() < 4 || std::memcmp(f.data(), "GGUF", 4) != 0) {
    throw input_error(path, "not a GGUF file (bad magic)");
  }
  if (f.size() < 24) {
    throw input_error(path, "truncated file (" + std::to_string(f.size()) +
                                " bytes, shorter than the 24-byte GGUF header)");
  }
  c.skip(4, "magic");
  version_ = c.read<uint32_t>("header");
  if (version_ != 2 && version_ != 3) {
    throw input_error(path,
                      "unsupported GGUF version " + std::to_string(version_) + " (need 2 or 3)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("header");
  const uint64_t n_kv = c.read<uint64_t>("header");
  // Every KV takes >= 12 bytes and every tensor info >= 24: reject counts the file cannot hold.
  if (n_kv > c.remaining() / 12 || n_tensors > c.remaining() / 24) {
    throw input_error(path, "truncated file (header claims " + std::to_string(n_tensors) +
                                " tensors and " + std::to_string(n_kv) + " metadata entries)");
  }
  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string key = c.read_string("metadata key " + std::to_string(k));
    const auto type = static_cast<GgufType>(c.read<uint32_t>("metadata " + key));
    GgufValue v;
    read_value(c, f, type, key, v, 0);
    metadata_[key] = std::move(v);
  }
  uint64_t alignment = 32;
  if (const GgufValue* a = find("general.alignment")) alignment = static_cast<uint64_t>(a->integer);
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw input_error(path,
                      "general.alignment " + std::to_string(alignment) + " is not a power of two");
  }
  tensors_.reserve(n_tensors);
  for (uint64_t t = 0; t < n_tensors; ++t) {
    GgufTensorInfo info;
    info.name = c.read_string("tensor info " + std::to_string(t));
    const std::string what = "tensor info " + info.name;
    const uint32_t n_dims = c.read<uint32_t>(what);
    if (n_dims == 0 || n_dims > kMaxDims) {
      throw input_error(path,
                        "tensor " + info.name + " has " + std::to_string(n_dims) + " dimensions");
    }
    // No GGML type stores less than one bit per weight (Q2_K takes 2.625), so a file of N bytes
    // holds at most 8N weights; larger shapes are refused before their sizes can overflow.
    const uint64_t max_elements = 8 * f.size();
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = c.read<uint64_t>(what);
      if (dim == 0 || dim > max_elements || elements > max_elements / dim) {
        throw input_error(path, "tensor " + info.name + " has an impossible shape (dimension " +
                                    std::to_string(dim) + " in a file of " +
                                    std::to_string(f.size()) + " bytes)");
      }
      elements *= dim;
      info.dims.push_back(dim);
    }
    info.type = c.read<uint32_t>(what);
    info.offset = c.read<uint64_t>(what);
    if (info.offset % alignment != 0) {
      throw input_error(
          path, "tensor " + info.name + " has a misaligned offset " + std::to_string(info.offset));
    }
    if (tensor_index_.count(info.name))
      throw input_error(path, "tensor " + info.name + " appears twice");
    tensor_index_[info.name] = tensors_.size();
    tensors_.push_back(std::move(info));
  }
  data_offset_ = (c.pos() + alignment - 1) / alignment * alignment;
  for (const GgufTensorInfo& t : tensors_) {
    const uint64_t bytes = tensor_bytes(t.type, t.elements());
    if (bytes == 0) continue;  // unsupported types and partial blocks are reported on read
    if (t.offset > f.size() || data_offset_ > f.size() - t.offset ||
        bytes > f.size() - data_offset_ - t.offset) {
      throw input_error(path, "truncated file (tensor " + t.name + " ends past " +
                                  std::to_string(f.size()) + " bytes)");
    }
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  const GgufValue* v = find(key);
  return v && v->type == GgufType::String ? v->text : fallback;
}

int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const {
  const GgufValue* v = find(key);
  return v && scalar_size(v->type) > 0 ? v->integer : fallback;
}

bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  const GgufValue* v = find(key);
  return v && scalar_size(v->type) > 0 ? v->integer != 0 : fallback;
}

std::vector<float> GgufFile::read_f32(const GgufTensorInfo& t) const {
  std::vector<float> out(t.elements());
  read_f32_into({{&t, out.data()}});
  return out;
}

const uint8_t* GgufFile::raw(const GgufTensorInfo& t) const {
  return file_->range(data_offset_ + t.offset, tensor_bytes(t.type, t.elements()), "tensor " + t.name);
}

void GgufFile::read_f32_into(const std::vector<Read>& reads) const {
  struct Chunk {
    uint32_t type;
    const uint8_t* src;
    float* dst;
    std::size_t count;  // weights in this chunk
  };
  constexpr uint64_t kChunkWeights = 1 << 16;  // work item size, a multiple of every block size
  std::vector<Chunk> chunks;
  for (const Read& r : reads) {
    const GgufTensorInfo& t = *r.tensor;
    const uint64_t n = t.elements();
    const BlockLayout block = block_layout(t.type);
    if (block.weights == 0) {
      throw input_error(path(), "tensor " + t.name + " has unsupported type " +
                                    std::to_string(t.type) + " (" + ggml_type_name(t.type) + ")");
    }
    if (t.dims[0] % block.weights != 0) {
      throw input_error(path(), "tensor " + t.name + " has rows of " + std::to_string(t.dims[0]) +
                                    " weights, not a multiple of the " + ggml_type_name(t.type) +
                                    " block of " + std::to_string(block.weights) + " weights");
    }
    const uint64_t bytes = tensor_bytes(t.type, n);
    const uint8_t* src = file_->range(data_offset_ + t.offset, bytes, "tensor " + t.name);
    for (uint64_t first = 0; first < n; first += kChunkWeights) {
      const uint64_t count = std::min(kChunkWeights, n - first);
      // Chunks start at multiples of 2^16 weights, hence on block boundaries.
      const uint64_t src_off = first / block.weights * block.bytes;
      chunks.push_back({t.type, src + src_off, r.dst + first, static_cast<std::size_t>(count)});
    }
  }
  const int64_t n_chunks = static_cast<int64_t>(chunks.size());
#pragma omp parallel for schedule(dynamic, 4) if (n_chunks > 8)
  for (int64_t i = 0; i < n_chunks; ++i) {
    const Chunk& c = chunks[i];
    switch (c.type) {
      case kGgmlF32:
        std::memcpy(c.dst, c.src, c.count * sizeof(float));
        break;
      case kGgmlF16:
        dequantize_f16(c.src, c.dst, c.count);
        break;
      case kGgmlBF16:
        dequantize_bf16(c.src, c.dst, c.count);
        break;
      case kGgmlQ8_0:
        dequantize_q8_0(c.src, c.dst, c.count);
        break;
      case kGgmlQ4_0:
        dequantize_q4_0(c.src, c.dst, c.count);
        break;
      case kGgmlQ4_1:
        dequantize_q4_1(c.src, c.dst, c.count);
        break;
      case kGgmlQ5_0:
        dequantize_q5_0(c.src, c.dst, c.count);
        break;
      case kGgmlQ5_1:
        dequantize_q5_1(c.src, c.dst, c.count);
        break;
      case kGgmlIQ4_NL:
        dequantize_iq4_nl(c.src, c.dst, c.count);
        break;
      case kGgmlQ2_K:
        dequantize_q2_k(c.src, c.dst, c.count);
        break;
      case kGgmlQ3_K:
        dequantize_q3_k(c.src, c.dst, c.count);
        break;
      case kGgmlQ4_K:
        dequantize_q4_k(c.src, c.dst, c.count);
        break;
      case kGgmlQ5_K:
        dequantize_q5_k(c.src, c.dst, c.count);
        break;
      case kGgmlQ6_K:
        dequantize_q6_k(c.src, c.dst, c.count);
        break;
      case kGgmlIQ4_XS:
        dequantize_iq4_xs(c.src, c.dst, c.count);
        break;
      default:
        break;
    }
  }
}

}  // namespace kvs
