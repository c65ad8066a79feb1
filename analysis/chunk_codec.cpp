// Shuffle + zlib packing of HDF5 chunks with libdeflate (2-3x zlib's speed at level 1 on fp16
// attention rows, and a better ratio); one compressor per thread, kept between calls.
#include "analysis/chunk_codec.h"

#include <libdeflate.h>

#include <memory>
#include <new>
#include <stdexcept>

namespace kvs {
namespace {

struct CompressorDeleter {
  void operator()(libdeflate_compressor* c) const { libdeflate_free_compressor(c); }
};

struct DecompressorDeleter {
  void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

libdeflate_compressor* compressor(int level) {
  thread_local std::unique_ptr<libdeflate_compressor, CompressorDeleter> c;
  thread_local int c_level = 0;
  if (!c || c_level != level) {
    c.reset(libdeflate_alloc_compressor(level));
    if (!c) throw std::bad_alloc();
    c_level = level;
  }
  return c.get();
}

libdeflate_decompressor* decompressor() {
  thread_local std::unique_ptr<libdeflate_decompressor, DecompressorDeleter> d;
  if (!d) {
    d.reset(libdeflate_alloc_decompressor());
    if (!d) throw std::bad_alloc();
  }
  return d.get();
}

}  // namespace

std::vector<uint8_t> pack_shuffle_deflate(std::span<const uint8_t> raw, std::size_t elem_size, int level) {
  if (elem_size == 0 || raw.size() % elem_size != 0) throw std::invalid_argument("pack_shuffle_deflate: partial element");
  if (level < 1 || level > 12) throw std::invalid_argument("pack_shuffle_deflate: level outside 1..12");
  const std::size_t n = raw.size() / elem_size;
  thread_local std::vector<uint8_t> shuffled;  // [elem_size, n] byte b of element i at b * n + i
  shuffled.resize(raw.size());
  for (std::size_t b = 0; b < elem_size; ++b) {
    uint8_t* out = shuffled.data() + b * n;
    const uint8_t* in = raw.data() + b;
    for (std::size_t i = 0; i < n; ++i) out[i] = in[i * elem_size];
  }
  libdeflate_compressor* c = compressor(level);
  std::vector<uint8_t> stored(libdeflate_zlib_compress_bound(c, shuffled.size()));
  const std::size_t size = libdeflate_zlib_compress(c, shuffled.data(), shuffled.size(), stored.data(), stored.size());
  if (size == 0) throw std::logic_error("pack_shuffle_deflate: output larger than libdeflate's bound");
  stored.resize(size);
  return stored;
}

bool unpack_shuffle_deflate(std::span<const uint8_t> stored, std::size_t elem_size, std::span<uint8_t> raw) {
  if (elem_size == 0 || raw.size() % elem_size != 0) throw std::invalid_argument("unpack_shuffle_deflate: partial element");
  thread_local std::vector<uint8_t> shuffled;  // [elem_size, n]
  shuffled.resize(raw.size());
  std::size_t size = 0;
  if (libdeflate_zlib_decompress(decompressor(), stored.data(), stored.size(), shuffled.data(), shuffled.size(),
                                 &size) != LIBDEFLATE_SUCCESS ||
      size != raw.size())
    return false;
  const std::size_t n = raw.size() / elem_size;
  for (std::size_t b = 0; b < elem_size; ++b) {
    const uint8_t* in = shuffled.data() + b * n;
    uint8_t* out = raw.data() + b;
    for (std::size_t i = 0; i < n; ++i) out[i * elem_size] = in[i];
  }
  return true;
}

}  // namespace kvs
