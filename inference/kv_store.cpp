// Per-(layer, KV head) K/V rows in one reserved arena beside their KvPositions, which says which
// row each entry sits in.
#include "inference/kv_store.h"

#include <cstring>
#include <new>
#include <string>

#include "inference/errors.h"
#include "inference/host_memory.h"
#include "kernels/quant.h"

namespace kvs {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
// Arenas up to this size are advised huge pages whole, from the first touch: the bench's
// stories110M shape at 1K context (72 MiB) is committed at its first token. Larger ones (SmolLM2
// at 8K: 360 MiB; any long context) would commit a 2 MiB page per slab that way, most of it empty
// for a short run, so their slabs get huge pages range by range as rows fill them.
constexpr std::size_t kEagerHugeArena = std::size_t{256} << 20;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// Elements at..at+n-1 of `slab` <- x[n], rounded to `type` (to nearest even).
void write_row(std::byte* slab, std::size_t at, const float* x, std::size_t n, ops::RowType type) {
  if (type == ops::RowType::F32) {
    std::memcpy(slab + 4 * at, x, n * sizeof(float));
    return;
  }
  uint16_t (*const encode)(float) = type == ops::RowType::F16 ? fp32_to_fp16 : fp32_to_bf16;
  for (std::size_t d = 0; d < n; ++d) {
    const uint16_t b = encode(x[d]);
    std::memcpy(slab + 2 * (at + d), &b, sizeof b);
  }
}

}  // namespace

KvStore::KvStore(int n_layers, int n_kv_heads, int head_dim, int max_len, ops::RowType type)
    : positions_(n_layers, n_kv_heads, max_len, "KvStore"), head_dim_(head_dim), type_(type) {
  // Slabs a cache line apart; slabs of 1 MiB and more start on 2 MiB boundaries (address space
  // only), so that each owns its huge pages.
  const std::size_t slab_bytes = round_up(static_cast<std::size_t>(max_len) * head_dim * element_bytes(type), 64);
  const std::size_t stride = slab_bytes >= kHugePage / 2 ? round_up(slab_bytes, kHugePage) : slab_bytes;
  slab_bytes_ = stride;
  const std::size_t slabs = static_cast<std::size_t>(n_layers) * n_kv_heads * 2;
  // "KV cache: cannot reserve 360.0 MiB of address space for 8192 positions (180 slabs of
  // 2.0 MiB); 120.0 MiB available"
  const auto too_large = [&](bool overflow) {
    return input_error("KV cache", "cannot reserve " +
                                       (overflow ? std::string("more than 16 EiB") : memory_size_text(arena_bytes_)) +
                                       " of address space for " + std::to_string(max_len) + " positions (" +
                                       std::to_string(slabs) + " slabs of " + memory_size_text(stride) + "); " +
                                       memory_left_text());
  };
  if (__builtin_mul_overflow(slabs, stride, &arena_bytes_)) throw too_large(true);
  try {
    arena_ = static_cast<std::byte*>(reserve_pages(arena_bytes_));
  } catch (const std::bad_alloc&) {
    throw too_large(false);
  }
  collapse_ = arena_bytes_ > kEagerHugeArena;
  if (!collapse_) advise_huge_pages(arena_, arena_bytes_);
}

KvStore::~KvStore() { release_pages(arena_, arena_bytes_); }

void KvStore::append(int layer, int kv_head, int32_t pos0, int n, const float* keys,
                     const float* values, long stride) {
  const std::size_t hd = static_cast<std::size_t>(head_dim_);
  append_rows(layer, kv_head, pos0, n, [&](int t, std::byte* k, std::byte* v, std::size_t at) {
    write_row(k, at, keys + t * stride, hd, type_);
    write_row(v, at, values + t * stride, hd, type_);
  });
}

void KvStore::append_stored(int layer, int kv_head, int32_t pos0, int n, const void* keys, const void* values) {
  const std::size_t row = static_cast<std::size_t>(head_dim_) * element_bytes(type_);
  append_rows(layer, kv_head, pos0, n, [&](int t, std::byte* k, std::byte* v, std::size_t at) {
    std::memcpy(k + at * element_bytes(type_), static_cast<const std::byte*>(keys) + t * row, row);
    std::memcpy(v + at * element_bytes(type_), static_cast<const std::byte*>(values) + t * row, row);
  });
}

template <class WriteEntry>
void KvStore::append_rows(int layer, int kv_head, int32_t pos0, int n, WriteEntry write) {
  const std::size_t first = positions_.size(layer, kv_head);
  const std::size_t used = positions_.rows_used(layer, kv_head);
  positions_.push(layer, kv_head, pos0, n);  // checks capacity and order first
  const std::span<const int32_t> rows = positions_.rows(layer, kv_head);
  std::byte* k = slab(layer, kv_head, 0);
  std::byte* v = slab(layer, kv_head, 1);
  for (int t = 0; t < n; ++t) write(t, k, v, static_cast<std::size_t>(rows[first + t]) * head_dim_);
  const std::size_t used_now = positions_.rows_used(layer, kv_head);
  if (collapse_ && used_now > used) {  // fresh rows used..used_now-1 were filled
    collapse_filled(k, used, used_now);
    collapse_filled(v, used, used_now);
  }
}

void KvStore::read_row(const std::byte* slab, int32_t row, float* out) const {
  const std::size_t n = static_cast<std::size_t>(head_dim_);
  const auto* from = reinterpret_cast<const uint8_t*>(slab) + static_cast<std::size_t>(row) * n * element_bytes(type_);
  switch (type_) {
    case ops::RowType::F32: std::memcpy(out, from, n * sizeof(float)); return;
    case ops::RowType::F16: dequantize_f16(from, out, n); return;
    case ops::RowType::BF16: dequantize_bf16(from, out, n); return;
  }
}

void KvStore::collapse_filled(std::byte* slab, std::size_t first, std::size_t last) const {
  const std::size_t stride = slab_bytes_;
  if (stride < kHugePage) return;  // small slabs share huge pages: left on small ones
  const std::size_t row = static_cast<std::size_t>(head_dim_) * element_bytes(type_);
  // A range turns huge once rows fill half of it: at most 1 MiB of a slab committed ahead of use.
  for (std::size_t r = first * row / kHugePage; r * kHugePage < last * row; ++r) {
    const std::size_t middle = r * kHugePage + kHugePage / 2;
    if (first * row < middle && middle <= last * row)
      collapse_huge_pages(slab + r * kHugePage, kHugePage);
  }
}

}  // namespace kvs
