// Gated FFN activations on the device: gate <- silu(gate) * up (SwiGLU) or gelu_tanh(gate) * up
// (GeGLU, Gemma). CPU twins: ops::swiglu, ops::geglu_tanh (kernels/swiglu.h).
#include "kernels/cuda_gate.cuh"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

template <bool kGelu>
__global__ void gate_kernel(float* gate,      // [n]
                            const float* up,  // [n]
                            long n) {
  const long step = static_cast<long>(blockDim.x) * gridDim.x;
  for (long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const float g = gate[i];
    const float y = (kGelu ? detail::gelu_tanh(g) : detail::silu(g)) * up[i];
    gate[i] = y;
  }
}

}  // namespace

void swiglu(float* gate, const float* up, long n, cudaStream_t stream) {
  if (n <= 0) return;
  gate_kernel<false><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n);
}

void geglu_tanh(float* gate, const float* up, long n, cudaStream_t stream) {
  if (n <= 0) return;
  gate_kernel<true><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n);
}

}  // namespace kvs::cuda
