// Gated FFN activations: SwiGLU of the Llama FFN, h = silu(gate) * up with silu(x) = x / (1 +
// exp(-x)), and Gemma's GeGLU, h = gelu_tanh(gate) * up with GELU's tanh approximation.
#pragma once

namespace kvs::ops {

// In place: gate[n] <- silu(gate) * up[n]. Single-threaded (no OpenMP region: decode calls it
// from its own worker threads, where opening one cost a futex call each time).
void swiglu(float* gate, const float* up, long n);

// In place: gate[n] <- gelu_tanh(gate) * up[n], gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x +
// 0.044715 x^3))) (PyTorch's gelu(approximate="tanh")). Single-threaded, as swiglu.
void geglu_tanh(float* gate, const float* up, long n);

}  // namespace kvs::ops
