// SwiGLU elementwise op, eight lanes at a time with the vector exp (kernels/exp8.h). One thread:
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

}  // namespace

// Every element goes through the same lanes' arithmetic, the last few padded into a vector, so a
// value does not depend on where a caller's split put it.
void swiglu(float* gate, const float* up, long n) {
  long i = 0;
  for (; i + 8 <= n; i += 8) swiglu8(gate + i, up + i, 8);
  if (i < n) swiglu8(gate + i, up + i, static_cast<std::size_t>(n - i));
}

}  // namespace kvs::ops
