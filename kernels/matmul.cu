// Decode projections on the device: y = W x with weights stored as fp16, bf16 or fp32 and fp32 x,
// one warp per weight row (or per pair of rows), 16-byte weight loads when the row length allows,
// eight of them in flight per lane (a decode step is bound by reading the weights once; one load
// per lane at a time left HBM half idle). The small ops around a product ride in it, to save a
// launch each: the RMSNorm of x before it (every warp reads all of x anyway), a bias after it,
// and for the FFN's stacked gate/up product the SwiGLU (or GeGLU) of the two rows a warp computes.
// CPU twins: ops::rmsnorm, ops::matvec, ops::add_bias, ops::swiglu, ops::geglu_tanh.
#include "kernels/cuda_gate.cuh"
#include "kernels/cuda_launch.cuh"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"
#include "kernels/cuda_store.cuh"

namespace kvs::cuda {
namespace {

// Measured on an H100 (8B shapes, weights not in L2): two-warp blocks spread a 4096-row product
// evenly over the SMs (eight-warp blocks left some SMs a third more rows: o 46 -> 29 us), and
// eight loads in flight per lane beat four by 2-4%.
constexpr int kWarps = 2;  // warps per block
constexpr int kThreads = kWarps * 32;
constexpr int kInFlight = 8;  // 16-byte weight loads issued per lane before their sums

// The inputs one 16-byte weight load multiplies: kPerLoad<T> floats, as float4s.
template <class T>
struct Inputs {
  float4 v[detail::kPerLoad<T> / 4];
};

// The dot product of the kPerLoad<T> weights of one load (8 fp16 or bf16, 4 fp32) with the inputs,
// summed in order.
template <class T>
__device__ __forceinline__ float dot_load(const uint4& packed, const Inputs<T>& in) {
  const T* h = reinterpret_cast<const T*>(&packed);  // [kPerLoad]
  const float* x = reinterpret_cast<const float*>(in.v);  // [kPerLoad]
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < detail::kPerLoad<T>; ++j) s += detail::Store<T>::to_float(h[j]) * x[j];
  return s;
}

// The inputs of load unit c (x[c * kPerLoad<T> ...], read through the read-only cache: every warp
// of the block reads the same x). kNormed: x times the norm weight g, with x's squares added to ss.
template <class T, bool kNormed>
__device__ __forceinline__ Inputs<T> inputs(const float* x, const float* g, int c, float& ss) {
  constexpr int kN4 = detail::kPerLoad<T> / 4;
  Inputs<T> in;
  const float4* x4 = reinterpret_cast<const float4*>(x) + kN4 * c;  // [kN4]
#pragma unroll
  for (int i = 0; i < kN4; ++i) in.v[i] = __ldg(x4 + i);
  if constexpr (kNormed) {
    const float4* g4 = reinterpret_cast<const float4*>(g) + kN4 * c;  // [kN4]
#pragma unroll
    for (int i = 0; i < kN4; ++i) {
      const float4 a = in.v[i], ga = __ldg(g4 + i);
      ss += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
      in.v[i] = make_float4(a.x * ga.x, a.y * ga.y, a.z * ga.z, a.w * ga.w);
    }
  }
  return in;
}

// kGated = false: warp r computes y[r] = W[r] · n(x) (+ bias[r]) (+ beta y[r]).
// kGated = true: W stacks gate rows [rows] over up rows [rows]; warp r computes both rows r and
// rows + r and writes y[r] = silu(gate) * up, or gelu_tanh(gate) * up where gelu.
// n(x) = x / sqrt(mean(x^2) + eps) * g when kNormed (g [cols]), x otherwise. The scale is one
// number per product, so it multiplies the finished sums: Σ w (g x) · scale.
template <class T, bool kNormed, bool kGated>
__global__ void matvec_kernel(float* y,           // [rows]
                              const T* w,         // [rows, cols], or [2 rows, cols] when kGated
                              const float* x,     // [cols]
                              const float* g,     // [cols] when kNormed
                              const float* bias,  // [rows] or null
                              int rows, int cols, float eps, float beta, bool gelu) {
  constexpr int kR = kGated ? 2 : 1;                 // rows per warp
  constexpr int kLoads = kInFlight / kR;             // loads in flight per row
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const long r = static_cast<long>(blockIdx.x) * kWarps + warp;
  const T* wr[kR];  // [cols] each
#pragma unroll
  for (int i = 0; i < kR; ++i) wr[i] = w + (r + static_cast<long>(i) * rows) * cols;
  // The weights do not depend on the kernels before this one: their first loads are asked of L2
  // before the wait, so that with the launch overlapped they arrive while those kernels finish.
  constexpr int kPer = detail::kPerLoad<T>;
  const int n_loads = cols % kPer == 0 ? cols / kPer : 0;  // 16-byte units per row; 0: the scalar path
#pragma unroll
  for (int i = 0; i < kR; ++i)
#pragma unroll
    for (int u = 0; u < kLoads; ++u)
      if (r < rows && lane + 32 * u < n_loads)
        detail::prefetch_l2(reinterpret_cast<const uint4*>(wr[i]) + lane + 32 * u);
  detail::wait_for_previous_kernels();
  detail::let_next_kernel_start();
  if (r >= rows) return;  // the whole warp: no shuffle partner is lost
  float s[kR] = {};
  float ss = 0.0f;
  if (n_loads > 0) {  // rows start 16-byte aligned: kPer weights and kPer inputs per load
    int c = lane;
    for (; c + 32 * (kLoads - 1) < n_loads; c += 32 * kLoads) {
      uint4 p[kR][kLoads];
#pragma unroll
      for (int i = 0; i < kR; ++i)
#pragma unroll
        for (int u = 0; u < kLoads; ++u)  // streamed: read once
          p[i][u] = __ldcs(reinterpret_cast<const uint4*>(wr[i]) + c + 32 * u);
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const Inputs<T> in = inputs<T, kNormed>(x, g, c + 32 * u, ss);
#pragma unroll
        for (int i = 0; i < kR; ++i) s[i] += dot_load<T>(p[i][u], in);
      }
    }
    for (; c < n_loads; c += 32) {
      const Inputs<T> in = inputs<T, kNormed>(x, g, c, ss);
#pragma unroll
      for (int i = 0; i < kR; ++i) s[i] += dot_load<T>(__ldcs(reinterpret_cast<const uint4*>(wr[i]) + c), in);
    }
  } else {
    for (int c = lane; c < cols; c += 32) {
      float xc = x[c];
      if constexpr (kNormed) {
        ss += xc * xc;
        xc *= g[c];
      }
#pragma unroll
      for (int i = 0; i < kR; ++i) s[i] += detail::Store<T>::to_float(wr[i][c]) * xc;
    }
  }
  // The lanes read every input once between them, so the warp's ss is the sum over all of x.
  float scale = 1.0f;
  if constexpr (kNormed) scale = 1.0f / sqrtf(detail::warp_sum(ss) / static_cast<float>(cols) + eps);
#pragma unroll
  for (int i = 0; i < kR; ++i) s[i] = detail::warp_sum(s[i]) * scale;
  if (lane != 0) return;
  if constexpr (kGated) {
    y[r] = (gelu ? detail::gelu_tanh(s[0]) : detail::silu(s[0])) * s[1];
  } else {
    const float v = bias ? s[0] + bias[r] : s[0];
    y[r] = beta == 0.0f ? v : v + beta * y[r];
  }
}

template <class T, bool kGated>
void launch(float* y, const T* w, const float* x, const float* bias, int rows, int cols, float beta,
            Norm norm, bool gelu, cudaStream_t stream) {
  if (rows <= 0) return;
  const int blocks = (rows + kWarps - 1) / kWarps;
  if (norm.w) {
    detail::launch_overlapped(matvec_kernel<T, true, kGated>, blocks, kThreads, stream, y, w, x, norm.w, bias, rows,
                              cols, norm.eps, beta, gelu);
  } else {
    detail::launch_overlapped(matvec_kernel<T, false, kGated>, blocks, kThreads, stream, y, w, x, nullptr, bias,
                              rows, cols, 0.0f, beta, gelu);
  }
}

}  // namespace

template <class T>
void matvec(float* y, const T* w, const float* x, int rows, int cols, float beta, cudaStream_t stream, Norm norm,
            const float* bias) {
  launch<T, false>(y, w, x, bias, rows, cols, beta, norm, false, stream);
}

template <class T>
void matvec_swiglu(float* h, const T* w_gate_up, const float* x, int rows, int cols, Norm norm,
                   cudaStream_t stream, bool gelu) {
  launch<T, true>(h, w_gate_up, x, nullptr, rows, cols, 0.0f, norm, gelu, stream);
}

template void matvec(float*, const __half*, const float*, int, int, float, cudaStream_t, Norm, const float*);
template void matvec(float*, const __nv_bfloat16*, const float*, int, int, float, cudaStream_t, Norm, const float*);
template void matvec_swiglu(float*, const __half*, const float*, int, int, Norm, cudaStream_t, bool);
template void matvec_swiglu(float*, const __nv_bfloat16*, const float*, int, int, Norm, cudaStream_t, bool);
template void matvec(float*, const float*, const float*, int, int, float, cudaStream_t, Norm, const float*);
template void matvec_swiglu(float*, const float*, const float*, int, int, Norm, cudaStream_t, bool);

}  // namespace kvs::cuda
