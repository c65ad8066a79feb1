// Decode projections on the device: y = W x with 16-bit weights (fp16 or bf16) and fp32 x, one
// warp per weight row,
// 16-byte weight loads when the row length allows, eight of them in flight per lane (a decode
// step is bound by reading the weights once; one load per lane at a time left HBM half idle).
// CPU twin: ops::matvec (kernels/matmul.h).
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"
#include "kernels/cuda_store.cuh"

namespace kvs::cuda {
namespace {

// Measured on an H100 (8B shapes, weights not in L2): two-warp blocks spread a 4096-row product
// evenly over the SMs (eight-warp blocks left some SMs a third more rows: o 46 -> 29 us), and
// eight loads in flight per lane beat four by 2-4%.
constexpr int kWarps = 2;  // rows per block
constexpr int kThreads = kWarps * 32;
constexpr int kInFlight = 8;  // 16-byte weight loads issued per lane before their sums

// The dot product of 8 16-bit weights with 8 fp32 inputs (two float4 read through the read-only
// cache: every warp of the block reads the same x).
template <class T>
__device__ __forceinline__ float dot8(const uint4& packed, const float4* x2) {
  using S = detail::Store<T>;
  const T* h = reinterpret_cast<const T*>(&packed);  // [8]
  const float4 a = __ldg(x2), b = __ldg(x2 + 1);
  return S::to_float(h[0]) * a.x + S::to_float(h[1]) * a.y + S::to_float(h[2]) * a.z +
         S::to_float(h[3]) * a.w + S::to_float(h[4]) * b.x + S::to_float(h[5]) * b.y +
         S::to_float(h[6]) * b.z + S::to_float(h[7]) * b.w;
}

template <class T>
__global__ void matvec_kernel(float* y,          // [rows]
                              const T* w,        // [rows, cols]
                              const float* x,    // [cols]
                              int rows, int cols, float beta) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long r = static_cast<long>(blockIdx.x) * kWarps + warp;
  if (r >= rows) return;  // the whole warp: no shuffle partner is lost
  const T* wr = w + r * cols;  // [cols]
  float s = 0.0f;
  if (cols % 8 == 0) {  // rows start 16-byte aligned: 8 weights and 8 inputs per load pair
    const uint4* w8 = reinterpret_cast<const uint4*>(wr);   // [n8]
    const float4* x4 = reinterpret_cast<const float4*>(x);  // [2 * n8]
    const int n8 = cols / 8;
    int c = lane;
    for (; c + 32 * (kInFlight - 1) < n8; c += 32 * kInFlight) {
      uint4 p[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) p[u] = __ldcs(w8 + c + 32 * u);  // streamed: read once
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) s += dot8<T>(p[u], x4 + 2 * (c + 32 * u));
    }
    for (; c < n8; c += 32) s += dot8<T>(__ldcs(w8 + c), x4 + 2 * c);
  } else {
    for (int c = lane; c < cols; c += 32) s += detail::Store<T>::to_float(wr[c]) * x[c];
  }
  s = detail::warp_sum(s);
  if (lane == 0) y[r] = beta == 0.0f ? s : s + beta * y[r];
}

}  // namespace

template <class T>
void matvec(float* y, const T* w, const float* x, int rows, int cols, float beta, cudaStream_t stream) {
  if (rows <= 0) return;
  const int blocks = (rows + kWarps - 1) / kWarps;
  matvec_kernel<T><<<blocks, kThreads, 0, stream>>>(y, w, x, rows, cols, beta);
}

template void matvec(float*, const __half*, const float*, int, int, float, cudaStream_t);
template void matvec(float*, const __nv_bfloat16*, const float*, int, int, float, cudaStream_t);

}  // namespace kvs::cuda
