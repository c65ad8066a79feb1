// fp32 -> fp16 / bf16 conversion (plain, and split into 16-bit parts that sum to it) and the embedding
// lookup of stored table rows on the device (fp32 storage: a copy, one part).
// CPU twins: kvs::fp32_to_fp16 / fp32_to_bf16 (kernels/quant.h) and the engine's embedding row copy.
#include "kernels/cuda_launch.cuh"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"
#include "kernels/cuda_store.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void to_store_kernel(T* out,          // [n]
                                const float* x,  // [n]
                                long n) {
  const long step = static_cast<long>(blockDim.x) * gridDim.x;
  for (long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = detail::Store<T>::from_float(x[i]);
  }
}

template <class T>
__global__ void split_store_kernel(T* parts,         // [n_parts, part_stride]
                                   long part_stride, int n_parts,
                                   const float* x,   // [n]
                                   long n) {
  const long step = static_cast<long>(blockDim.x) * gridDim.x;
  for (long i = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    detail::store_split(parts + i, part_stride, n_parts, x[i]);
  }
}

// One block per token row.
template <class T>
__global__ void embed_rows_kernel(float* x,               // [n, dim]
                                  const T* table,         // [vocab, dim]
                                  const int32_t* tokens,  // [n]
                                  int dim, float scale) {
  detail::wait_for_previous_kernels();  // (launched overlapped: cuda_launch.cuh)
  detail::let_next_kernel_start();
  const long t = blockIdx.x;
  const T* src = table + static_cast<long>(tokens[t]) * dim;
  float* dst = x + t * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = detail::Store<T>::to_float(src[i]) * scale;
}

}  // namespace

template <class T>
void to_store(T* out, const float* x, long n, cudaStream_t stream) {
  if (n <= 0) return;
  to_store_kernel<T><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(out, x, n);
}

template <class T>
void split_store(T* parts, long part_stride, int n_parts, const float* x, long n, cudaStream_t stream) {
  if (n <= 0 || n_parts <= 0) return;
  split_store_kernel<T><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(parts, part_stride, n_parts, x, n);
}

template <class T>
void embed_rows(float* x, const T* table, const int32_t* tokens, int n, int dim, cudaStream_t stream, float scale) {
  if (n <= 0 || dim <= 0) return;
  detail::launch_overlapped(embed_rows_kernel<T>, n, kThreads, stream, x, table, tokens, dim, scale);
}

template void to_store(__half*, const float*, long, cudaStream_t);
template void to_store(__nv_bfloat16*, const float*, long, cudaStream_t);
template void split_store(__half*, long, int, const float*, long, cudaStream_t);
template void split_store(__nv_bfloat16*, long, int, const float*, long, cudaStream_t);
template void embed_rows(float*, const __half*, const int32_t*, int, int, cudaStream_t, float);
template void embed_rows(float*, const __nv_bfloat16*, const int32_t*, int, int, cudaStream_t, float);
template void to_store(float*, const float*, long, cudaStream_t);
template void split_store(float*, long, int, const float*, long, cudaStream_t);
template void embed_rows(float*, const float*, const int32_t*, int, int, cudaStream_t, float);

}  // namespace kvs::cuda
