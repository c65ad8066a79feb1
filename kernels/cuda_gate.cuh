// The FFN's gate activations on the device, shared by the SwiGLU / GeGLU kernel (swiglu.cu) and the
// decode's fused gate/up product (matmul.cu). CPU twins: ops::swiglu and ops::geglu_tanh
// (kernels/swiglu.h), the same formulas.
#pragma once

namespace kvs::cuda::detail {

// silu(g) = g / (1 + exp(-g)).
__device__ __forceinline__ float silu(float g) { return g / (1.0f + expf(-g)); }

// GELU's tanh approximation, g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))), as g / (1 + exp(-2y)).
__device__ __forceinline__ float gelu_tanh(float g) {
  constexpr float kTwoRoot2OverPi = 1.5957691216057308f;  // 2 sqrt(2 / pi)
  return g / (1.0f + expf(-kTwoRoot2OverPi * (g + 0.044715f * g * g * g)));
}

}  // namespace kvs::cuda::detail
