// fp32 -> fp16 conversion (plain, and split into high and low halves) and the embedding lookup
// of fp16 table rows on the device.
// CPU twins: kvs::fp16_to_fp32 (kernels/quant.h) and the engine's embedding row copy.
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void to_half_kernel(__half* out,     // [n]
                               const float* x,  // [n]
                               long n) {
  const long step = static_cast<long>(blockDim.x) * gridDim.x;
  for (long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = __float2half_rn(x[i]);
  }
}

__global__ void split_half_kernel(__half* hi,     // [n]
                                  __half* lo,     // [n]
                                  const float* x,  // [n]
                                  long n) {
  const long step = static_cast<long>(blockDim.x) * gridDim.x;
  for (long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const __half h = __float2half_rn(x[i]);
    hi[i] = h;
    lo[i] = __float2half_rn(x[i] - __half2float(h));
  }
}

// One block per token row.
__global__ void embed_rows_kernel(float* x,               // [n, dim]
                                  const __half* table,    // [vocab, dim]
                                  const int32_t* tokens,  // [n]
                                  int dim) {
  const long t = blockIdx.x;
  const __half* src = table + static_cast<long>(tokens[t]) * dim;
  float* dst = x + t * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = __half2float(src[i]);
}

}  // namespace

void to_half(__half* out, const float* x, long n, cudaStream_t stream) {
  if (n <= 0) return;
  to_half_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(out, x, n);
}

void split_half(__half* hi, __half* lo, const float* x, long n, cudaStream_t stream) {
  if (n <= 0) return;
  split_half_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(hi, lo, x, n);
}

void embed_rows(float* x, const __half* table, const int32_t* tokens, int n, int dim,
                cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return;
  embed_rows_kernel<<<n, kThreads, 0, stream>>>(x, table, tokens, dim);
}

}  // namespace kvs::cuda
