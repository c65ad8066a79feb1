// Attention: dot-product scores, softmax (kernels/softmax.h), value mix; one query row, or a
// causal block of prompt rows in groups of 18 queries over chunks of keys, tiled as 9 queries x
// 16 packed keys with AVX-512's 16-wide vectors, 6 x 16 with 8-wide ones (kernels/simd.h).
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/half.h"
#include "kernels/simd.h"
#include "kernels/softmax.h"

namespace kvs::ops {
namespace {

inline f32x8 splat(float x) { return f32x8{x, x, x, x, x, x, x, x}; }

// A tile is 6 queries x 16 keys (scores) or 6 queries x 16 components (value mix): 12
// accumulators, 2 vectors of keys or values and a broadcast fit AVX2's 16 registers, 8 loads per
// 12 multiply-adds. 4 x 24 took all 16 registers, so GCC loaded the keys or values again for every
// query as a memory operand (16 loads per 12): prefill attention on SmolLM2's shape went from
// 64-71 to 95-108 GFLOP/s with the same sums in the same order. Built for AVX-512 (two 512-bit
// multiply-adds a cycle on Zen 5), a tile is 9 queries x one 16-wide vector of keys, or x two of
// value components: up to 18 of its 32 registers. On one SmolLM2-shaped layer (bench_prefill):
// 150-190 GFLOP/s with the 8-wide tiles, 177-226 with 18 x 1, 220-253 with 9 x 1, 241-284 with
// 9 x 2 for the values.
constexpr int kRows = kLanes == 16 ? 9 : 6;  // queries per tile (tiles are of fvec)
static_assert(kPanelKeys % kLanes == 0);

constexpr int kKeys = kPanelKeys;  // keys per tile: one panel, a whole number of vectors
constexpr int kGroupRows = kCausalGroupRows;  // a whole number of tiles
static_assert(kGroupRows % kRows == 0);
constexpr int kChunkKeys = 112;  // keys per chunk (whole panels): 28 KB of keys or values at head_dim 64

// sc[r * ld + j] = dot(q_r, key jb + j) for the kRows query rows qr[r] and the n keys from jb
// (both multiples of kKeys), one panel of kKeys packed keys at a time (see attention.h).
void tile_scores(float* sc, long ld, int n, const float* const* qr, const float* keys_p, int jb, int head_dim) {
  constexpr int kVecs = kKeys / kLanes;
  for (int j = 0; j < n; j += kKeys) {
    fvec acc[kRows][kVecs] = {};
    const float* kp = keys_p + static_cast<long>(jb + j) * head_dim;  // [head_dim, kKeys]
    for (int d = 0; d < head_dim; ++d, kp += kKeys) {
      fvec k[kVecs];
      for (int u = 0; u < kVecs; ++u) k[u] = load_as<fvec>(kp + kLanes * u);
#pragma GCC unroll 18
      for (int r = 0; r < kRows; ++r) {
        const float qd = qr[r][d];
        for (int u = 0; u < kVecs; ++u) acc[r][u] += qd * k[u];
      }
    }
    for (int r = 0; r < kRows; ++r)
      for (int u = 0; u < kVecs; ++u) store_as(sc + r * ld + j + kLanes * u, acc[r][u]);
  }
}

// The sum of v's eight lanes: halves added, then quarters, then neighbours.
inline float lane_sum(f32x8 v) {
  const f32x8 h = v + __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
  const f32x8 q = h + __builtin_shufflevector(h, h, 2, 3, 0, 1, 2, 3, 0, 1);
  return q[0] + q[1];
}

// Vector registers the code generator can use for f32x8: AVX-512's encodings reach 32 (for 8-wide
// vectors too), AVX2's 16.
#ifdef __AVX512VL__
constexpr int kVectorRegisters = 32;
#else
constexpr int kVectorRegisters = 16;
#endif

// Query heads of a KV head that attend_rows_part works together: each key and value loaded serves
// all of them.
constexpr int kHeadGroup = 4;

// How far ahead decode attention asks for the keys and values it will read (software prefetch
// into L1), in bytes of the key or value stream: 32 rows of head size 64. A SmolLM2-shaped decode
// at 4K keys, engines alternating in one process: 0.87 -> 0.91-0.92 of the bandwidth limit at
// ~52 GB/s and 0.70-0.75 -> 0.79-0.81 at ~84 (8 and 16 rows ahead gained less, 64 and 96 no more).
constexpr int kPrefetchBytes = 8192;

// Asks for the `bytes` from p (whole cache lines).
inline void prefetch_bytes(const void* p, int bytes) {
  for (int b = 0; b < bytes; b += 64) prefetch_ahead(p, b);
}

// Output vectors per head in one value pass over NQ heads: NQ accumulators each, the NQ heads'
// probabilities and one value vector in registers.
template <int NQ>
constexpr int mix_vectors() {
  constexpr int fit = (kVectorRegisters - NQ - 1) / NQ;
  return fit >= 8 ? 8 : fit >= 4 ? 4 : fit >= 2 ? 2 : 1;
}

// For each of NQ heads i: out[i * out_stride + d0 ..][8 * NV] = sum_{j0 <= j < j1}
// probs[i * probs_stride + j] * value(j)[d0 ..], the output vectors in registers across all keys
// (an axpy per key loaded and stored them each time) and each value vector loaded once for all
// heads. Keys in order, so every head's sums are the same whatever NQ. Keys and values of
// element types KE and VE (float, f16, bf16).
template <int NQ, int NV, class KE, class ValueRow>
void mix_pass(float* out, long out_stride, const float* probs, long probs_stride, int j0, int j1, int d0,
              int head_dim, ValueRow value, const void* next_keys) {
  using VE = std::remove_cvref_t<decltype(*value(0))>;
  constexpr int part_bytes = static_cast<int>(sizeof(VE)) * 8 * NV;  // of a row this pass reads
  f32x8 acc[NQ][NV] = {};
  const int ahead = std::max(1, kPrefetchBytes / part_bytes);
  for (int j = j0; j < j1; ++j) {
    if (j + ahead < j1) prefetch_bytes(value(j + ahead) + d0, part_bytes);
    else if (next_keys)  // on into the caller's next keys (as bytes past next_keys: it may be any address)
      for (int b = 0; b < part_bytes; b += 64)
        prefetch_ahead(next_keys, (static_cast<std::size_t>(j + ahead - j1) * head_dim + d0) * sizeof(KE) + b);
    f32x8 p[NQ];
    for (int i = 0; i < NQ; ++i) p[i] = splat(probs[i * probs_stride + j]);
    const VE* v = value(j) + d0;
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) {
      const f32x8 vv = load8(v + 8 * u);
      for (int i = 0; i < NQ; ++i) acc[i][u] += p[i] * vv;
    }
  }
  for (int i = 0; i < NQ; ++i)
    for (int u = 0; u < NV; ++u) store_as(out + i * out_stride + d0 + 8 * u, acc[i][u]);
}

// mix_pass over all head_dim components (HD when not 0: a constant, its loops unrolled): passes of
// mix_vectors<NQ>() vectors, then any whole vectors left one at a time, then the components past
// the last whole vector one by one.
template <int NQ, int HD, class KE, class ValueRow>
void mix_values(float* out, long out_stride, const float* probs, long probs_stride, int j0, int j1, int head_dim,
                ValueRow value, const void* next_keys) {
  if (HD) head_dim = HD;
  constexpr int NV = mix_vectors<NQ>();
  const int hd8 = head_dim / 8 * 8;
  int d0 = 0;
  for (; d0 + 8 * NV <= hd8; d0 += 8 * NV)
    mix_pass<NQ, NV, KE>(out, out_stride, probs, probs_stride, j0, j1, d0, head_dim, value, next_keys);
  for (; d0 < hd8; d0 += 8)
    mix_pass<NQ, 1, KE>(out, out_stride, probs, probs_stride, j0, j1, d0, head_dim, value, next_keys);
  for (int d = hd8; d < head_dim; ++d)
    for (int i = 0; i < NQ; ++i) {
      float s = 0.0f;
      for (int j = j0; j < j1; ++j) s += probs[i * probs_stride + j] * to_f32(value(j)[d]);
      out[i * out_stride + d] = s;
    }
}

// probs[i * probs_stride + j] = score.scale * q_i . key(j) for NQ heads (q_i = q + i * head_dim) and
// j0 <= j < j1 (head_dim = HD when HD is not 0), one key at a time, its row read front to back
// for each head (the heads after the first find it in L1). Four keys at a time, their rows
// interleaved in 8-float steps and each step loaded once for all heads, read stories110M's cache
// slower on the 2026-11-28 host: decode 0.963 -> 0.972 of the limit after 512 tokens at ~33 GB/s,
// 0.856 -> 0.903 at ~55 (in-process A/B; docs/performance.md).
template <int NQ, int HD, class KeyRow, class ValueRow>
void score_keys(float* probs, long probs_stride, const float* q, int j0, int j1, int head_dim, Scoring score,
                KeyRow key, ValueRow value) {
  if (HD) head_dim = HD;
  using KE = std::remove_cvref_t<decltype(*key(0))>;
  using VE = std::remove_cvref_t<decltype(*value(0))>;
  const int hd16 = head_dim / 16 * 16, hd8 = head_dim / 8 * 8;  // whole 8-wide vectors, in pairs
  const int key_bytes = static_cast<int>(sizeof(KE)) * head_dim, value_bytes = static_cast<int>(sizeof(VE)) * head_dim;
  const int ahead = std::max(1, kPrefetchBytes / key_bytes);  // keys
  for (int j = j0; j < j1; ++j) {
    const int ja = j + ahead;  // the range's keys ahead, then on into its values, which the mix reads next
    if (ja < j1) prefetch_bytes(key(ja), key_bytes);
    else if (ja - j1 < j1 - j0) prefetch_bytes(value(j0 + (ja - j1)), value_bytes);
    const KE* k = key(j);
    for (int i = 0; i < NQ; ++i) {
      const float* qi = q + i * head_dim;
      f32x8 even = {}, odd = {};
      int d = 0;
      for (; d < hd16; d += 16) {
        even += load_as<f32x8>(qi + d) * load8(k + d);
        odd += load_as<f32x8>(qi + d + 8) * load8(k + d + 8);
      }
      if (d < hd8) even += load_as<f32x8>(qi + d) * load8(k + d);
      float s = lane_sum(even + odd);
      for (d = hd8; d < head_dim; ++d) s += qi[d] * to_f32(k[d]);
      probs[i * probs_stride + j] = score.scale * s;
    }
  }
}

// The value mix of a tile's kRows query rows at once, so that each value vector loaded serves
// every row: out_r[d0 .. d0 + NV vectors of V) (+)= sum_{j < n} sc[r * ld + j] * values_j, keys
// in order, continuing the sums already in out when `more`. The rows' probs are zero outside each
// row's own keys, so every row runs over the tile's whole key range with the same nonzero terms
// in the same order. Rows r < nr are stored.
template <class V, int NV>
void mix_tile_pass(float* const* out, const float* sc, long ld, int n, int nr, int d0, const float* values,
                   long v_stride, bool more) {
  constexpr int lanes = sizeof(V) / sizeof(float);
  V acc[kRows][NV] = {};
  if (more)
    for (int r = 0; r < kRows; ++r)
      for (int u = 0; u < NV; ++u) acc[r][u] = load_as<V>(out[r] + d0 + lanes * u);
  const float* v = values + d0;
  for (int j = 0; j < n; ++j, v += v_stride) {
    V vv[NV];
    for (int u = 0; u < NV; ++u) vv[u] = load_as<V>(v + lanes * u);
#pragma GCC unroll 18
    for (int r = 0; r < kRows; ++r) {
      const float p = sc[r * ld + j];
      for (int u = 0; u < NV; ++u) acc[r][u] += p * vv[u];
    }
  }
  for (int r = 0; r < nr; ++r)
    for (int u = 0; u < NV; ++u) store_as(out[r] + d0 + lanes * u, acc[r][u]);
}

// mix_tile_pass over all head_dim components: two tile vectors at a time (32 with AVX-512, 16
// otherwise), then one, then 8, then one by one.
void mix_tile(float* const* out, const float* sc, long ld, int n, int nr, int head_dim, const float* values,
              long v_stride, bool more) {
  int d0 = 0;
  for (; d0 + 2 * kLanes <= head_dim; d0 += 2 * kLanes)
    mix_tile_pass<fvec, 2>(out, sc, ld, n, nr, d0, values, v_stride, more);
  if (d0 + kLanes <= head_dim) mix_tile_pass<fvec, 1>(out, sc, ld, n, nr, d0, values, v_stride, more), d0 += kLanes;
  if (d0 + 8 <= head_dim) mix_tile_pass<f32x8, 1>(out, sc, ld, n, nr, d0, values, v_stride, more), d0 += 8;
  for (; d0 < head_dim; ++d0)
    for (int r = 0; r < nr; ++r) {
      float s = more ? out[r][d0] : 0.0f;
      for (int j = 0; j < n; ++j) s += sc[r * ld + j] * values[(long)j * v_stride + d0];
      out[r][d0] = s;
    }
}

// attend_rows_part over rows key(j) / value(j), j in [j0, j1) (see below).
template <int HD, class KeyRow, class ValueRow>
void attend_part(float* part_out, long out_stride, float* probs, long probs_stride, float* m, float* l,
                 long stat_stride, const float* q_all, int n_q, KeyRow key, ValueRow value, int j0, int j1,
                 int head_dim, Scoring score, const void* next_keys) {
  using KE = std::remove_cvref_t<decltype(*key(0))>;
  if (HD) head_dim = HD;
  for (int i0 = 0; i0 < n_q; i0 += kHeadGroup) {
    auto heads = [&]<int NQ>() {
      score_keys<NQ, HD>(probs + i0 * probs_stride, probs_stride, q_all + static_cast<long>(i0) * head_dim, j0, j1,
                         head_dim, score, key, value);
      for (int i = i0; i < i0 + NQ; ++i) {
        softcap(probs + i * probs_stride + j0, j1 - j0, score.softcap);
        l[i * stat_stride] = exp_shifted(probs + i * probs_stride + j0, j1 - j0, &m[i * stat_stride]);
      }
      // The last group's values end the range: then the next range's keys are read.
      mix_values<NQ, HD, KE>(part_out + i0 * out_stride, out_stride, probs + i0 * probs_stride, probs_stride, j0, j1,
                         head_dim, value, i0 + NQ >= n_q ? next_keys : nullptr);
    };
    switch (std::min(kHeadGroup, n_q - i0)) {
      case 4: heads.template operator()<4>(); break;
      case 3: heads.template operator()<3>(); break;
      case 2: heads.template operator()<2>(); break;
      default: heads.template operator()<1>(); break;
    }
  }
}

}  // namespace

// The query heads of the KV head in groups of up to kHeadGroup: scores one key at a time for the
// group (the key's row read from memory once, from L1 for the group's other heads), the softmax
// of each head's range, then the values in one pass with each value vector loaded once for the
// group and the outputs in registers (a second group finds the range's keys and values in L2).
// Over a stories110M-shaped cache at 512 keys (one thread, the rows cold): 0.45 of a plain read
// of the same bytes before 2026-11-24, about 0.7 after the constant head sizes (1.5x), the
// scores' lanes summed by shuffles and the index-free run; a SmolLM2-shaped one at 4K keys (three
// heads a KV head), where the heads used to take turns over 64-key blocks, went from 15.6 to 6.5
// ms a token.
void attend_rows_part(float* part_out, long out_stride, float* probs, long probs_stride, float* m, float* l,
                      long stat_stride, const float* q_all, int n_q, RowData keys, RowData values,
                      const int32_t* rows, int j0, int j1, int head_dim, Scoring score, const void* next_keys) {
  // A range of consecutive rows (a cache nothing was evicted from) is addressed without the list.
  bool run = true;
  for (int j = j0; j < j1; ++j) run &= rows[j] == rows[j0] + (j - j0);
  const long first = run && j1 > j0 ? rows[j0] - j0 : 0;  // a run's row of key j: first + j
  auto part = [&]<int HD>(auto key, auto value) {
    attend_part<HD>(part_out, out_stride, probs, probs_stride, m, l, stat_stride, q_all, n_q, key, value, j0, j1,
                    head_dim, score, next_keys);
  };
  // Common head sizes compiled as constants: their loops unrolled, a run read ~1.5x faster.
  auto sized = [&](auto key, auto value) {
    if (head_dim == 64) part.template operator()<64>(key, value);
    else if (head_dim == 128) part.template operator()<128>(key, value);
    else part.template operator()<0>(key, value);
  };
  // Rows of keys and values as element types KE and VE.
  auto typed = [&]<class KE, class VE>() {
    const KE* k = static_cast<const KE*>(keys.data);
    const VE* v = static_cast<const VE*>(values.data);
    if (run) {
      sized([=](int j) { return k + (first + j) * head_dim; }, [=](int j) { return v + (first + j) * head_dim; });
    } else {
      sized([=](int j) { return k + static_cast<long>(rows[j]) * head_dim; },
            [=](int j) { return v + static_cast<long>(rows[j]) * head_dim; });
    }
  };
  // The pairs a cache reads: one type for both, or fp32 keys (rotated by slot) over 16-bit values.
  using enum RowType;
  if (keys.type == F32 && values.type == F32) typed.template operator()<float, float>();
  else if (keys.type == F16 && values.type == F16) typed.template operator()<f16, f16>();
  else if (keys.type == BF16 && values.type == BF16) typed.template operator()<bf16, bf16>();
  else if (keys.type == F32 && values.type == F16) typed.template operator()<float, f16>();
  else if (keys.type == F32 && values.type == BF16) typed.template operator()<float, bf16>();
  else throw std::logic_error("attend_rows_part: 16-bit keys over values of another type");
}

float attend_rows_merge(float* out, float* probs, int n_keys, int seg_keys, const float* part_out, const float* m,
                        const float* l, int n_parts, int head_dim) {
  float max = m[0];
  for (int p = 1; p < n_parts; ++p) max = std::max(max, m[p]);
  float sum = 0.0f;
  for (int p = 0; p < n_parts; ++p) sum += l[p] * std::exp(m[p] - max);
  const float inv = 1.0f / sum;
  for (int d = 0; d < head_dim; ++d) out[d] = 0.0f;
  for (int p = 0; p < n_parts; ++p) {
    const float w = n_parts == 1 ? inv : std::exp(m[p] - max) * inv;  // this range's share
    const float* po = part_out + static_cast<long>(p) * head_dim;
    for (int d = 0; d < head_dim; ++d) out[d] += w * po[d];
    float* pr = probs + static_cast<long>(p) * seg_keys;
    const int n = std::min(seg_keys, n_keys - p * seg_keys);
#pragma omp simd
    for (int j = 0; j < n; ++j) pr[j] *= w;
  }
  return max + std::log(sum);
}

float attend_rows(float* out, float* probs, const float* q, const float* keys,
                  const float* values, const int32_t* rows, int n_keys, int head_dim, Scoring score) {
  thread_local std::vector<float> part;  // [head_dim] the unnormalized value mix
  part.resize(head_dim);
  float m = 0.0f, l = 0.0f;
  attend_rows_part(part.data(), 0, probs, 0, &m, &l, 0, q, 1, keys, values, rows, 0, n_keys, head_dim, score);
  return attend_rows_merge(out, probs, n_keys, n_keys, part.data(), &m, &l, 1, head_dim);
}

void pack_key_panels(float* keys_p, const float* keys, long k_stride, int n, int head_dim) {
  const int panels = (n + kPanelKeys - 1) / kPanelKeys;
  for (int p = 0; p < panels; ++p) {
    float* panel = keys_p + static_cast<long>(p) * head_dim * kPanelKeys;  // [head_dim, kPanelKeys]
    for (int jj = 0; jj < kPanelKeys; ++jj) {
      const int j = p * kPanelKeys + jj;
      for (int d = 0; d < head_dim; ++d) panel[d * kPanelKeys + jj] = j < n ? keys[j * k_stride + d] : 0.0f;
    }
  }
}

void attend_causal_block(float* out, long out_stride, float* probs, float* lse, const float* q, long q_stride,
                         const float* keys_p, const float* values, long v_stride, int q0, int nq, int head_dim,
                         int window, Scoring score, int block) {
  if (block <= 0 || block > nq) block = nq;
  const int groups = (nq + kGroupRows - 1) / kGroupRows;
  auto lo_of = [window](int pos) { return window > 0 ? std::max(0, pos - window + 1) : 0; };
#pragma omp parallel for schedule(dynamic, 1) if (static_cast<long>(nq) * (q0 + nq) * head_dim >= (1L << 15))
  for (int grp = 0; grp < groups; ++grp) {
    const int g0 = grp * kGroupRows, ng = std::min(kGroupRows, nq - g0);
    // Keys any row of the group reads lie in jb..je-1; scores run over whole panels jb..jb+ns-1.
    const int jb = lo_of(q0 + g0) / kKeys * kKeys, je = q0 + g0 + ng;
    const int n = je - jb, ns = (n + kKeys - 1) / kKeys * kKeys, tiles = (ng + kRows - 1) / kRows;
    thread_local std::vector<float> sc;  // [kGroupRows, ns] scores, then probabilities
    sc.resize(static_cast<size_t>(kGroupRows) * ns);
    const float* qr[kGroupRows];  // rows past ng repeat the last row
    float* out_rows[kGroupRows];
    for (int r = 0; r < kGroupRows; ++r) {
      const int i = g0 + std::min(r, ng - 1);
      qr[r] = q + i * q_stride;
      out_rows[r] = out + i * out_stride;
    }
    // Key chunk by key chunk, every tile of the group: a chunk's keys and values come from
    // memory once for all the group's rows.
    for (int c = 0; c < ns; c += kChunkKeys)
      for (int t = 0; t < tiles; ++t)
        tile_scores(sc.data() + (long)t * kRows * ns + c, ns, std::min(kChunkKeys, ns - c), qr + t * kRows, keys_p,
                    jb + c, head_dim);
    for (int r = 0; r < ng; ++r) {
      const int pos = q0 + g0 + r, lo = lo_of(pos);
      float* row = sc.data() + (long)r * ns;  // row[j - jb] for key j
      score.apply(row + (lo - jb), pos - lo + 1);
      lse[g0 + r] = softmax(row + (lo - jb), pos - lo + 1);
      std::fill(row, row + (lo - jb), 0.0f);
      std::fill(row + (pos + 1 - jb), row + n, 0.0f);
      // Row i of block s, whose rows are q0 + (s + 1) * block keys long (the last block's q0 + nq).
      const int i = g0 + r, sb = i / block, len = q0 + std::min((sb + 1) * block, nq);
      float* pr = probs + causal_block_offset(q0, block, sb) + (long)(i - sb * block) * len;  // [len]
      const int copied = std::min(je, len) - jb;  // keys past len are past pos: zero
      std::fill(pr, pr + jb, 0.0f);
      std::copy(row, row + copied, pr + jb);
      std::fill(pr + jb + copied, pr + len, 0.0f);
    }
    for (int c = 0; c < n; c += kChunkKeys)
      for (int t = 0; t < tiles; ++t)
        mix_tile(out_rows + t * kRows, sc.data() + (long)t * kRows * ns + c, ns, std::min(kChunkKeys, n - c),
                 std::min(kRows, ng - t * kRows), head_dim, values + (long)(jb + c) * v_stride, v_stride, c > 0);
  }
}

}  // namespace kvs::ops
