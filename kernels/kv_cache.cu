// KV-cache writes on the device: appending fp32 key/value rows, rounded to the cache's 16-bit
// type, at per-head slots, and gathering listed cache rows (compaction after eviction).
// CPU twin: KvStore::append / ::evict.
#include "kernels/cuda_ops.h"
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
                                 const int32_t* slot0) {  // [n_kv_heads]
  using S = detail::Store<T>;
  const long t = blockIdx.x;
  const int g = blockIdx.y;
  const long dst = static_cast<long>(g) * head_stride + (slot0[g] + t) * head_dim;
  const long src = t * src_stride + static_cast<long>(g) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    k_cache[dst + i] = S::from_float(k_src[src + i]);
    v_cache[dst + i] = S::from_float(v_src[src + i]);
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
               long src_stride, int n, int n_kv_heads, int head_dim, const int32_t* slot0,
               cudaStream_t stream) {
  if (n <= 0 || n_kv_heads <= 0 || head_dim <= 0) return;
  kv_append_kernel<T><<<dim3(n, n_kv_heads), kThreads, 0, stream>>>(
      k_cache, v_cache, head_stride, k_src, v_src, src_stride, head_dim, slot0);
}

template <class T>
void gather_rows(T* dst, const T* src, const int32_t* idx, int n, int head_dim, cudaStream_t stream) {
  if (n <= 0 || head_dim <= 0) return;
  gather_rows_kernel<T><<<n, kThreads, 0, stream>>>(dst, src, idx, head_dim);
}

template void kv_append(__half*, __half*, long, const float*, const float*, long, int, int, int,
                        const int32_t*, cudaStream_t);
template void kv_append(__nv_bfloat16*, __nv_bfloat16*, long, const float*, const float*, long, int,
                        int, int, const int32_t*, cudaStream_t);
template void gather_rows(__half*, const __half*, const int32_t*, int, int, cudaStream_t);
template void gather_rows(__nv_bfloat16*, const __nv_bfloat16*, const int32_t*, int, int, cudaStream_t);

}  // namespace kvs::cuda
