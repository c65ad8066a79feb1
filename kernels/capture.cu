// Prefill-capture reductions on the device: per-key column sums of attention probabilities, the
// copy of the last-W-query rows into the observation window and the block-pooled overview map.
// CPU twin: kernels/capture.h.
#include <algorithm>

#include "kernels/cuda_ops.h"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPoolCols = 4;                     // pool_add: columns a thread sums at once
constexpr int kPoolKeys = kPoolCols * kThreads;  // keys whose column sums a block stages

// Grid (ceil(n_keys / kThreads), n_heads). Thread j owns column j of head blockIdx.y and sums its
// rows in row order (no atomics: deterministic), then adds the block's sum to colsum.
__global__ void colsum_add_kernel(float* colsum,       // [n_heads, col_stride]
                                  long col_stride,
                                  const float* probs,  // [n_heads, nq, ld]
                                  int nq, int n_keys, long ld) {
  const int j = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n_keys) return;
  const long h = blockIdx.y;
  const float* p = probs + h * nq * ld + j;  // column j of head h, stride ld
  float s = 0.0f;
  for (int i = 0; i < nq; ++i) s += p[static_cast<long>(i) * ld];
  colsum[h * col_stride + j] += s;
}

// One block per (head, block row i_begin + r), r < n_rows; threads over the P window columns.
__global__ void window_rows_kernel(float* window,       // [n_heads, W, P]
                                   float* window_lse,   // [n_heads, W]
                                   const float* probs,  // [n_heads, nq, ld]
                                   const float* lse,    // [n_heads, nq]
                                   int nq, int n_keys, long ld, int q0, int P, int W,
                                   int i_begin, int n_rows) {
  const long h = blockIdx.x / n_rows;
  const int i = i_begin + static_cast<int>(blockIdx.x % n_rows);
  const long w = q0 + i - (P - W);  // window row, 0 <= w < W
  const float* src = probs + (h * nq + i) * ld;  // [n_keys]
  float* dst = window + (h * W + w) * P;         // [P]
  for (int j = threadIdx.x; j < P; j += blockDim.x) dst[j] = j < n_keys ? src[j] : 0.0f;
  if (threadIdx.x == 0) window_lse[h * W + w] = lse[h * nq + i];
}

// One block per (head h, pool row a_first + r, chunk of cells_per_block pool columns b <= a),
// flattened over n_heads * n_a * n_chunks (a 1-D grid: no 65535 limit on any extent). The chunk's
// keys are taken kPoolKeys at a time: threads over keys (coalesced, kPoolCols columns each, so
// that each has that many loads in flight) sum their columns over the pool row's query rows in row
// order into shared memory; then a thread per pool cell adds its keys' sums in key order. The CPU
// twin's additions in its order, so the same bits. (A thread per cell walking its keys and rows
// read each row 4 bytes at a time and left most of the GPU idle: 8,192 threads at 32K keys.)
__global__ void pool_add_kernel(float* pooled,       // [n_heads, nb, nb]
                                const float* probs,  // [n_heads, nq, ld]
                                int nq, int n_keys, long ld, int q0, int P, int block, int nb,
                                int a_first, int n_a, int cells_per_block, int n_chunks) {
  __shared__ float cols[kPoolKeys];  // [kPoolKeys] column sums of the keys c0..c1-1
  const int chunk = static_cast<int>(blockIdx.x % n_chunks);
  const int a = a_first + static_cast<int>(blockIdx.x / n_chunks % n_a);
  const long h = blockIdx.x / n_chunks / n_a;
  const int i0 = max(a * block, q0) - q0, i1 = min((a + 1) * block, q0 + nq) - q0;
  const int b0 = chunk * cells_per_block, b1 = min(b0 + cells_per_block, a + 1);  // above the diagonal: no mass
  const int k_begin = b0 * block, k_end = min(b1 * block, n_keys);
  if (k_begin >= k_end) return;  // the whole block
  const float* ph = probs + h * nq * ld;  // [nq, ld]
  const int b = b0 + static_cast<int>(threadIdx.x);  // this thread's cell, when b < b1
  float s = 0.0f;
  for (int c0 = k_begin; c0 < k_end; c0 += kPoolKeys) {
    const int c1 = min(c0 + kPoolKeys, k_end);
    float c[kPoolCols];
#pragma unroll
    for (int u = 0; u < kPoolCols; ++u) c[u] = 0.0f;
    for (int i = i0; i < i1; ++i) {
      const float* row = ph + static_cast<long>(i) * ld;  // [n_keys]
#pragma unroll
      for (int u = 0; u < kPoolCols; ++u) {
        const int j = c0 + static_cast<int>(threadIdx.x) + u * kThreads;
        if (j < c1) c[u] += row[j];
      }
    }
#pragma unroll
    for (int u = 0; u < kPoolCols; ++u) {
      const int j = c0 + static_cast<int>(threadIdx.x) + u * kThreads;
      if (j < c1) cols[j - c0] = c[u];
    }
    __syncthreads();
    if (b < b1) {
      const int j1 = min(min((b + 1) * block, n_keys), c1);
      for (int j = max(b * block, c0); j < j1; ++j) s += cols[j - c0];
    }
    __syncthreads();  // cols is read before the next keys overwrite it
  }
  if (b < b1 && b * block < n_keys) {
    pooled[(h * nb + a) * nb + b] += s / static_cast<float>(min(block, P - a * block));
  }
}

}  // namespace

void colsum_add(float* colsum, long col_stride, const float* probs, int n_heads, int nq,
                int n_keys, long ld, cudaStream_t stream) {
  if (n_heads <= 0 || nq <= 0 || n_keys <= 0) return;
  const dim3 grid((n_keys + kThreads - 1) / kThreads, n_heads);
  colsum_add_kernel<<<grid, kThreads, 0, stream>>>(colsum, col_stride, probs, nq, n_keys, ld);
}

void window_rows(float* window, float* window_lse, const float* probs, const float* lse,
                 int n_heads, int nq, int n_keys, long ld, int q0, int P, int W,
                 cudaStream_t stream) {
  // Block rows i with P - W <= q0 + i <= P - 1.
  const int i_begin = std::max(0, P - W - q0);
  const int i_end = std::min(nq, P - q0);
  const int n_rows = i_end - i_begin;
  if (n_heads <= 0 || n_rows <= 0 || W <= 0 || P <= 0) return;
  const long blocks = static_cast<long>(n_heads) * n_rows;
  window_rows_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      window, window_lse, probs, lse, nq, n_keys, ld, q0, P, W, i_begin, n_rows);
}

void pool_add(float* pooled, const float* probs, int n_heads, int nq, int n_keys, long ld, int q0,
              int P, int block, cudaStream_t stream) {
  if (n_heads <= 0 || nq <= 0 || n_keys <= 0 || block <= 0) return;
  const int nb = (P + block - 1) / block;
  const int a_first = q0 / block, n_a = (q0 + nq - 1) / block - a_first + 1;
  const int n_b = (n_keys - 1) / block + 1;  // pool columns holding keys of this block
  const int cells_per_block = std::clamp(kPoolKeys / block, 1, kThreads);
  const int n_chunks = (n_b + cells_per_block - 1) / cells_per_block;
  const long blocks = static_cast<long>(n_heads) * n_a * n_chunks;
  pool_add_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      pooled, probs, nq, n_keys, ld, q0, P, block, nb, a_first, n_a, cells_per_block, n_chunks);
}

}  // namespace kvs::cuda
