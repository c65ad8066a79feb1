// Quantized panels (quant_panels.h): packing from GGML blocks or 16-bit floats with a check of
// every weight, and the expansions the products read them through, with AVX2's byte-to-int
// widening where the build has it (GCC's vector conversion of 8 bytes is done lane by lane) and
// 16-bit floats widened by kernels/half.h.
#include "kernels/quant_panels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#ifdef __AVX2__
#include <immintrin.h>
#endif

#include "kernels/half.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/simd.h"

namespace kvs::ops {
namespace {

constexpr int kPanel = kPanelRows;
constexpr int kGroups = kPanel / 8;  // 8-row groups of a panel column
constexpr int kBlock = kQuantBlock;  // columns of a panel block

using i32x8 = int32_t __attribute__((vector_size(32)));

constexpr bool has_offset(QuantKind k) {
  return k == QuantKind::Int8Offset || k == QuantKind::Nibble || k == QuantKind::NibbleHalves;
}
constexpr bool nibbles(QuantKind k) {
  return k == QuantKind::Nibble || k == QuantKind::NibbleCentred || k == QuantKind::NibbleHalves;
}
constexpr int sub_blocks(QuantKind k) { return k == QuantKind::Int8Halves || k == QuantKind::NibbleHalves ? 2 : 1; }
constexpr int column_bytes(QuantKind k) { return nibbles(k) ? kPanel / 2 : kPanel; }
constexpr std::size_t header_bytes(QuantKind k) {
  return (has_offset(k) ? 2 : 1) * sub_blocks(k) * kPanel * sizeof(float);
}
constexpr std::size_t block_bytes(QuantKind k) { return header_bytes(k) + kBlock * column_bytes(k); }
constexpr bool wide(QuantKind k) { return k == QuantKind::F16 || k == QuantKind::BF16; }  // 16-bit floats
constexpr int kWideColumnBytes = kPanel * 2;  // a 16-bit panel's column
template <QuantKind K>
constexpr std::size_t panel_bytes(int cols) {
  return wide(K) ? static_cast<std::size_t>(cols) * kWideColumnBytes
                 : static_cast<std::size_t>(cols / kBlock) * block_bytes(K);
}

// Eight bytes at p widened to int32, signed or not.
inline i32x8 widen_s8(const uint8_t* p) {
#ifdef __AVX2__
  return reinterpret_cast<i32x8>(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
  i32x8 v;
  for (int i = 0; i < 8; ++i) v[i] = static_cast<int8_t>(p[i]);
  return v;
#endif
}
inline i32x8 widen_u8(const uint8_t* p) {
#ifdef __AVX2__
  return reinterpret_cast<i32x8>(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
  i32x8 v;
  for (int i = 0; i < 8; ++i) v[i] = p[i];
  return v;
#endif
}

// The 16-bit float at p (little-endian) as fp32, exactly.
template <QuantKind K>
inline float widen16_one(const uint8_t* p) {
  return to_f32(load_as<std::conditional_t<K == QuantKind::F16, f16, bf16>>(p));
}
// The eight at p.
template <QuantKind K>
inline f32x8 widen16(const uint8_t* p) {
  if constexpr (K == QuantKind::F16) return widen8_f16(p);
  else return widen8_bf16(p);
}

// Rows 8u .. 8u+7 of a block column `col` expanded to weights: q*s (+ o), the dequantizer's
// d*q (+ m) (both products contract alike into one multiply-add where the build has FMA).
template <QuantKind K>
inline f32x8 expand(const uint8_t* col, int u, f32x8 s, f32x8 o) {
  i32x8 q;
  if constexpr (nibbles(K)) {
    constexpr int half = kGroups / 2;
    const i32x8 b = widen_u8(col + 8 * (u % half));
    q = u < half ? (b & 15) : (b >> 4);
    if constexpr (K == QuantKind::NibbleCentred) q -= 8;
  } else {
    q = widen_s8(col + 8 * u);
  }
  const f32x8 qf = __builtin_convertvector(q, f32x8);
  if constexpr (has_offset(K)) return qf * s + o;
  return qf * s;
}

// A sub-block's per-row factors as 8-row groups.
struct BlockFactors {
  f32x8 s[kGroups], o[kGroups];
};
template <QuantKind K>
inline BlockFactors factors(const uint8_t* block, int sub) {
  BlockFactors f{};
  const float* scale = reinterpret_cast<const float*>(block) + sub * kPanel;
  const float* offset = scale + sub_blocks(K) * kPanel;
  for (int u = 0; u < kGroups; ++u) {
    f.s[u] = load_as<f32x8>(scale + 8 * u);
    if constexpr (has_offset(K)) f.o[u] = load_as<f32x8>(offset + 8 * u);
  }
  return f;
}

template <QuantKind K>
void to_f32(float* panel, const uint8_t* src, int cols) {
  constexpr int width = kBlock / sub_blocks(K);
  for (int c0 = 0; c0 < cols; c0 += kBlock, src += block_bytes(K)) {
    const uint8_t* q = src + header_bytes(K);
    for (int sub = 0; sub < sub_blocks(K); ++sub) {
      const BlockFactors f = factors<K>(src, sub);
      for (int k = sub * width; k < (sub + 1) * width; ++k)
        for (int u = 0; u < kGroups; ++u)
          store_as(panel + static_cast<long>(c0 + k) * kPanel + 8 * u,
                   expand<K>(q + k * column_bytes(K), u, f.s[u], f.o[u]));
    }
  }
}

template <QuantKind K>
void row_of(float* out, const uint8_t* src, int cols, int i) {
  constexpr int width = kBlock / sub_blocks(K);
  const int u = i / 8, lane = i % 8;
  for (int c0 = 0; c0 < cols; c0 += kBlock, src += block_bytes(K)) {
    const uint8_t* q = src + header_bytes(K);
    for (int sub = 0; sub < sub_blocks(K); ++sub) {
      const BlockFactors f = factors<K>(src, sub);
      for (int k = sub * width; k < (sub + 1) * width; ++k)
        out[c0 + k] = expand<K>(q + k * column_bytes(K), u, f.s[u], f.o[u])[lane];
    }
  }
}

// How far ahead of its loads the dot asks for its stream, as matmul.cpp's panel_dot does.
constexpr std::size_t kPrefetchBytes = 4096;

template <QuantKind K>
void dot(float* y, const uint8_t* src, const float* x, int cols, int n_rows) {
  f32x8 even[kGroups] = {}, odd[kGroups] = {};
  constexpr int cb = column_bytes(K), width = kBlock / sub_blocks(K);
  for (int c0 = 0; c0 < cols; c0 += kBlock, src += block_bytes(K)) {
    for (std::size_t line = 0; line < block_bytes(K); line += 64) prefetch_ahead(src, kPrefetchBytes + line);
    const uint8_t* q = src + header_bytes(K);
    for (int sub = 0; sub < sub_blocks(K); ++sub) {
      const BlockFactors f = factors<K>(src, sub);
      for (int k = sub * width; k < (sub + 1) * width; k += 2) {
        const float x0 = x[c0 + k], x1 = x[c0 + k + 1];
        for (int u = 0; u < kGroups; ++u) even[u] += expand<K>(q + k * cb, u, f.s[u], f.o[u]) * x0;
        for (int u = 0; u < kGroups; ++u) odd[u] += expand<K>(q + (k + 1) * cb, u, f.s[u], f.o[u]) * x1;
      }
    }
  }
  float out[kPanel];
  for (int u = 0; u < kGroups; ++u) store_as(out + 8 * u, even[u] + odd[u]);
  std::memcpy(y, out, sizeof(float) * n_rows);
}

// The 16-bit kinds' twins of to_f32, row_of and dot: dot sums as matmul.cpp's panel_dot does
// (even and odd columns in two chains, an odd last column into the even one).
template <QuantKind K>
void wide_to_f32(float* panel, const uint8_t* src, int cols) {
  for (long k = 0; k < cols; ++k)
    for (int u = 0; u < kGroups; ++u)
      store_as(panel + k * kPanel + 8 * u, widen16<K>(src + k * kWideColumnBytes + 16 * u));
}

template <QuantKind K>
void wide_row(float* out, const uint8_t* src, int cols, int i) {
  for (long k = 0; k < cols; ++k) out[k] = widen16_one<K>(src + k * kWideColumnBytes + 2 * i);
}

template <QuantKind K>
void wide_dot(float* y, const uint8_t* src, const float* x, int cols, int n_rows) {
  f32x8 even[kGroups] = {}, odd[kGroups] = {};
  int k = 0;
  for (; k + 2 <= cols; k += 2) {
    const uint8_t* w = src + static_cast<long>(k) * kWideColumnBytes;
    for (int line = 0; line < 2 * kWideColumnBytes; line += 64) prefetch_ahead(w, kPrefetchBytes + line);
    const float x0 = x[k], x1 = x[k + 1];
    for (int u = 0; u < kGroups; ++u) even[u] += widen16<K>(w + 16 * u) * x0;
    for (int u = 0; u < kGroups; ++u) odd[u] += widen16<K>(w + kWideColumnBytes + 16 * u) * x1;
  }
  if (k < cols) {
    const uint8_t* w = src + static_cast<long>(k) * kWideColumnBytes;
    for (int u = 0; u < kGroups; ++u) even[u] += widen16<K>(w + 16 * u) * x[k];
  }
  float out[kPanel];
  for (int u = 0; u < kGroups; ++u) store_as(out + 8 * u, even[u] + odd[u]);
  std::memcpy(y, out, sizeof(float) * n_rows);
}

// Panel p's weights expanded, checked bit for bit against w's (zero past the rows).
template <QuantKind K>
bool expands_to(const uint8_t* panel, const float* w, int rows, int cols, long p) {
  thread_local std::vector<float> got;  // [cols, kPanel], kept between panels
  got.resize(static_cast<std::size_t>(cols) * kPanel);
  if constexpr (wide(K)) wide_to_f32<K>(got.data(), panel, cols);
  else to_f32<K>(got.data(), panel, cols);
  for (int i = 0; i < kPanel; ++i) {
    const long r = p * kPanel + i;
    for (int k = 0; k < cols; ++k) {
      const float want = r < rows ? w[r * cols + k] : 0.0f;
      if (std::memcmp(&want, &got[static_cast<std::size_t>(k) * kPanel + i], sizeof want) != 0) return false;
    }
  }
  return true;
}

// Row `to` of the panels at dst becomes row `from` of those at src: its 16-bit weights, or in each
// block its factors and its quants (a nibble's place in its byte depending on the row).
template <QuantKind K>
void copy_row(uint8_t* dst, int to, const uint8_t* src, int from, int cols) {
  uint8_t* d = dst + static_cast<long>(to / kPanel) * panel_bytes<K>(cols);
  const uint8_t* s = src + static_cast<long>(from / kPanel) * panel_bytes<K>(cols);
  const int di = to % kPanel, si = from % kPanel;
  if constexpr (wide(K)) {
    for (long k = 0; k < cols; ++k)
      std::memcpy(d + k * kWideColumnBytes + 2 * di, s + k * kWideColumnBytes + 2 * si, 2);
    return;
  }
  constexpr int factor_rows = static_cast<int>(header_bytes(K) / (kPanel * sizeof(float)));
  for (int b = 0; b < cols / kBlock; ++b, d += block_bytes(K), s += block_bytes(K)) {
    for (int j = 0; j < factor_rows; ++j)
      std::memcpy(d + (j * kPanel + di) * sizeof(float), s + (j * kPanel + si) * sizeof(float), sizeof(float));
    for (int k = 0; k < kBlock; ++k) {
      uint8_t* dc = d + header_bytes(K) + k * column_bytes(K);
      const uint8_t* sc = s + header_bytes(K) + k * column_bytes(K);
      if constexpr (nibbles(K)) {
        constexpr int half = kPanel / 2;
        const int from_shift = si / half * 4, to_shift = di / half * 4;
        const int q = sc[si % half] >> from_shift & 15;
        dc[di % half] = static_cast<uint8_t>((dc[di % half] & ~(15 << to_shift)) | q << to_shift);
      } else {
        dc[di] = sc[si];
      }
    }
  }
}

// Calls fn.template operator()<K>() for the kind.
template <class Fn>
void with_kind(QuantKind k, Fn&& fn) {
  switch (k) {
    case QuantKind::Int8: fn.template operator()<QuantKind::Int8>(); break;
    case QuantKind::Int8Offset: fn.template operator()<QuantKind::Int8Offset>(); break;
    case QuantKind::Nibble: fn.template operator()<QuantKind::Nibble>(); break;
    case QuantKind::NibbleCentred: fn.template operator()<QuantKind::NibbleCentred>(); break;
    case QuantKind::Int8Halves: fn.template operator()<QuantKind::Int8Halves>(); break;
    case QuantKind::NibbleHalves: fn.template operator()<QuantKind::NibbleHalves>(); break;
    case QuantKind::F16: fn.template operator()<QuantKind::F16>(); break;
    case QuantKind::BF16: fn.template operator()<QuantKind::BF16>(); break;
    case QuantKind::None: break;
  }
}

}  // namespace

std::size_t quant_file_row_bytes(QuantFormat f, int cols) {
  switch (f) {
    case QuantFormat::Q8_0: return cols / kBlock * kQ8_0BlockBytes;
    case QuantFormat::Q4_0: return cols / kBlock * kQ4_0BlockBytes;
    case QuantFormat::Q4_1: return cols / kBlock * kQ4_1BlockBytes;
    case QuantFormat::Q5_0: return cols / kBlock * kQ5_0BlockBytes;
    case QuantFormat::Q5_1: return cols / kBlock * kQ5_1BlockBytes;
    case QuantFormat::Q2_K: return cols / kQuantSuperBlock * kQ2_KBlockBytes;
    case QuantFormat::Q3_K: return cols / kQuantSuperBlock * kQ3_KBlockBytes;
    case QuantFormat::Q4_K: return cols / kQuantSuperBlock * kQ4_KBlockBytes;
    case QuantFormat::Q5_K: return cols / kQuantSuperBlock * kQ5_KBlockBytes;
    case QuantFormat::Q6_K: return cols / kQuantSuperBlock * kQ6_KBlockBytes;
    case QuantFormat::IQ4_NL: return cols / kBlock * kIQ4_NLBlockBytes;
    case QuantFormat::IQ4_XS: return cols / kQuantSuperBlock * kIQ4_XSBlockBytes;
    case QuantFormat::F16:
    case QuantFormat::BF16: return static_cast<std::size_t>(cols) * 2;
  }
  return 0;
}

namespace {

// Sub-block `sub` of block b's (32 weights') scale and offset in a row of the file's blocks:
// w = s*q + o (sub is 0 for the formats of 32-weight blocks).
void block_factors(QuantFormat f, const uint8_t* row, int b, int sub, float& s, float& o) {
  constexpr int per_super = kQuantSuperBlock / kBlock;
  const int t = b % per_super * 2 + sub;  // the 16-weight sub-block in its super-block
  o = 0.0f;
  switch (f) {
    case QuantFormat::Q8_0: s = load_half(row + b * kQ8_0BlockBytes); return;
    case QuantFormat::Q4_0: s = load_half(row + b * kQ4_0BlockBytes); return;
    case QuantFormat::Q5_0: s = load_half(row + b * kQ5_0BlockBytes); return;
    case QuantFormat::Q4_1:
      s = load_half(row + b * kQ4_1BlockBytes);
      o = load_half(row + b * kQ4_1BlockBytes + 2);
      return;
    case QuantFormat::Q5_1:
      s = load_half(row + b * kQ5_1BlockBytes);
      o = load_half(row + b * kQ5_1BlockBytes + 2);
      return;
    case QuantFormat::Q2_K: {
      float min = 0.0f;
      q2_k_sub_block_factors(row + b / per_super * kQ2_KBlockBytes, t, s, min);
      o = -min;
      return;
    }
    case QuantFormat::Q3_K: s = q3_k_sub_block_scale(row + b / per_super * kQ3_KBlockBytes, t); return;
    case QuantFormat::Q6_K: s = q6_k_sub_block_scale(row + b / per_super * kQ6_KBlockBytes, t); return;
    case QuantFormat::IQ4_NL: s = load_half(row + b * kIQ4_NLBlockBytes); return;
    case QuantFormat::IQ4_XS:
      s = iq4_xs_sub_block_scale(row + b / per_super * kIQ4_XSBlockBytes, b % per_super);
      return;
    case QuantFormat::Q4_K:
    case QuantFormat::Q5_K: {
      const std::size_t super = f == QuantFormat::Q4_K ? kQ4_KBlockBytes : kQ5_KBlockBytes;
      float min = 0.0f;
      k4_sub_block_factors(row + b / per_super * super, b % per_super, s, min);
      o = -min;
      return;
    }
    case QuantFormat::F16:
    case QuantFormat::BF16: s = 1.0f; return;  // not block formats: pack_wide_panel packs them
  }
}

// The level for a zero scale: its product with the scale is a zero, whose sign (the file's
// q*(-0) is +0 for a negative q) must match v's where there is no offset to absorb it.
float zero_level(float v, float scale) { return std::signbit(v) != std::signbit(scale) ? -1.0f : 0.0f; }

// Packs panel p and checks each of its weights against w; false where one differs.
template <QuantKind K>
bool pack_panel(uint8_t* dst, QuantFormat f, const uint8_t* blocks, const float* w, int rows, int cols, long p) {
  constexpr int lo = nibbles(K) ? 0 : -128, hi = nibbles(K) ? 15 : 127;
  const std::size_t rb = quant_file_row_bytes(f, cols);
  uint8_t* block = dst;
  constexpr int subs = sub_blocks(K), width = kBlock / subs;
  for (int b = 0; b < cols / kBlock; ++b, block += block_bytes(K)) {
    std::memset(block, 0, block_bytes(K));
    float scale[subs][kPanel] = {}, offset[subs][kPanel] = {};
    uint8_t* q = block + header_bytes(K);
    for (int i = 0; i < kPanel; ++i) {
      const long r = p * kPanel + i;  // rows past the matrix: scale 0 and level 0, weights +0
      // Levels are whole numbers, so the reciprocal's rounding cannot move one to its neighbour
      // (and the check below would see it).
      float inverse[subs] = {};
      for (int sub = 0; sub < subs && r < rows; ++sub) {
        block_factors(f, blocks + r * rb, b, sub, scale[sub][i], offset[sub][i]);
        if (scale[sub][i] != 0.0f) inverse[sub] = 1.0f / scale[sub][i];
      }
      for (int k = 0; k < kBlock; ++k) {
        const float s = scale[k / width][i], o = offset[k / width][i];
        const float v = r < rows ? w[r * cols + b * kBlock + k] : 0.0f;
        const float level = s != 0.0f ? std::nearbyint((v - o) * inverse[k / width]) : zero_level(v, s);
        int n = std::isfinite(level) ? static_cast<int>(std::clamp(level, -1024.0f, 1024.0f)) : 0;
        if constexpr (K == QuantKind::NibbleCentred) n += 8;
        n = std::clamp(n, lo, hi);
        uint8_t* col = q + k * column_bytes(K);
        if constexpr (nibbles(K)) {
          if (i < kPanel / 2) col[i] |= static_cast<uint8_t>(n);
          else col[i - kPanel / 2] |= static_cast<uint8_t>(n << 4);
        } else {
          col[i] = static_cast<uint8_t>(static_cast<int8_t>(n));
        }
      }
    }
    std::memcpy(block, scale, sizeof scale);
    if constexpr (has_offset(K)) std::memcpy(block + sizeof scale, offset, sizeof offset);
  }
  return expands_to<K>(dst, w, rows, cols, p);
}

// The same for a 16-bit kind (`values`: W's 16-bit floats row-major), checked where w is given.
template <QuantKind K>
bool pack_wide_panel(uint8_t* dst, const uint8_t* values, const float* w, int rows, int cols, long p) {
  for (int i = 0; i < kPanel; ++i) {
    const long r = p * kPanel + i;
    for (long k = 0; k < cols; ++k) {
      uint8_t* to = dst + k * kWideColumnBytes + 2 * i;
      if (r < rows) std::memcpy(to, values + (r * cols + k) * 2, 2);
      else to[0] = to[1] = 0;
    }
  }
  return w == nullptr || expands_to<K>(dst, w, rows, cols, p);
}

// v[n] times f (QuantPanels::scale).
void times(float* v, std::size_t n, float f) {
  if (f == 1.0f) return;
  for (std::size_t i = 0; i < n; ++i) v[i] *= f;
}

}  // namespace

QuantKind quant_kind(QuantFormat f) {
  switch (f) {
    case QuantFormat::Q8_0:
    case QuantFormat::Q5_0:
    case QuantFormat::IQ4_NL:
    case QuantFormat::IQ4_XS: return QuantKind::Int8;
    case QuantFormat::Q5_1:
    case QuantFormat::Q5_K: return QuantKind::Int8Offset;
    case QuantFormat::Q4_1:
    case QuantFormat::Q4_K: return QuantKind::Nibble;
    case QuantFormat::Q4_0: return QuantKind::NibbleCentred;
    case QuantFormat::Q3_K:
    case QuantFormat::Q6_K: return QuantKind::Int8Halves;
    case QuantFormat::Q2_K: return QuantKind::NibbleHalves;
    case QuantFormat::F16: return QuantKind::F16;
    case QuantFormat::BF16: return QuantKind::BF16;
  }
  return QuantKind::None;
}

bool quant_exact(QuantFormat f) { return wide(quant_kind(f)); }

std::size_t quant_panel_bytes(QuantKind k, int cols) {
  std::size_t n = 0;
  with_kind(k, [&]<QuantKind K>() { n = panel_bytes<K>(cols); });
  return n;
}

std::size_t quant_bytes(QuantKind k, long rows, int cols) {
  return static_cast<std::size_t>(panel_count(rows)) * quant_panel_bytes(k, cols);
}

bool pack_quant_panels(uint8_t* out, QuantFormat f, const uint8_t* blocks, const float* w, int rows, int cols) {
  const QuantKind kind = quant_kind(f);
  const std::size_t panel_bytes = quant_panel_bytes(kind, cols);
  const long n = panel_count(rows);
  bool ok = true;
  with_kind(kind, [&]<QuantKind K>() {
#pragma omp parallel for schedule(dynamic, 4) reduction(&& : ok) if (static_cast<long>(rows) * cols >= (1L << 18))
    for (long p = 0; p < n; ++p) {
      uint8_t* panel = out + p * panel_bytes;
      if constexpr (wide(K)) ok = pack_wide_panel<K>(panel, blocks, w, rows, cols, p) && ok;
      else ok = pack_panel<K>(panel, f, blocks, w, rows, cols, p) && ok;
    }
  });
  return ok;
}

void quant_copy_row(uint8_t* dst, int to, const uint8_t* src, int from, QuantKind k, int cols) {
  with_kind(k, [&]<QuantKind K>() { copy_row<K>(dst, to, src, from, cols); });
}

bool quant_scale(uint8_t* bytes, QuantKind k, long rows, int cols, float f) {
  bool ok = true;
  with_kind(k, [&]<QuantKind K>() {
    const std::size_t total = static_cast<std::size_t>(panel_count(rows)) * panel_bytes<K>(cols);
    if constexpr (wide(K)) {
      std::vector<uint8_t> scaled(total);  // the panels times f, kept only if every weight is exact
      for (std::size_t i = 0; i < total && ok; i += 2) {
        const float v = widen16_one<K>(bytes + i) * f;
        const uint16_t h = K == QuantKind::F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
        scaled[i] = static_cast<uint8_t>(h & 0xff), scaled[i + 1] = static_cast<uint8_t>(h >> 8);
        const float back = widen16_one<K>(scaled.data() + i);
        ok = std::memcmp(&back, &v, sizeof v) == 0;
      }
      if (ok) std::memcpy(bytes, scaled.data(), total);
    } else {
      constexpr std::size_t factors = header_bytes(K) / sizeof(float);
      for (std::size_t b = 0; b < total; b += block_bytes(K)) {
        float header[factors];  // [S or 2S][kPanel]: the block's scales, then its offsets
        std::memcpy(header, bytes + b, sizeof header);
        for (float& v : header) v *= f;
        std::memcpy(bytes + b, header, sizeof header);
      }
    }
  });
  return ok;
}

void quant_panel_to_f32(float* panel, QuantPanels w, int cols, long p) {
  const uint8_t* src = w.bytes + p * quant_panel_bytes(w.kind, cols);
  with_kind(w.kind, [&]<QuantKind K>() {
    if constexpr (wide(K)) wide_to_f32<K>(panel, src, cols);
    else to_f32<K>(panel, src, cols);
  });
  times(panel, static_cast<std::size_t>(cols) * kPanel, w.scale);
}

void quant_row(float* out, QuantPanels w, int cols, int r) {
  const uint8_t* src = w.bytes + static_cast<long>(r / kPanel) * quant_panel_bytes(w.kind, cols);
  with_kind(w.kind, [&]<QuantKind K>() {
    if constexpr (wide(K)) wide_row<K>(out, src, cols, r % kPanel);
    else row_of<K>(out, src, cols, r % kPanel);
  });
  times(out, static_cast<std::size_t>(cols), w.scale);
}

void quant_panel_dot(float* y, QuantPanels w, long p, const float* x, int cols, int n_rows) {
  const uint8_t* src = w.bytes + p * quant_panel_bytes(w.kind, cols);
  with_kind(w.kind, [&]<QuantKind K>() {
    if constexpr (wide(K)) wide_dot<K>(y, src, x, cols, n_rows);
    else dot<K>(y, src, x, cols, n_rows);
  });
  times(y, static_cast<std::size_t>(n_rows), w.scale);
}

}  // namespace kvs::ops
