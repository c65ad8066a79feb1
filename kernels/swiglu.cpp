// SwiGLU elementwise op, split over the OpenMP threads for prefill-sized inputs.
#include "kernels/swiglu.h"

#include <cmath>

namespace kvs::ops {

void swiglu(float* gate, const float* up, long n) {
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
  for (long i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace kvs::ops
