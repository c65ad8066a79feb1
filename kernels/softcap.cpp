// Logit soft-capping on the host (kernels/softcap.h), eight lanes at a time with the vector exp
// (kernels/exp8.h); its device twin is kernels/softcap.cu.
#include "kernels/softcap.h"

#include <cstring>

#include "kernels/exp8.h"

namespace kvs::ops {
namespace {

// tanh per lane: y + y^3 p(y^2) where |y| < 0.55 (p of degree 4, fitted to tanh by least squares
// in relative error: 1.1e-9 in double), elsewhere 1 - 2 / (exp(2|y|) + 1) with y's sign, which
// loses nothing to cancellation there (tanh >= 0.5); 3e-7 relative in float. A scalar std::tanh
// per score made Gemma 2's prefill attention 2-4x slower than without the cap at head_dim 256.
f32x8 tanh8(f32x8 y) {
  const f32x8 a = y < 0.0f ? -y : y;
  const f32x8 t = a * a;
  f32x8 p = f32x8{} - 0.006272563710808754f;
  p = p * t + 0.021070225164294243f;
  p = p * t - 0.05385185778141022f;
  p = p * t + 0.13332580029964447f;
  p = p * t - 0.33333316445350647f;
  const f32x8 small = a + a * t * p;
  const f32x8 large = 1.0f - 2.0f / (exp8(2.0f * a) + 1.0f);
  const f32x8 r = a < 0.55f ? small : large;
  return y < 0.0f ? -r : r;
}

// x[k] <- cap * tanh(x[k] / cap) for k < count <= 8 (the rest of the vector is padding).
inline void softcap8(float* x, std::size_t count, float cap) {
  f32x8 v = {};
  std::memcpy(&v, x, sizeof(float) * count);
  const f32x8 c = cap * tanh8(v / cap);
  std::memcpy(x, &c, sizeof(float) * count);
}

}  // namespace

void softcap(float* x, long n, float cap) {
  if (cap <= 0.0f) return;
  long i = 0;
  for (; i + 8 <= n; i += 8) softcap8(x + i, 8, cap);
  if (i < n) softcap8(x + i, static_cast<std::size_t>(n - i), cap);
}

void Scoring::apply(float* x, long n) const {
  for (long i = 0; i < n; ++i) x[i] *= scale;
  ops::softcap(x, n, softcap);
}

}  // namespace kvs::ops
