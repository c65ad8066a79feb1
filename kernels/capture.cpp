// Column sums, observation-window rows and block-pooled maps of prefill attention blocks, plain
// loops (vectorized along the keys).
#include "kernels/capture.h"

#include <algorithm>
#include <vector>

namespace kvs::ops {

void colsum_add(float* colsum, long col_stride, const float* probs, int n_heads, int nq,
                int n_keys, long ld) {
  for (int h = 0; h < n_heads; ++h) {
    const float* ph = probs + static_cast<long>(h) * nq * ld;  // [nq, ld]
    float* ch = colsum + static_cast<long>(h) * col_stride;     // [n_keys]
    for (int j = 0; j < n_keys; ++j) {
      float s = 0.0f;
      for (int i = 0; i < nq; ++i) s += ph[static_cast<long>(i) * ld + j];
      ch[j] += s;
    }
  }
}

void window_rows(float* window, float* window_lse, const float* probs, const float* lse,
                 int n_heads, int nq, int n_keys, long ld, int q0, int P, int W) {
  const int i_begin = std::max(0, P - W - q0);
  const int i_end = std::min(nq, P - q0);
  for (int h = 0; h < n_heads; ++h) {
    for (int i = i_begin; i < i_end; ++i) {
      const long w = q0 + i - (P - W);
      const float* src = probs + (static_cast<long>(h) * nq + i) * ld;  // [n_keys]
      float* dst = window + (static_cast<long>(h) * W + w) * P;          // [P]
      for (int j = 0; j < P; ++j) dst[j] = j < n_keys ? src[j] : 0.0f;
      window_lse[static_cast<long>(h) * W + w] = lse[static_cast<long>(h) * nq + i];
    }
  }
}

void pool_add(float* pooled, const float* probs, int n_heads, int nq, int n_keys, long ld, int q0,
              int P, int block) {
  if (nq <= 0 || n_keys <= 0) return;
  const long nb = (P + block - 1) / block;
  const int a_first = q0 / block, a_last = (q0 + nq - 1) / block;
  thread_local std::vector<float> cols;  // [n_keys] one pool row's column sums over its block rows
  cols.resize(n_keys);
  for (int h = 0; h < n_heads; ++h) {
    const float* ph = probs + static_cast<long>(h) * nq * ld;  // [nq, ld]
    for (int a = a_first; a <= a_last; ++a) {
      const int i0 = std::max(a * block, q0) - q0, i1 = std::min((a + 1) * block, q0 + nq) - q0;
      const int n = std::min(n_keys, (a + 1) * block);  // keys of the pool columns b <= a
      const float rows_in = static_cast<float>(std::min(block, P - a * block));
      std::fill_n(cols.data(), n, 0.0f);
      for (int i = i0; i < i1; ++i) {
        const float* row = ph + static_cast<long>(i) * ld;
        float* c = cols.data();
#pragma omp simd
        for (int j = 0; j < n; ++j) c[j] += row[j];
      }
      for (int b = 0; b <= a && b * block < n_keys; ++b) {
        const int j0 = b * block, j1 = std::min((b + 1) * block, n_keys);
        float s = 0.0f;
        for (int j = j0; j < j1; ++j) s += cols[j];
        pooled[(h * nb + a) * nb + b] += s / rows_in;
      }
    }
  }
}

}  // namespace kvs::ops
