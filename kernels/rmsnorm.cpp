// RMSNorm in fp32 (sum of squares accumulated in fp32, as llama2.c and HF do).
#include "kernels/rmsnorm.h"

#include <cmath>

namespace kvs::ops {

void rmsnorm(float* out, const float* x, const float* w, int dim, float eps) {
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int i = 0; i < dim; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
#pragma omp simd
  for (int i = 0; i < dim; ++i) out[i] = w[i] * (scale * x[i]);
}

void rmsnorm_rows(float* out, const float* x, const float* w, int n, int dim, float eps) {
  const auto row = [&](int t) {
    rmsnorm(out + static_cast<long>(t) * dim, x + static_cast<long>(t) * dim, w, dim, eps);
  };
  // Few rows (a decode step's one, its heads' QK-norm) on this thread, without entering an OpenMP
  // region: an `if` clause that keeps one thread still starts and ends a team each call.
  if (static_cast<long>(n) * dim < (1L << 16)) {
    for (int t = 0; t < n; ++t) row(t);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int t = 0; t < n; ++t) row(t);
}

}  // namespace kvs::ops
