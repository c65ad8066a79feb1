// Row-wise bias addition on the device (the QKV biases of Qwen-style checkpoints).
// CPU twin: ops::add_bias (kernels/matmul.h).
#include "kernels/cuda_ops.h"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row.
__global__ void add_bias_kernel(float* y,        // [n, dim]
                                const float* b,  // [dim]
                                int dim) {
  float* yr = y + static_cast<long>(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] += b[i];
}

}  // namespace

void add_bias(float* y, const float* b, int n, int dim, cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  add_bias_kernel<<<n, kThreads, 0, stream>>>(y, b, dim);
}

}  // namespace kvs::cuda
