// SwiGLU gate of the Llama FFN: h = silu(gate) * up, silu(x) = x / (1 + exp(-x)).
#pragma once

namespace kvs::ops {

// In place: gate[n] <- silu(gate) * up[n]. Single-threaded (no OpenMP region: decode calls it
// from its own worker threads, where opening one cost a futex call each time).
void swiglu(float* gate, const float* up, long n);

}  // namespace kvs::ops
