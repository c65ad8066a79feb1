// Prefill-capture reductions on the device: per-key column sums of attention probabilities and
// the copy of the last-W-query rows into the observation window. CPU twin: kernels/capture.h.
#include <algorithm>

#include "kernels/cuda_ops.h"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

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

}  // namespace kvs::cuda
