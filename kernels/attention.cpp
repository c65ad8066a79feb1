// Attention: dot-product scores, softmax (kernels/softmax.h), value mix; one query row, or a
// causal block of prompt rows tiled as 4 queries x 16 keys (8-wide GCC vector extensions).
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/softmax.h"

namespace kvs::ops {
namespace {

inline float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

using f32x8 = float __attribute__((vector_size(32)));

inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store8(float* p, f32x8 v) { std::memcpy(p, &v, sizeof v); }

constexpr int kRows = 4;   // queries per tile
constexpr int kKeys = 16;  // keys per tile

// sc[r * n + (j - jb)] = dot(q_r, key j) for the kRows query rows qr[r] and keys jb..jb+n-1.
void tile_scores(float* sc, int n, const float* const* qr, const float* keys_t, long kt_stride, int jb,
                 int head_dim) {
  int j = 0;
  for (; j + kKeys <= n; j += kKeys) {
    f32x8 acc[kRows][2] = {};
    const float* kt = keys_t + jb + j;
    for (int d = 0; d < head_dim; ++d, kt += kt_stride) {
      const f32x8 k0 = load8(kt), k1 = load8(kt + 8);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const float qd = qr[r][d];
        acc[r][0] += qd * k0;
        acc[r][1] += qd * k1;
      }
    }
    for (int r = 0; r < kRows; ++r) {
      store8(sc + (long)r * n + j, acc[r][0]);
      store8(sc + (long)r * n + j + 8, acc[r][1]);
    }
  }
  for (; j < n; ++j)
    for (int r = 0; r < kRows; ++r) {
      float s = 0.0f;
      for (int d = 0; d < head_dim; ++d) s += qr[r][d] * keys_t[d * kt_stride + jb + j];
      sc[(long)r * n + j] = s;
    }
}

// out[8 * NV] = sum_{j < n} probs[j] * value_row(j)[d0 .. d0 + 8 * NV), the NV output vectors in
// registers across all keys (an axpy per key loaded and stored them each time).
template <int NV, class ValueRow>
void mix_pass(float* out, const float* probs, int n, int d0, ValueRow value_row) {
  f32x8 acc[NV] = {};
  for (int j = 0; j < n; ++j) {
    const f32x8 p = f32x8{} + probs[j];
    const float* v = value_row(j) + d0;
#pragma GCC unroll 8
    for (int u = 0; u < NV; ++u) acc[u] += p * load8(v + 8 * u);
  }
  for (int u = 0; u < NV; ++u) store8(out + 8 * u, acc[u]);
}

// out[head_dim] = sum_{j < n} probs[j] * value_row(j)[0 .. head_dim), keys in order: 64
// components per pass, then any components past the last whole vector one by one.
template <class ValueRow>
void mix_values(float* out, const float* probs, int n, int head_dim, ValueRow value_row) {
  const int hd8 = head_dim / 8 * 8;
  for (int d0 = 0; d0 < hd8; d0 += 64) {
    switch (std::min(8, (hd8 - d0) / 8)) {
      case 8: mix_pass<8>(out + d0, probs, n, d0, value_row); break;
      case 7: mix_pass<7>(out + d0, probs, n, d0, value_row); break;
      case 6: mix_pass<6>(out + d0, probs, n, d0, value_row); break;
      case 5: mix_pass<5>(out + d0, probs, n, d0, value_row); break;
      case 4: mix_pass<4>(out + d0, probs, n, d0, value_row); break;
      case 3: mix_pass<3>(out + d0, probs, n, d0, value_row); break;
      case 2: mix_pass<2>(out + d0, probs, n, d0, value_row); break;
      default: mix_pass<1>(out + d0, probs, n, d0, value_row); break;
    }
  }
  for (int d = hd8; d < head_dim; ++d) {
    float s = 0.0f;
    for (int j = 0; j < n; ++j) s += probs[j] * value_row(j)[d];
    out[d] = s;
  }
}

// The value mix of a tile's kRows query rows at once, so that each value vector loaded serves
// every row (one row at a time read each value row kRows times, from L2 at long prompts):
// out_r[16 d-wide slice] = sum_{j < n} sc[r * n + j] * values_j, keys in order. The rows' probs
// are zero outside each row's own keys, so every row runs over the tile's whole key range with
// the same nonzero terms in the same order. Rows r < nr are stored.
template <int NV>
void mix_tile_pass(float* const* out, const float* sc, int n, int nr, int d0, const float* values, long v_stride) {
  f32x8 acc[kRows][NV] = {};
  const float* v = values + d0;
  for (int j = 0; j < n; ++j, v += v_stride) {
    f32x8 vv[NV];
    for (int u = 0; u < NV; ++u) vv[u] = load8(v + 8 * u);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const f32x8 p = f32x8{} + sc[(long)r * n + j];
      for (int u = 0; u < NV; ++u) acc[r][u] += p * vv[u];
    }
  }
  for (int r = 0; r < nr; ++r)
    for (int u = 0; u < NV; ++u) store8(out[r] + d0 + 8 * u, acc[r][u]);
}

void mix_tile(float* const* out, const float* sc, int n, int nr, int head_dim, const float* values, long v_stride) {
  int d0 = 0;
  for (; d0 + 16 <= head_dim; d0 += 16) mix_tile_pass<2>(out, sc, n, nr, d0, values, v_stride);
  if (d0 + 8 <= head_dim) mix_tile_pass<1>(out, sc, n, nr, d0, values, v_stride), d0 += 8;
  for (; d0 < head_dim; ++d0)
    for (int r = 0; r < nr; ++r) {
      float s = 0.0f;
      for (int j = 0; j < n; ++j) s += sc[(long)r * n + j] * values[(long)j * v_stride + d0];
      out[r][d0] = s;
    }
}

}  // namespace

// Scores four keys at a time (four independent accumulator chains, not one chain per key), then
// mixes the values eight vectors of output at a time, held in registers across all keys.
void attend_rows_part(float* part_out, long out_stride, float* probs, long probs_stride, float* m, float* l,
                      long stat_stride, const float* q_all, int n_q, const float* keys, const float* values,
                      const int32_t* rows, int j0, int j1, int head_dim, float scale) {
  const int hd8 = head_dim / 8 * 8;  // components in whole 8-wide vectors; the rest one by one
  auto key = [&](int j) { return keys + static_cast<long>(rows[j]) * head_dim; };
  for (int i = 0; i < n_q; ++i) {
    const float* q = q_all + static_cast<long>(i) * head_dim;
    float* pr = probs + i * probs_stride;
    int j = j0;
    for (; j + 4 <= j1; j += 4) {
      const float* k[4] = {key(j), key(j + 1), key(j + 2), key(j + 3)};
      f32x8 acc[4] = {};
      for (int d = 0; d < hd8; d += 8) {
        const f32x8 qd = load8(q + d);
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) acc[u] += qd * load8(k[u] + d);
      }
      for (int u = 0; u < 4; ++u) {
        float s = 0.0f;
        for (int c = 0; c < 8; ++c) s += acc[u][c];
        for (int d = hd8; d < head_dim; ++d) s += q[d] * k[u][d];
        pr[j + u] = scale * s;
      }
    }
    for (; j < j1; ++j) pr[j] = scale * dot(q, key(j), head_dim);
    l[i * stat_stride] = exp_shifted(pr + j0, j1 - j0, &m[i * stat_stride]);
    mix_values(part_out + i * out_stride, pr + j0, j1 - j0, head_dim,
               [&](int jj) { return values + static_cast<long>(rows[j0 + jj]) * head_dim; });
  }
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
                  const float* values, const int32_t* rows, int n_keys, int head_dim, float scale) {
  thread_local std::vector<float> part;  // [head_dim] the unnormalized value mix
  part.resize(head_dim);
  float m = 0.0f, l = 0.0f;
  attend_rows_part(part.data(), 0, probs, 0, &m, &l, 0, q, 1, keys, values, rows, 0, n_keys, head_dim, scale);
  return attend_rows_merge(out, probs, n_keys, n_keys, part.data(), &m, &l, 1, head_dim);
}

void attend_causal_block(float* out, long out_stride, float* probs, float* lse, const float* q, long q_stride,
                         const float* keys_t, long kt_stride, const float* values, long v_stride, int q0, int nq,
                         int head_dim, int window, float scale) {
  const int n_keys = q0 + nq;  // length of a probs row
  const int tiles = (nq + kRows - 1) / kRows;
  auto lo_of = [window](int pos) { return window > 0 ? std::max(0, pos - window + 1) : 0; };
#pragma omp parallel for schedule(dynamic, 1) if (static_cast<long>(nq) * n_keys * head_dim >= (1L << 15))
  for (int t = 0; t < tiles; ++t) {
    const int i0 = t * kRows, nr = std::min(kRows, nq - i0);
    const int jb = lo_of(q0 + i0), je = q0 + i0 + nr;  // keys any row of the tile reads: jb..je-1
    const int n = je - jb;
    thread_local std::vector<float> sc;   // [kRows, n] scores, then probabilities
    sc.resize((size_t)kRows * n);
    const float* qr[kRows];
    for (int r = 0; r < kRows; ++r) qr[r] = q + (long)(i0 + std::min(r, nr - 1)) * q_stride;
    tile_scores(sc.data(), n, qr, keys_t, kt_stride, jb, head_dim);
    for (int r = 0; r < nr; ++r) {
      const int pos = q0 + i0 + r, lo = lo_of(pos);
      float* row = sc.data() + (long)r * n;  // row[j - jb] for key j
      for (int j = lo; j <= pos; ++j) row[j - jb] *= scale;
      lse[i0 + r] = softmax(row + (lo - jb), pos - lo + 1);
      std::fill(row, row + (lo - jb), 0.0f);
      std::fill(row + (pos + 1 - jb), row + n, 0.0f);
      float* pr = probs + (long)(i0 + r) * n_keys;
      std::fill(pr, pr + jb, 0.0f);
      std::copy(row, row + n, pr + jb);
      std::fill(pr + je, pr + n_keys, 0.0f);
    }
    float* out_rows[kRows];
    for (int r = 0; r < kRows; ++r) out_rows[r] = out + (long)(i0 + std::min(r, nr - 1)) * out_stride;
    mix_tile(out_rows, sc.data(), n, nr, head_dim, values + (long)jb * v_stride, v_stride);
  }
}

}  // namespace kvs::ops
