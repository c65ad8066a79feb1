// safetensors parsing and conversion to fp32 (F32 copy, F16 / BF16 widening, in parallel).
#include "inference/safetensors_file.h"

#include <algorithm>
#include <cstring>

#include "inference/errors.h"
#include "inference/json.h"
#include "kernels/quant.h"

namespace kvs {
namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;  // as the reference implementation

}  // namespace

uint64_t safetensors_dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

uint64_t SafetensorsTensor::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_shared<MappedFile>(path)) {
  const MappedFile& f = *file_;
  uint64_t header_len = 0;
  std::memcpy(&header_len, f.range(0, 8, "header length"), 8);
  if (header_len < 2 || header_len > kMaxHeaderBytes) {
    throw input_error(path,
                      "not a safetensors file (header length " + std::to_string(header_len) + ")");
  }
  const char* header = reinterpret_cast<const char*>(f.range(8, header_len, "header"));
  data_offset_ = 8 + header_len;
  const uint64_t data_size = f.size() - data_offset_;
  const Json j = Json::parse(std::string_view(header, header_len), path);
  if (!j.is_object()) throw input_error(path, "safetensors header is not a JSON object");
  for (std::size_t i = 0; i < j.keys().size(); ++i) {
    const std::string& name = j.keys()[i];
    if (name == "__metadata__") continue;
    const Json& v = j.items()[i];
    const Json* shape = v.find("shape");
    const Json* offsets = v.find("data_offsets");
    SafetensorsTensor t;
    t.name = name;
    t.dtype = v.get_string("dtype", "");
    if (shape == nullptr || !shape->is_array() || offsets == nullptr || !offsets->is_array() ||
        offsets->size() != 2 || t.dtype.empty()) {
      throw input_error(path, "tensor " + name + " lacks dtype, shape or data_offsets");
    }
    uint64_t elements = 1;
    for (const Json& d : shape->items()) {
      const double x = d.as_number();
      if (!d.is_number() || x < 0 || x > 1e15 ||
          x != static_cast<double>(static_cast<uint64_t>(x))) {
        throw input_error(path, "tensor " + name + " has an invalid shape");
      }
      t.shape.push_back(static_cast<uint64_t>(x));
      // Saturate past the data size: such a shape can never match its byte range.
      const uint64_t dim = t.shape.back();
      elements = (dim != 0 && elements > (data_size + 1) / dim) ? data_size + 1 : elements * dim;
    }
    for (int k = 0; k < 2; ++k) {
      const Json& o = offsets->items()[k];
      if (!o.is_number() || o.as_number() < 0 || o.as_number() > 1e18) {
        throw input_error(path, "tensor " + name + " has invalid data_offsets");
      }
    }
    t.begin = static_cast<uint64_t>(offsets->items()[0].as_number());
    t.end = static_cast<uint64_t>(offsets->items()[1].as_number());
    if (t.begin > t.end || t.end > data_size) {
      throw input_error(path, "tensor " + name + " has data_offsets [" + std::to_string(t.begin) +
                                  ", " + std::to_string(t.end) + "] outside the " +
                                  std::to_string(data_size) + "-byte data section");
    }
    const uint64_t esize = safetensors_dtype_size(t.dtype);
    if (esize != 0 && (elements > data_size || t.end - t.begin != elements * esize)) {
      throw input_error(path, "tensor " + name + " has " + std::to_string(t.end - t.begin) +
                                  " bytes of data for its shape, which needs " +
                                  (elements > data_size ? std::string("more than the file holds")
                                                        : std::to_string(elements * esize)));
    }
    tensors_[name] = std::move(t);
  }
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsFile::check_dtype(const SafetensorsTensor& t) const {
  if (t.dtype != "F32" && t.dtype != "F16" && t.dtype != "BF16") {
    throw input_error(path(), "tensor " + t.name + " has unsupported dtype " + t.dtype +
                                  " (supported: F32, F16, BF16)");
  }
}

const uint8_t* SafetensorsFile::raw(const SafetensorsTensor& t) const {
  return file_->range(data_offset_ + t.begin, t.end - t.begin, "tensor " + t.name);
}

void SafetensorsFile::read_f32(const SafetensorsTensor& t, float* dst) const {
  check_dtype(t);
  const uint8_t* src = raw(t);
  const int64_t n = static_cast<int64_t>(t.elements());
  const uint64_t esize = safetensors_dtype_size(t.dtype);
  constexpr int64_t kChunk = 1 << 16;  // weights per work item
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (n_chunks > 8)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t first = c * kChunk;
    const std::size_t count = static_cast<std::size_t>(std::min(kChunk, n - first));
    const uint8_t* s = src + first * esize;
    if (t.dtype == "F32") {
      std::memcpy(dst + first, s, count * sizeof(float));
    } else if (t.dtype == "F16") {
      dequantize_f16(s, dst + first, count);
    } else {
      dequantize_bf16(s, dst + first, count);
    }
  }
}

}  // namespace kvs
