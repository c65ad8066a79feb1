// Softmax with max subtraction; the sum of exponentials is accumulated in fp32.
#include "kernels/softmax.h"

#include <cmath>

namespace kvs::ops {

float softmax(float* x, int n) {
  float max = x[0];
  for (int i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int i = 0; i < n; ++i) x[i] *= inv;
  return max + std::log(sum);
}

}  // namespace kvs::ops
