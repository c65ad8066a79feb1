// Logit soft-capping of the classifier's logits on the device (Gemma 2's final_logit_softcapping).
// CPU twin: ops::softcap (kernels/softcap.h).
#include "kernels/cuda_ops.h"
#include "kernels/cuda_softcap.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void softcap_kernel(float* x,  // [n]
                               long n, float cap) {
  const long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = detail::soft_capped(x[i], cap);
}

}  // namespace

void softcap(float* x, long n, float cap, cudaStream_t stream) {
  if (n <= 0 || cap <= 0.0f) return;
  softcap_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(x, n, cap);
}

}  // namespace kvs::cuda
