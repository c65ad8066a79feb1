// Key ranking on the device: the k cache entries with the largest attention logit maximized over a
// layer's query heads, computed from the attention rows the backend already holds (they need not
// cross PCIe). One kernel turns the rows into order keys, one block radix-selects the k-th largest
// key and writes the ranked indices in ascending order.
// CPU twins: ops::head_max_logit_keys, ops::top_k_keys (kernels/key_ranking.h).
#include <algorithm>

#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;         // head-max and fill kernels
constexpr int kSelectThreads = 1024;  // the select kernel's one block

// ops::order_key bit for bit: unsigned order = the float's order (-inf lowest, -0 just below +0).
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Grid-stride over keys: key[j] = order_key(max over heads of log p + lse), reading each head's row
// coalesced.
__global__ void head_max_kernel(uint32_t* key,           // [n]
                                const float* rows,       // [n_heads, stride]
                                long stride,
                                const float* lse,        // [n_heads]
                                int n_heads, int n) {
  const long step = static_cast<long>(gridDim.x) * blockDim.x;
  for (long j = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += step) {
    float m = -INFINITY;
    for (int h = 0; h < n_heads; ++h) m = fmaxf(m, logf(rows[h * stride + j]) + lse[h]);
    key[j] = order_key(m);
  }
}

// k >= n: every index, in order.
__global__ void all_indices_kernel(int32_t* out,  // [n]
                                   int n) {
  const int step = gridDim.x * blockDim.x;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < n; j += step) out[j] = j;
}

// One block of kSelectThreads, 1 <= k < n. Radix select of the k-th largest key, 8 bits a pass from
// the top: each pass counts the keys that match the bits fixed so far by their next byte, and
// thread 0 finds the byte whose bin holds the remaining rank. Then each thread takes a contiguous
// segment of the keys; scans of its counts above and equal to the k-th key give where its indices
// go and which of the equal keys are taken (the last `ties` of them, as the twin).
__global__ void __launch_bounds__(kSelectThreads) select_kernel(int32_t* out,         // [k]
                                                                const uint32_t* key,  // [n]
                                                                int n, int k) {
  __shared__ int hist[256];                // counts of the next byte among matching keys
  __shared__ uint32_t pick[2];             // thread 0's choice: prefix so far, remaining rank
  __shared__ int gt_scan[kSelectThreads];  // inclusive scan of each segment's keys above kth
  __shared__ int eq_scan[kSelectThreads];  // ... and equal to kth
  const int t = threadIdx.x;
  uint32_t prefix = 0, mask = 0;
  int rank = k;  // the wanted key is the rank-th largest of the keys matching prefix under mask
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (t < 256) hist[t] = 0;
    __syncthreads();  // hist zeroed; every thread has read the last pass's pick
    for (int j = t; j < n; j += kSelectThreads) {
      const uint32_t v = key[j];
      if ((v & mask) == prefix) atomicAdd(&hist[(v >> shift) & 255u], 1);
    }
    __syncthreads();  // hist complete
    if (t == 0) {
      int b = 255, r = rank;
      while (b > 0 && hist[b] < r) r -= hist[b--];
      pick[0] = prefix | (static_cast<uint32_t>(b) << shift);
      pick[1] = static_cast<uint32_t>(r);
    }
    __syncthreads();  // pick written
    prefix = pick[0];
    rank = static_cast<int>(pick[1]);
    mask |= 255u << shift;
  }
  const uint32_t kth = prefix;
  const int ties = rank;  // keys equal to kth taken: the last ones

  const int seg = (n + kSelectThreads - 1) / kSelectThreads;
  const int lo = min(n, t * seg), hi = min(n, lo + seg);
  int gt = 0, eq = 0;
  for (int j = lo; j < hi; ++j) {
    const uint32_t v = key[j];
    gt += v > kth;
    eq += v == kth;
  }
  gt_scan[t] = gt;
  eq_scan[t] = eq;
  __syncthreads();  // counts written
  for (int off = 1; off < kSelectThreads; off <<= 1) {  // Hillis-Steele, inclusive
    const int a = t >= off ? gt_scan[t - off] : 0, b = t >= off ? eq_scan[t - off] : 0;
    __syncthreads();  // every read of this round done
    gt_scan[t] += a;
    eq_scan[t] += b;
    __syncthreads();  // this round written
  }
  const int skip = eq_scan[kSelectThreads - 1] - ties;  // equal keys left out: the first ones
  int e = eq_scan[t] - eq;                               // equal keys before the segment
  int o = gt_scan[t] - gt + max(0, e - skip);
  for (int j = lo; j < hi; ++j) {
    const uint32_t v = key[j];
    if (v > kth) {
      out[o++] = j;
    } else if (v == kth) {
      if (e++ >= skip) out[o++] = j;
    }
  }
}

}  // namespace

void rank_keys(int32_t* out, const float* rows, long stride, const float* lse, int n_heads, int n, int k,
               uint32_t* scratch, cudaStream_t stream) {
  if (k <= 0 || n <= 0) return;
  if (k >= n) {
    all_indices_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(out, n);
    return;
  }
  head_max_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(scratch, rows, stride, lse, n_heads, n);
  select_kernel<<<1, kSelectThreads, 0, stream>>>(out, scratch, n, k);
}

}  // namespace kvs::cuda
