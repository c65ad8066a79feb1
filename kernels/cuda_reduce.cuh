// Deterministic warp and block reductions (sum, max) shared by the CUDA kernels: fixed butterfly
// and tree orders, so every run of a launch gives bit-identical results.
#pragma once
#include <cuda_runtime.h>

namespace kvs::cuda::detail {

// Every lane gets the same value (float + and max are commutative, so the butterfly is
// symmetric). The whole warp must take part.
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / max over the whole block, returned to every thread. blockDim.x must be a multiple of 32
// (at most 1024) and every thread of the block must call it; red is __shared__ float[32].
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n_warps = static_cast<int>(blockDim.x) >> 5;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by the previous reduction
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < n_warps ? red[lane] : 0.0f;
    t = warp_sum(t);
    if (lane == 0) red[0] = t;
  }
  __syncthreads();
  return red[0];
}

__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n_warps = static_cast<int>(blockDim.x) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < n_warps ? red[lane] : -INFINITY;
    t = warp_max(t);
    if (lane == 0) red[0] = t;
  }
  __syncthreads();
  return red[0];
}

// Blocks for a grid-stride loop over n elements (n >= 1).
inline unsigned grid_for(long n, int threads) {
  const long blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < (1L << 20) ? blocks : (1L << 20));
}

}  // namespace kvs::cuda::detail
