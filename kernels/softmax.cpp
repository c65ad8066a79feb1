// Softmax with max subtraction, eight lanes at a time (kernels/exp8.h), the sum of exponentials
// accumulated in fp32. The scalar libm exp was a tenth of SmolLM2's prefill time at a 1.7K-token
// prompt.
#include "kernels/softmax.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/exp8.h"

namespace kvs::ops {
namespace {

inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store8(float* p, f32x8 v) { std::memcpy(p, &v, sizeof v); }

}  // namespace

float exp_shifted(float* x, int n, float* max_out) {
  float max = x[0];
#pragma omp simd reduction(max : max)
  for (int i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  const int n8 = n / 8 * 8;
  f32x8 acc = {};
  for (int i = 0; i < n8; i += 8) {
    const f32x8 e = exp8(load8(x + i) - max);
    store8(x + i, e);
    acc += e;
  }
  if (n8 < n) {  // the last n - n8 values, padded with exp(-inf) = 0
    f32x8 tail = f32x8{} - std::numeric_limits<float>::infinity();
    std::memcpy(&tail, x + n8, sizeof(float) * (n - n8));
    const f32x8 e = exp8(tail - max);
    std::memcpy(x + n8, &e, sizeof(float) * (n - n8));
    acc += e;
  }
  float sum = 0.0f;
  for (int k = 0; k < 8; ++k) sum += acc[k];
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
