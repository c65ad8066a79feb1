// Attention of one query row: dot-product scores, softmax (kernels/softmax.h), value mix.
#include "kernels/attention.h"

#include "kernels/softmax.h"

namespace kvs::ops {
namespace {

inline float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

inline void axpy(float* y, float a, const float* x, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

float attend(float* out, float* probs, const float* q, const float* keys, const float* values,
             int n_keys, int head_dim, long stride, float scale) {
  for (int j = 0; j < n_keys; ++j) probs[j] = scale * dot(q, keys + j * stride, head_dim);
  const float lse = softmax(probs, n_keys);
  for (int i = 0; i < head_dim; ++i) out[i] = 0.0f;
  for (int j = 0; j < n_keys; ++j) axpy(out, probs[j], values + j * stride, head_dim);
  return lse;
}

float attend_rows(float* out, float* probs, const float* q, const float* keys,
                  const float* values, const int32_t* rows, int n_keys, int head_dim, float scale) {
  for (int j = 0; j < n_keys; ++j) {
    probs[j] = scale * dot(q, keys + static_cast<long>(rows[j]) * head_dim, head_dim);
  }
  const float lse = softmax(probs, n_keys);
  for (int i = 0; i < head_dim; ++i) out[i] = 0.0f;
  for (int j = 0; j < n_keys; ++j) {
    axpy(out, probs[j], values + static_cast<long>(rows[j]) * head_dim, head_dim);
  }
  return lse;
}

}  // namespace kvs::ops
