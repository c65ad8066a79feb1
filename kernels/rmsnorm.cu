// RMSNorm of rows on the device, one block per row, sum of squares reduced in fp32; and the same
// norm of a block's output added into the residual (Gemma's post-block norms).
// CPU twin: ops::rmsnorm_rows (kernels/rmsnorm.h), same formula w * (x / sqrt(mean(x^2) + eps)).
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

// out = w * (x / sqrt(mean(x^2) + eps)), row by row, or with kAdd out += that (a block's output
// x added to the residual out through its norm). Without kAdd out may alias x: every thread reads
// x[i] before it writes out[i], for its own i only, after the reduction has finished.
template <bool kAdd>
__global__ void rmsnorm_kernel(float* out,      // [n, dim]
                               const float* x,  // [n, dim]
                               const float* w,  // [dim]
                               int dim, float eps) {
  __shared__ float red[32];
  const long base = static_cast<long>(blockIdx.x) * dim;
  const float* xr = x + base;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = detail::block_sum(ss, red);
  const float scale = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  float* outr = out + base;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float y = w[i] * (scale * xr[i]);
    outr[i] = kAdd ? outr[i] + y : y;
  }
}

}  // namespace

void add_rmsnorm_rows(float* x, const float* y, const float* w, int n, int dim, float eps, cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  rmsnorm_kernel<true><<<n, kThreads, 0, stream>>>(x, y, w, dim, eps);
}

void rmsnorm_rows(float* out, const float* x, const float* w, int n, int dim, float eps,
                  cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  rmsnorm_kernel<false><<<n, kThreads, 0, stream>>>(out, x, w, dim, eps);
}

}  // namespace kvs::cuda
