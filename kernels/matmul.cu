// Decode projections on the device: y = W x with fp16 weights and fp32 x, one warp per weight row,
// 16-byte weight loads when the row length allows. CPU twin: ops::matvec (kernels/matmul.h).
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"

namespace kvs::cuda {
namespace {

constexpr int kWarps = 8;  // rows per block
constexpr int kThreads = kWarps * 32;

__global__ void matvec_half_kernel(float* y,          // [rows]
                                   const __half* w,   // [rows, cols]
                                   const float* x,    // [cols]
                                   int rows, int cols, float beta) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long r = static_cast<long>(blockIdx.x) * kWarps + warp;
  if (r >= rows) return;  // the whole warp: no shuffle partner is lost
  const __half* wr = w + r * cols;  // [cols]
  float s = 0.0f;
  if (cols % 8 == 0) {  // rows start 16-byte aligned: 8 weights and 8 inputs per load pair
    const uint4* w8 = reinterpret_cast<const uint4*>(wr);  // [cols / 8]
    const float4* x4 = reinterpret_cast<const float4*>(x);  // [cols / 4]
    for (int c = lane; c < cols / 8; c += 32) {
      const uint4 packed = w8[c];
      const __half* h = reinterpret_cast<const __half*>(&packed);  // [8]
      const float4 a = x4[2 * c], b = x4[2 * c + 1];
      s += __half2float(h[0]) * a.x + __half2float(h[1]) * a.y + __half2float(h[2]) * a.z +
           __half2float(h[3]) * a.w + __half2float(h[4]) * b.x + __half2float(h[5]) * b.y +
           __half2float(h[6]) * b.z + __half2float(h[7]) * b.w;
    }
  } else {
    for (int c = lane; c < cols; c += 32) s += __half2float(wr[c]) * x[c];
  }
  s = detail::warp_sum(s);
  if (lane == 0) y[r] = beta == 0.0f ? s : s + beta * y[r];
}

}  // namespace

void matvec_half(float* y, const __half* w, const float* x, int rows, int cols, float beta,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  const int blocks = (rows + kWarps - 1) / kWarps;
  matvec_half_kernel<<<blocks, kThreads, 0, stream>>>(y, w, x, rows, cols, beta);
}

}  // namespace kvs::cuda
