// SwiGLU gate of the FFN on the device: gate <- silu(gate) * up.
// CPU twin: ops::swiglu (kernels/swiglu.h).
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void swiglu_kernel(float* gate,      // [n]
                              const float* up,  // [n]
                              long n) {
  const long step = static_cast<long>(blockDim.x) * gridDim.x;
  for (long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const float g = gate[i];
    const float y = g / (1.0f + expf(-g)) * up[i];
    gate[i] = y;
  }
}

}  // namespace

void swiglu(float* gate, const float* up, long n, cudaStream_t stream) {
  if (n <= 0) return;
  swiglu_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(gate, up, n);
}

}  // namespace kvs::cuda
