// The types the CUDA backend stores weights and the KV cache in — fp16 (__half), bf16
// (__nv_bfloat16) and fp32 (float) — behind one interface for the kernels templated on them: a
// value or a pair of values widened to fp32, fp32 rounded to the type (nearest even; fp32 as it
// is), how many values one 16-byte load carries; and an fp32 value split into parts of the type
// for the prefill GEMMs. Everything is computed in fp32 either way.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace kvs::cuda::detail {

template <class T>
struct Store;

// Values of T in one 16-byte load (a uint4): 8 of a 16-bit type, 4 floats.
template <class T>
constexpr int kPerLoad = 16 / static_cast<int>(sizeof(T));

template <>
struct Store<__half> {
  using Pair = __half2;
  static __device__ __forceinline__ float to_float(__half h) { return __half2float(h); }
  static __device__ __forceinline__ float2 to_float2(__half2 p) { return __half22float2(p); }
  static __device__ __forceinline__ __half from_float(float f) { return __float2half_rn(f); }
};

template <>
struct Store<__nv_bfloat16> {
  using Pair = __nv_bfloat162;
  static __device__ __forceinline__ float to_float(__nv_bfloat16 h) { return __bfloat162float(h); }
  static __device__ __forceinline__ float2 to_float2(__nv_bfloat162 p) { return __bfloat1622float2(p); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float f) { return __float2bfloat16_rn(f); }
};

template <>
struct Store<float> {
  using Pair = float2;
  static __device__ __forceinline__ float to_float(float h) { return h; }
  static __device__ __forceinline__ float2 to_float2(float2 p) { return p; }
  static __device__ __forceinline__ float from_float(float f) { return f; }
};

// x as n_parts values of T at parts[0], parts[part_stride], ...: part 0 = T(x), part p = T(x - the
// parts before it) (cuda::split_store).
template <class T>
__device__ __forceinline__ void store_split(T* parts, long part_stride, int n_parts, float x) {
  for (int p = 0; p < n_parts; ++p) {
    const T h = Store<T>::from_float(x);
    parts[p * part_stride] = h;
    x -= Store<T>::to_float(h);
  }
}

}  // namespace kvs::cuda::detail
