// Prefill-capture reductions on the device: per-key column sums of attention probabilities, the
// copy of the last-W-query rows into the observation window and the block-pooled overview map.
// CPU twin: kernels/capture.h.
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

// One thread per cell (head h, pool row a_first + r, pool column b), flattened over
// n_heads * n_a * n_b (a 1-D grid: no 65535 limit on any extent). Each sums its rows in order,
// each row's keys in order (no atomics).
__global__ void pool_add_kernel(float* pooled,       // [n_heads, nb, nb]
                                const float* probs,  // [n_heads, nq, ld]
                                int nq, int n_keys, long ld, int q0, int P, int block, int nb,
                                int a_first, int n_a, int n_b, long cells) {
  const long idx = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= cells) return;
  const int b = static_cast<int>(idx % n_b);
  const int a = a_first + static_cast<int>(idx / n_b % n_a);
  const long h = idx / n_b / n_a;
  if (b > a) return;  // above the diagonal: no causal mass
  const int i0 = max(a * block, q0) - q0, i1 = min((a + 1) * block, q0 + nq) - q0;
  const int j0 = b * block, j1 = min((b + 1) * block, n_keys);
  const float* ph = probs + h * nq * ld;  // [nq, ld]
  float s = 0.0f;
  for (int j = j0; j < j1; ++j) {  // the CPU twin's order: each key's column sum, keys in order
    float c = 0.0f;
    for (int i = i0; i < i1; ++i) c += ph[static_cast<long>(i) * ld + j];
    s += c;
  }
  pooled[(h * nb + a) * nb + b] += s / static_cast<float>(min(block, P - a * block));
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
  const long cells = static_cast<long>(n_heads) * n_a * n_b;
  const long blocks = (cells + kThreads - 1) / kThreads;
  pool_add_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      pooled, probs, nq, n_keys, ld, q0, P, block, nb, a_first, n_a, n_b, cells);
}

}  // namespace kvs::cuda
