// KV-cache rows on the device: appending fp32 key/value rows, rounded to the cache's type,
// at listed rows of each head (for decode, with the RoPE of the new query and key in the same
// launch, and Qwen3's QK-norm before it), and gathering listed cache rows (the extend pass's
// attended keys and values). CPU twins: KvStore::append, ops::rope_apply, ops::rmsnorm_rows.
#include "kernels/cuda_launch.cuh"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"
#include "kernels/cuda_rope.cuh"
#include "kernels/cuda_store.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 128;

// Grid (n, n_kv_heads): block (t, g) converts row t of KV head g; threads over head_dim.
template <class T>
__global__ void kv_append_kernel(T* k_cache,           // [n_kv_heads, head_stride]
                                 T* v_cache,           // [n_kv_heads, head_stride]
                                 long head_stride,
                                 const float* k_src,   // [n, src_stride], head g at g * head_dim
                                 const float* v_src,   // [n, src_stride]
                                 long src_stride, int head_dim,
                                 const int32_t* rows,  // [n_kv_heads, rows_stride]
                                 long rows_stride) {
  using S = detail::Store<T>;
  const long t = blockIdx.x;
  const int g = blockIdx.y;
  const long dst = static_cast<long>(g) * head_stride + static_cast<long>(rows[g * rows_stride + t]) * head_dim;
  const long src = t * src_stride + static_cast<long>(g) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    k_cache[dst + i] = S::from_float(k_src[src + i]);
    v_cache[dst + i] = S::from_float(v_src[src + i]);
  }
}

// Block b < n_heads rotates query head b; block n_heads + g rotates key head g, then writes key
// and value head g to cache row slot0[g]. cos_tab null: no rotation. Where norms gives the head's
// weights, the head is RMS-normalised first (Qwen3's QK-norm).
template <class T>
__global__ void rope_append_kernel(T* k_cache,             // [n_kv_heads, head_stride]
                                   T* v_cache,             // [n_kv_heads, head_stride]
                                   long head_stride,
                                   float* qkv,             // [n_heads + 2 n_kv_heads, head_dim]: q, k, v
                                   int n_heads, int n_kv_heads, int head_dim,
                                   const int32_t* pos,     // [1]
                                   const float* cos_tab,   // [n_pos, head_dim/2] or null
                                   const float* sin_tab,   // [n_pos, head_dim/2] or null
                                   bool interleaved,
                                   const int32_t* slot0,    // [n_kv_heads]
                                   HeadNorms norms) {
  detail::wait_for_previous_kernels();  // (launched overlapped: cuda_launch.cuh)
  detail::let_next_kernel_start();
  using S = detail::Store<T>;
  const int b = blockIdx.x, half = head_dim / 2;
  float* head = qkv + static_cast<long>(b) * head_dim;  // [head_dim]
  if (const float* w = b < n_heads ? norms.q : norms.k) {  // [head_dim]; the same branch for the whole block
    __shared__ float red[32];
    float ss = 0.0f;
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) ss += head[i] * head[i];
    const float scale = 1.0f / sqrtf(detail::block_sum(ss, red) / static_cast<float>(head_dim) + norms.eps);
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) head[i] = w[i] * (scale * head[i]);
    __syncthreads();  // a rotated pair may be another thread's
  }
  if (cos_tab) {
    const float* c = cos_tab + static_cast<long>(pos[0]) * half;  // [head_dim/2]
    const float* s = sin_tab + static_cast<long>(pos[0]) * half;  // [head_dim/2]
    for (int i = threadIdx.x; i < half; i += blockDim.x) detail::rotate_pair(head, c, s, i, half, interleaved);
  }
  if (b < n_heads) return;
  __syncthreads();  // the rotated pairs of other threads
  const int g = b - n_heads;
  const float* value = qkv + static_cast<long>(n_heads + n_kv_heads + g) * head_dim;  // [head_dim]
  const long dst = static_cast<long>(g) * head_stride + static_cast<long>(slot0[g]) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    k_cache[dst + i] = S::from_float(head[i]);
    v_cache[dst + i] = S::from_float(value[i]);
  }
}

// One block per destination row.
template <class T>
__global__ void gather_rows_kernel(T* dst,               // [n, head_dim]
                                   const T* src,         // [*, head_dim]
                                   const int32_t* idx,   // [n]
                                   int head_dim) {
  const long i = blockIdx.x;
  const T* s = src + static_cast<long>(idx[i]) * head_dim;
  T* d = dst + i * head_dim;
  for (int c = threadIdx.x; c < head_dim; c += blockDim.x) d[c] = s[c];
}

}  // namespace

template <class T>
void kv_append(T* k_cache, T* v_cache, long head_stride, const float* k_src, const float* v_src,
               long src_stride, int n, int n_kv_heads, int head_dim, const int32_t* rows, long rows_stride,
               cudaStream_t stream) {
  if (n <= 0 || n_kv_heads <= 0 || head_dim <= 0) return;
  kv_append_kernel<T><<<dim3(n, n_kv_heads), kThreads, 0, stream>>>(
      k_cache, v_cache, head_stride, k_src, v_src, src_stride, head_dim, rows, rows_stride);
}

template <class T>
void rope_append(T* k_cache, T* v_cache, long head_stride, float* qkv, int n_heads, int n_kv_heads, int head_dim,
                 const int32_t* pos, const float* cos, const float* sin, bool interleaved, const int32_t* slot0,
                 cudaStream_t stream, HeadNorms norms) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim < 2) return;
  detail::launch_overlapped(rope_append_kernel<T>, n_heads + n_kv_heads, kThreads, stream, k_cache, v_cache,
                            head_stride, qkv, n_heads, n_kv_heads, head_dim, pos, cos, sin, interleaved, slot0,
                            norms);
}

template <class T>
void gather_rows(T* dst, const T* src, const int32_t* idx, int n, int head_dim, cudaStream_t stream) {
  if (n <= 0 || head_dim <= 0) return;
  gather_rows_kernel<T><<<n, kThreads, 0, stream>>>(dst, src, idx, head_dim);
}

template void kv_append(__half*, __half*, long, const float*, const float*, long, int, int, int,
                        const int32_t*, long, cudaStream_t);
template void kv_append(__nv_bfloat16*, __nv_bfloat16*, long, const float*, const float*, long, int,
                        int, int, const int32_t*, long, cudaStream_t);
template void rope_append(__half*, __half*, long, float*, int, int, int, const int32_t*, const float*,
                          const float*, bool, const int32_t*, cudaStream_t, HeadNorms);
template void rope_append(__nv_bfloat16*, __nv_bfloat16*, long, float*, int, int, int, const int32_t*,
                          const float*, const float*, bool, const int32_t*, cudaStream_t, HeadNorms);
template void gather_rows(__half*, const __half*, const int32_t*, int, int, cudaStream_t);
template void gather_rows(__nv_bfloat16*, const __nv_bfloat16*, const int32_t*, int, int, cudaStream_t);
template void kv_append(float*, float*, long, const float*, const float*, long, int, int, int, const int32_t*, long,
                        cudaStream_t);
template void rope_append(float*, float*, long, float*, int, int, int, const int32_t*, const float*, const float*,
                          bool, const int32_t*, cudaStream_t, HeadNorms);
template void gather_rows(float*, const float*, const int32_t*, int, int, cudaStream_t);

}  // namespace kvs::cuda
