// Softmax with max subtraction, 8 or 16 lanes at a time (kernels/exp8.h), the sum of exponentials
// accumulated in fp32. The scalar libm exp was a tenth of SmolLM2's prefill time at a 1.7K-token
// prompt.
#include "kernels/softmax.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/exp8.h"

namespace kvs::ops {

// The exponentials take fvec's lanes: 16 where the build targets AVX-512 (a 4K-token SmolLM2
// prefill spent a fifth of its attention time here with 8).
float exp_shifted(float* x, int n, float* max_out) {
  float max = x[0];
#pragma omp simd reduction(max : max)
  for (int i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  const int nv = n / kLanes * kLanes;
  fvec acc = {};
  for (int i = 0; i < nv; i += kLanes) {
    const fvec e = exp_lanes(load_as<fvec>(x + i) - max);
    store_as(x + i, e);
    acc += e;
  }
  if (nv < n) {  // the last n - nv values, padded with exp(-inf) = 0
    fvec tail = fvec{} - std::numeric_limits<float>::infinity();
    std::memcpy(&tail, x + nv, sizeof(float) * (n - nv));
    const fvec e = exp_lanes(tail - max);
    std::memcpy(x + nv, &e, sizeof(float) * (n - nv));
    acc += e;
  }
  float sum = 0.0f;
  for (int k = 0; k < kLanes; ++k) sum += acc[k];
  *max_out = max;
  return sum;
}

float softmax(float* x, int n) {
  float max = 0.0f;
  const float sum = exp_shifted(x, n, &max);
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] *= inv;
  return max + std::log(sum);
}

}  // namespace kvs::ops
