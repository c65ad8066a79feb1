// Column sums and observation-window rows of prefill attention blocks, plain loops.
#include "kernels/capture.h"

#include <algorithm>

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

}  // namespace kvs::ops
