// SwiGLU and GeGLU elementwise ops, eight lanes at a time with the vector exp (kernels/exp8.h). One thread:
// decode calls it on each thread's chunk of the FFN rows, prefill on its own split of the tokens.
#include "kernels/swiglu.h"

#include <cstddef>
#include <cstring>

#include "kernels/exp8.h"

namespace kvs::ops {

namespace {

// gate[k] <- silu(gate[k]) * up[k] for k < count <= 8 (the rest of the vector is padding).
inline void swiglu8(float* gate, const float* up, std::size_t count) {
  f32x8 g = {}, u = {};
  std::memcpy(&g, gate, sizeof(float) * count);
  std::memcpy(&u, up, sizeof(float) * count);
  const f32x8 h = g / (1.0f + exp8(-g)) * u;
  std::memcpy(gate, &h, sizeof(float) * count);
}

// gate[k] <- gelu_tanh(gate[k]) * up[k] for k < count <= 8: x/2 (1 + tanh(y)) is x / (1 + exp(-2y)).
inline void geglu8(float* gate, const float* up, std::size_t count) {
  constexpr float kTwoRoot2OverPi = 1.5957691216057308f;  // 2 sqrt(2 / pi)
  f32x8 g = {}, u = {};
  std::memcpy(&g, gate, sizeof(float) * count);
  std::memcpy(&u, up, sizeof(float) * count);
  const f32x8 y2 = kTwoRoot2OverPi * (g + 0.044715f * g * g * g);
  const f32x8 h = g / (1.0f + exp8(-y2)) * u;
  std::memcpy(gate, &h, sizeof(float) * count);
}

}  // namespace

// Every element goes through the same lanes' arithmetic, the last few padded into a vector, so a
// value does not depend on where a caller's split put it.
void swiglu(float* gate, const float* up, long n) {
  long i = 0;
  for (; i + 8 <= n; i += 8) swiglu8(gate + i, up + i, 8);
  if (i < n) swiglu8(gate + i, up + i, static_cast<std::size_t>(n - i));
}

void geglu_tanh(float* gate, const float* up, long n) {
  long i = 0;
  for (; i + 8 <= n; i += 8) geglu8(gate + i, up + i, 8);
  if (i < n) geglu8(gate + i, up + i, static_cast<std::size_t>(n - i));
}

}  // namespace kvs::ops
