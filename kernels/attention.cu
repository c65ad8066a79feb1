// Attention on the device: one decode query row per head over listed cache rows (scores, softmax,
// split-key P·V, fixed-order reduction), and the causal softmax of prefill score blocks.
// CPU twins: ops::attend_rows (decode) and the softmax inside ops::attend (prefill).
#include <stdexcept>

#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;              // every kernel here runs 256-thread blocks
constexpr int kWarps = kThreads / 32;
constexpr int kScoreKeysPerBlock = 64;     // keys per block of the scores kernel
constexpr int kPvKeysPerSplit = 256;       // keys per split of the P·V kernel
constexpr int kMaxHeadDim = kThreads;      // P·V gives each output dimension a thread

int pv_splits(int max_rows) { return (max_rows + kPvKeysPerSplit - 1) / kPvKeysPerSplit; }

// Softmax of p[0..n) in place by the whole block, with the steps of ops::softmax: exp(s - max),
// their sum, times 1/sum. Returns the log-sum-exp. Each thread touches the same indices in every
// pass, so no barrier is needed between them. red: __shared__ float[32].
__device__ float softmax_in_place(float* p, int n, float* red) {
  float m = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, p[j]);
  m = detail::block_max(m, red);
  float sum = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(p[j] - m);
    p[j] = e;
    sum += e;
  }
  sum = detail::block_sum(sum, red);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < n; j += blockDim.x) p[j] *= inv;
  return m + logf(sum);
}

// (1) Scaled logits. Grid (n_heads, ceil(max_rows / kScoreKeysPerBlock)); each warp takes one key
// at a time, its lanes stride over the head_dim/2 pairs, then a warp reduction.
__global__ void decode_scores_kernel(float* probs,  // [n_heads, probs_stride]
                                     long probs_stride,
                                     const float* q,   // [n_heads, head_dim]
                                     const __half* k,  // [n_kv_heads, head_stride]
                                     long head_stride,
                                     const int32_t* rows,    // [n_kv_heads, rows_stride]
                                     long rows_stride,
                                     const int32_t* n_rows,  // [n_kv_heads]
                                     int group, int head_dim, float scale,
                                     const float* rope_cos,  // [n_pos, head_dim/2] or null
                                     const float* rope_sin,  // [n_pos, head_dim/2] or null
                                     bool interleaved) {
  __shared__ float qs[kMaxHeadDim];  // [head_dim]
  const int h = blockIdx.x;
  const int g = h / group;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    qs[i] = q[static_cast<long>(h) * head_dim + i];
  }
  __syncthreads();
  const int n = n_rows[g];
  const int j_begin = static_cast<int>(blockIdx.y) * kScoreKeysPerBlock;
  const int j_end = min(n, j_begin + kScoreKeysPerBlock);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int half = head_dim / 2;
  const __half* kg = k + static_cast<long>(g) * head_stride;      // [cap, head_dim]
  const int32_t* rg = rows + static_cast<long>(g) * rows_stride;  // [n_rows[g]]
  float* ph = probs + static_cast<long>(h) * probs_stride;       // [n_rows[g]]
  for (int j = j_begin + warp; j < j_end; j += kWarps) {  // uniform over the warp
    const long row = rg[j];
    const __half* kr = kg + row * head_dim;  // [head_dim]
    float dot = 0.0f;
    for (int t = lane; t < half; t += 32) {
      const int i0 = interleaved ? 2 * t : t;
      const int i1 = interleaved ? 2 * t + 1 : t + half;
      float a = __half2float(kr[i0]), b = __half2float(kr[i1]);
      if (rope_cos) {  // rotate the key by its cache row index, as ops::rope_apply does
        const float c = rope_cos[row * half + t], s = rope_sin[row * half + t];
        const float ra = a * c - b * s;
        const float rb = a * s + b * c;
        a = ra;
        b = rb;
      }
      dot += qs[i0] * a + qs[i1] * b;
    }
    dot = detail::warp_sum(dot);
    if (lane == 0) ph[j] = scale * dot;
  }
}

// (2) Softmax over the n_rows[g] logits of each head in place, and its log-sum-exp. One block per
// head. Same steps as ops::softmax: exp(s - max), sum, multiply by 1/sum.
__global__ void decode_softmax_kernel(float* probs,  // [n_heads, probs_stride]
                                      long probs_stride,
                                      float* lse,             // [n_heads]
                                      const int32_t* n_rows,  // [n_kv_heads]
                                      int group) {
  __shared__ float red[32];
  const int h = blockIdx.x;
  const int n = n_rows[h / group];
  float* p = probs + static_cast<long>(h) * probs_stride;  // [n]
  const float row_lse = softmax_in_place(p, n, red);
  if (threadIdx.x == 0) lse[h] = row_lse;
}

// (3) Partial P·V over one split of kPvKeysPerSplit keys. Grid (n_heads, n_splits). Thread t
// owns dimension t % head_dim of key lane t / head_dim (kThreads / head_dim lanes); the lanes are
// summed in lane order into scratch. Splits past n_rows[g] write zeros.
__global__ void decode_pv_kernel(float* scratch,       // [n_heads, n_splits, head_dim]
                                 const float* probs,   // [n_heads, probs_stride]
                                 long probs_stride,
                                 const __half* v,      // [n_kv_heads, head_stride]
                                 long head_stride,
                                 const int32_t* rows,  // [n_kv_heads, rows_stride]
                                 long rows_stride,
                                 const int32_t* n_rows,  // [n_kv_heads]
                                 int group, int head_dim) {
  __shared__ float part[kThreads];  // [lanes, head_dim]
  const int h = blockIdx.x, split = blockIdx.y, n_splits = gridDim.y;
  const int g = h / group;
  const int n = n_rows[g];
  const int lanes = kThreads / head_dim;  // >= 1: head_dim <= kThreads
  const int i = threadIdx.x % head_dim, l = threadIdx.x / head_dim;
  const int j_begin = split * kPvKeysPerSplit;
  const int j_end = min(n, j_begin + kPvKeysPerSplit);
  float acc = 0.0f;
  if (l < lanes) {
    const float* ph = probs + static_cast<long>(h) * probs_stride;   // [n]
    const __half* vg = v + static_cast<long>(g) * head_stride;        // [cap, head_dim]
    const int32_t* rg = rows + static_cast<long>(g) * rows_stride;    // [n]
    for (int j = j_begin + l; j < j_end; j += lanes) {
      acc += ph[j] * __half2float(vg[static_cast<long>(rg[j]) * head_dim + i]);
    }
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  if (static_cast<int>(threadIdx.x) < head_dim) {
    float s = 0.0f;
    for (int r = 0; r < lanes; ++r) s += part[r * head_dim + threadIdx.x];
    scratch[(static_cast<long>(h) * n_splits + split) * head_dim + threadIdx.x] = s;
  }
}

// (4) Sum of the splits in split order. One block per head.
__global__ void decode_reduce_kernel(float* out,            // [n_heads, head_dim]
                                     const float* scratch,  // [n_heads, n_splits, head_dim]
                                     int n_splits, int head_dim) {
  const long h = blockIdx.x;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    float s = 0.0f;
    for (int sp = 0; sp < n_splits; ++sp) s += scratch[(h * n_splits + sp) * head_dim + i];
    out[h * head_dim + i] = s;
  }
}

// One block per (head, query row): causal softmax of the row's keys 0..q0+i in place, zeros for
// keys q0+i+1..n_keys-1, entries at n_keys.. untouched.
__global__ void softmax_causal_kernel(float* scores,  // [n_heads, nq, ld]
                                      float* lse,     // [n_heads, nq]
                                      int nq, int n_keys, long ld, int q0, int window) {
  __shared__ float red[32];
  const long r = blockIdx.x;  // h * nq + i
  const int i = static_cast<int>(r % nq);
  const int n = q0 + i + 1;    // causal keys of this row (<= n_keys)
  const int lo = window > 0 ? max(0, n - window) : 0;  // first key inside the window
  float* s = scores + r * ld;  // [n_keys]
  const float row_lse = softmax_in_place(s + lo, n - lo, red);
  for (int j = threadIdx.x; j < lo; j += blockDim.x) s[j] = 0.0f;
  for (int j = n + threadIdx.x; j < n_keys; j += blockDim.x) s[j] = 0.0f;
  if (threadIdx.x == 0) lse[r] = row_lse;
}

}  // namespace

long attend_decode_scratch_floats(int n_heads, int max_rows, int head_dim) {
  const int splits = max_rows > 0 ? pv_splits(max_rows) : 1;
  return static_cast<long>(n_heads) * splits * head_dim;
}

void attend_decode(float* out, float* probs, long probs_stride, float* lse,
                   const float* q, const __half* k, const __half* v, long head_stride,
                   const int32_t* rows, long rows_stride, const int32_t* n_rows, int max_rows,
                   int n_heads, int n_kv_heads, int head_dim, float scale, const float* rope_cos,
                   const float* rope_sin, bool interleaved, float* scratch, cudaStream_t stream) {
  if (n_heads <= 0 || max_rows <= 0) return;
  if (head_dim < 2 || head_dim > kMaxHeadDim || head_dim % 2 != 0) {
    throw std::invalid_argument("attend_decode: head_dim must be even and at most 256");
  }
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    throw std::invalid_argument("attend_decode: n_heads must be a multiple of n_kv_heads");
  }
  const int group = n_heads / n_kv_heads;
  const int score_blocks = (max_rows + kScoreKeysPerBlock - 1) / kScoreKeysPerBlock;
  const int splits = pv_splits(max_rows);
  decode_scores_kernel<<<dim3(n_heads, score_blocks), kThreads, 0, stream>>>(
      probs, probs_stride, q, k, head_stride, rows, rows_stride, n_rows, group, head_dim, scale,
      rope_cos, rope_sin, interleaved);
  decode_softmax_kernel<<<n_heads, kThreads, 0, stream>>>(probs, probs_stride, lse, n_rows, group);
  decode_pv_kernel<<<dim3(n_heads, splits), kThreads, 0, stream>>>(
      scratch, probs, probs_stride, v, head_stride, rows, rows_stride, n_rows, group, head_dim);
  decode_reduce_kernel<<<n_heads, kThreads, 0, stream>>>(out, scratch, splits, head_dim);
}

void softmax_causal(float* scores, float* lse, int n_heads, int nq, int n_keys,
                    long ld, int q0, int window, cudaStream_t stream) {
  if (n_heads <= 0 || nq <= 0) return;
  const long blocks = static_cast<long>(n_heads) * nq;
  softmax_causal_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      scores, lse, nq, n_keys, ld, q0, window);
}

}  // namespace kvs::cuda
