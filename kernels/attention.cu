// Attention on the device: one decode query row per head over listed cache rows (flash-decoding:
// splits of keys scored and summed with their own max, then combined in a fixed order, each key
// and value read once per KV head), and the causal softmax of prefill score blocks, which also
// writes the probabilities as the parts of the stored type the P·V GEMMs read.
// CPU twins: ops::attend_rows (decode) and the softmax inside ops::attend (prefill).
#include <stdexcept>

#include "kernels/cuda_launch.cuh"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_reduce.cuh"
#include "kernels/cuda_softcap.cuh"
#include "kernels/cuda_store.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;              // every kernel here runs 256-thread blocks
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 256;
constexpr int kKeyLanes = 4;               // lanes that share one key's dot products
constexpr int kBlockHeads = 8;             // query heads of one KV head per decode block
constexpr int kMinSplitKeys = 32;          // keys per decode split, doubled up to...
constexpr int kMaxSplitKeys = 512;         // ...this while the grid has over kSplitBlocks blocks
constexpr int kSplitBlocks = 1024;
constexpr int kRowLoads = 4;               // row elements a thread loads at once (softmax, combine)
constexpr int kCombineKeys = kRowLoads * kThreads;  // probabilities normalized per combine block
constexpr int kTileLoads = 4;                             // 16-byte loads per thread for one tile...
constexpr int kTileLoadBytes = kTileLoads * kThreads * 16;  // ...so a tile has at most 16 KB of rows
// The tile buffer holds one padded 16-bit row per key lane group at head_dim 128 (64 keys, 17 KB),
// so that a split of 64 keys or more is staged in whole tiles of 64 (of 32 with fp32 rows).
constexpr int kTileBytes = (kThreads / kKeyLanes) * (128 + 8) * 2;
constexpr int kOutPerThread = kBlockHeads * kMaxHeadDim / 2 / kThreads;  // (head, pair) sums

// Keys per split of a decode launch: small splits for short contexts (enough blocks to fill the
// GPU), larger ones for long contexts (fewer partial results to combine).
int split_keys(int kv_blocks, int max_rows) {
  int keys = kMinSplitKeys;
  while (keys < kMaxSplitKeys && static_cast<long>(kv_blocks) * ((max_rows + keys - 1) / keys) > kSplitBlocks) {
    keys *= 2;
  }
  return keys;
}

// One round of a block's pass over p[j0 + i·kThreads] (i < kRowLoads; those below n): every load
// issued before any store, then each value x, soft-capped by cap (0: as it is), becomes
// exp(x - m) · inv, written back and handed to put(j, value).
template <class Put>
__device__ void exp_scale_round(float* p, int j0, int n, float m, float inv, float cap, const Put& put) {
  float x[kRowLoads];
#pragma unroll
  for (int i = 0; i < kRowLoads; ++i) {
    if (j0 + i * kThreads < n) x[i] = detail::soft_capped(p[j0 + i * kThreads], cap);
  }
#pragma unroll
  for (int i = 0; i < kRowLoads; ++i) {
    const int j = j0 + i * kThreads;
    if (j < n) {
      const float v = expf(x[i] - m) * inv;
      p[j] = v;
      put(j, v);
    }
  }
}

// Softmax of p[0..n), each value soft-capped by cap (0: none) as it is read, in place by the whole
// block; returns the log-sum-exp. Two passes over p (a prefill row block is far larger than L2, so
// each pass is a trip to HBM): the first reads it, each thread keeping the max of its elements and
// the sum of their exp(s - max), rescaled when the max grows, then the block combines them; the
// second writes exp(s - max) / sum. Each thread has kRowLoads loads in flight (a loop that stored
// each element before loading the next kept one, and the three passes of max, exp and scale read
// the row three times and wrote it twice). The second pass also hands each probability to
// put(j, value). red: __shared__ float[32].
template <class Put>
__device__ float softmax_in_place(float* p, int n, float cap, float* red, const Put& put) {
  float m = -INFINITY, sum = 0.0f;
  for (int j0 = threadIdx.x; j0 < n; j0 += kRowLoads * kThreads) {
    float x[kRowLoads];
#pragma unroll
    for (int i = 0; i < kRowLoads; ++i)
      x[i] = j0 + i * kThreads < n ? detail::soft_capped(p[j0 + i * kThreads], cap) : -INFINITY;
    float mx = m;
#pragma unroll
    for (int i = 0; i < kRowLoads; ++i) mx = fmaxf(mx, x[i]);
    if (mx > m) {
      sum *= expf(m - mx);  // 0 while m is still -inf
      m = mx;
    }
#pragma unroll
    for (int i = 0; i < kRowLoads; ++i) sum += expf(x[i] - m);  // 0 past n
  }
  const float row_max = detail::block_max(m, red);
  const float row_sum = detail::block_sum(m == -INFINITY ? 0.0f : sum * expf(m - row_max), red);
  const float inv = 1.0f / row_sum;
  for (int j0 = threadIdx.x; j0 < n; j0 += kRowLoads * kThreads) {
    exp_scale_round(p, j0, n, row_max, inv, cap, put);
  }
  return row_max + logf(row_sum);
}

// Copies the cache rows rs[t0 .. t0 + n) of one KV head (src [cap, head_dim]) into tile
// [n, row_values] (values of T) with 16-byte loads spread over the block: each thread issues all
// of its loads (at most kTileLoads) before it stores any, so a block has the whole tile in flight
// (16 KB). A loop that stored each value before loading the next kept one load per thread in
// flight (4 KB a block), which at long contexts left HBM mostly idle. Thread t's k-th load is unit
// t + k·kThreads of the tile: row and column stepped from t's own without a division each.
template <class T>
__device__ void load_tile(uint4* tile, const T* src, const int32_t* rs, int t0, int n, int head_dim,
                          int row_values) {
  const int per_row = head_dim / detail::kPerLoad<T>;  // uint4 per row; n * per_row <= kTileLoads * kThreads
  const int step_rows = kThreads / per_row, step_cols = kThreads % per_row;
  int j[kTileLoads], c[kTileLoads];  // row in the tile, uint4 in the row
  j[0] = threadIdx.x / per_row;
  c[0] = threadIdx.x % per_row;
#pragma unroll
  for (int s = 1; s < kTileLoads; ++s) {
    j[s] = j[s - 1] + step_rows;
    c[s] = c[s - 1] + step_cols;
    if (c[s] >= per_row) {
      c[s] -= per_row;
      ++j[s];
    }
  }
  uint4 x[kTileLoads];
#pragma unroll
  for (int s = 0; s < kTileLoads; ++s) {
    if (j[s] < n) x[s] = reinterpret_cast<const uint4*>(src + static_cast<long>(rs[t0 + j[s]]) * head_dim)[c[s]];
  }
#pragma unroll
  for (int s = 0; s < kTileLoads; ++s) {
    if (j[s] < n) tile[j[s] * (row_values / detail::kPerLoad<T>) + c[s]] = x[s];
  }
}

// Decode, pass 1 (flash-decoding split): one block per (KV head, group of up to kBlockHeads of
// its query heads, split of split_keys listed rows), so that each key and value row is read once
// for all the query heads that share it, a tile of rows at a time into shared memory.
// Grid (n_kv_heads * head_blocks, n_splits).
//  - scores: kKeyLanes lanes per key of the tile, over the rotation pairs (the key rotated by
//    its slot, or its cache row without slots, when rope_cos is given) for every query head of
//    the block; the scores (scaled, soft-capped: ops::Scoring) go to probs (normalized by pass 2;
//    unless probs is null: no hook reads the rows) and to e;
//  - per head, the split's max m and sum l of exp(logit - m);
//  - per head and output dimension, sum over the split of exp(logit - m) * value.
// part [n_heads, n_splits, head_dim + 2] gets the sums, then m, then l (m = -inf, l = 0 and
// zero sums for a split past the head's rows). At most 64 registers (launch bounds), so that four
// blocks share an SM as before the tile loads were batched (72 without the bound; no spills).
template <class T>
__global__ void __launch_bounds__(kThreads, 4) decode_split_kernel(float* part,      // [n_heads, n_splits, head_dim + 2]
                                    float* probs,     // [n_heads, probs_stride] or null
                                    long probs_stride,
                                    const float* q,   // [n_heads, head_dim]
                                    const T* k,       // [n_kv_heads, head_stride]
                                    const T* v,       // [n_kv_heads, head_stride]
                                    long head_stride,
                                    const int32_t* rows,    // [n_kv_heads, rows_stride]
                                    long rows_stride,
                                    const int32_t* n_rows,  // [n_kv_heads]
                                    int group, int head_blocks, int keys_per_split, int head_dim,
                                    ops::Scoring score,
                                    const float* rope_cos,  // [n_pos, head_dim/2] or null
                                    const float* rope_sin,  // [n_pos, head_dim/2] or null
                                    const int32_t* slots,   // [n_kv_heads, rows_stride] or null
                                    bool interleaved) {
  detail::wait_for_previous_kernels();  // (launched overlapped: cuda_launch.cuh)
  detail::let_next_kernel_start();
  __shared__ float4 qs4[kBlockHeads * kMaxHeadDim / 4];  // 16-byte aligned for the vector reads
  float* qs = reinterpret_cast<float*>(qs4);              // [nh, head_dim]
  __shared__ float4 e4[kBlockHeads * kMaxSplitKeys / 4];  // 16-byte aligned for the value pass
  float* e = reinterpret_cast<float*>(e4);                  // [nh, keys_per_split]
  __shared__ int32_t rs[kMaxSplitKeys];              // [keys_per_split] cache rows of the split
  __shared__ uint4 tile[kTileBytes / 16];            // [keys, head_dim + kPerLoad] or [keys, head_dim] of T
  const int g = blockIdx.x / head_blocks;
  const int h0 = g * group + static_cast<int>(blockIdx.x % head_blocks) * kBlockHeads;  // first head
  const int nh = min(kBlockHeads, (g + 1) * group - h0);
  const int split = blockIdx.y, n_splits = gridDim.y;
  const int j0 = split * keys_per_split;
  const int cnt = max(0, min(keys_per_split, n_rows[g] - j0));  // keys of this split
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int half = head_dim / 2;
  constexpr int kTileValues = kTileLoadBytes / static_cast<int>(sizeof(T));  // values of T one tile loads
  // values per key row in the tile, 16 bytes of padding: 4 banks apart, no conflicts
  const int k_row = head_dim + detail::kPerLoad<T>;
  const int k_tile_keys = min(min(kTileBytes / static_cast<int>(sizeof(T)) / k_row, kThreads / kKeyLanes),
                              kTileValues / head_dim);
  int v_tile_keys = 1;  // a power of two, as the splits are: no part-filled tiles within a split
  while (2 * v_tile_keys * head_dim <= kTileValues) v_tile_keys *= 2;
  using S = detail::Store<T>;
  using Pair = typename S::Pair;
  const Pair* tile2 = reinterpret_cast<const Pair*>(tile);  // [keys, row / 2]
  for (int i = threadIdx.x; i < nh * head_dim; i += blockDim.x) qs[i] = q[static_cast<long>(h0) * head_dim + i];
  const int32_t* rg = rows + static_cast<long>(g) * rows_stride + j0;  // [cnt]
  for (int j = threadIdx.x; j < cnt; j += blockDim.x) rs[j] = rg[j];
  __syncthreads();

  // Scores: kKeyLanes consecutive lanes per key, each over every kKeyLanes-th unit of two
  // rotation pairs (p = 2u, 2u + 1; a rotate-half row keeps the units' first elements in words
  // 0..half/2-1 and second ones after them, an interleaved row keeps unit u in words 2u, 2u + 1).
  const T* kg = k + static_cast<long>(g) * head_stride;  // [cap, head_dim]
  const int sub = threadIdx.x % kKeyLanes;
  const int units = half / 2;
  for (int t0 = 0; t0 < cnt; t0 += k_tile_keys) {
    const int n = min(k_tile_keys, cnt - t0);
    load_tile(tile, kg, rs, t0, n, head_dim, k_row);
    __syncthreads();
    const int jt = threadIdx.x / kKeyLanes;  // this lane group's key in the tile
    const bool valid = jt < n;
    const long row = valid ? rs[t0 + jt] : 0;
    const long slot = valid && slots ? slots[static_cast<long>(g) * rows_stride + j0 + t0 + jt] : row;
    const Pair* kr = tile2 + jt * (k_row / 2);  // [k_row / 2]
    float dot[kBlockHeads];
#pragma unroll
    for (int r = 0; r < kBlockHeads; ++r) dot[r] = 0.0f;
    for (int u = sub; valid && u < units; u += kKeyLanes) {
      float2 x = S::to_float2(interleaved ? kr[2 * u] : kr[u]);              // (a, b) of 2u | a of 2u, 2u + 1
      float2 y = S::to_float2(interleaved ? kr[2 * u + 1] : kr[units + u]);  // (a, b) of 2u + 1 | b of 2u, 2u + 1
      float a0 = x.x, a1 = interleaved ? y.x : x.y, b0 = interleaved ? x.y : y.x, b1 = y.y;
      if (rope_cos) {  // rotate the key by its slot, as ops::rope_apply does
        const float2 c = *reinterpret_cast<const float2*>(rope_cos + slot * half + 2 * u);
        const float2 sn = *reinterpret_cast<const float2*>(rope_sin + slot * half + 2 * u);
        const float ra0 = a0 * c.x - b0 * sn.x, ra1 = a1 * c.y - b1 * sn.y;
        b0 = a0 * sn.x + b0 * c.x;
        b1 = a1 * sn.y + b1 * c.y;
        a0 = ra0;
        a1 = ra1;
      }
#pragma unroll
      for (int r = 0; r < kBlockHeads; ++r) {
        if (r >= nh) break;
        const float* qr = qs + r * head_dim;  // [head_dim]
        if (interleaved) {
          const float4 qq = *reinterpret_cast<const float4*>(qr + 4 * u);  // a, b of 2u, then of 2u + 1
          dot[r] += qq.x * a0 + qq.y * b0 + qq.z * a1 + qq.w * b1;
        } else {
          const float2 qa = *reinterpret_cast<const float2*>(qr + 2 * u);
          const float2 qb = *reinterpret_cast<const float2*>(qr + half + 2 * u);
          dot[r] += qa.x * a0 + qa.y * a1 + qb.x * b0 + qb.y * b1;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kBlockHeads; ++r) {  // every lane takes part in the shuffles
      if (r >= nh) break;
      float d = dot[r];
      for (int o = 1; o < kKeyLanes; o <<= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
      if (valid && sub == 0) {
        d = detail::soft_capped(d * score.scale, score.softcap);
        e[r * keys_per_split + t0 + jt] = d;
        if (probs) probs[static_cast<long>(h0 + r) * probs_stride + j0 + t0 + jt] = d;
      }
    }
    __syncthreads();  // the tile is read; the next one overwrites it
  }

  // Per head (a warp each): the split's max and sum of exponentials; e becomes exp(logit - m).
  for (int r = warp; r < nh; r += kWarps) {
    float* er = e + r * keys_per_split;  // [cnt]
    float m = -INFINITY;
    for (int j = lane; j < cnt; j += 32) m = fmaxf(m, er[j]);
    m = detail::warp_max(m);
    float l = 0.0f;
    for (int j = lane; j < cnt; j += 32) {
      const float x = expf(er[j] - m);
      er[j] = x;
      l += x;
    }
    l = detail::warp_sum(l);
    if (lane == 0) {
      float* pr = part + (static_cast<long>(h0 + r) * n_splits + split) * (head_dim + 2);  // [head_dim + 2]
      pr[head_dim] = m;
      pr[head_dim + 1] = l;
    }
  }

  // Value sums: a thread per (head, pair of dimensions), at most kOutPerThread of them; a warp's
  // lanes read consecutive pairs of a value row in the tile.
  const T* vg = v + static_cast<long>(g) * head_stride;  // [cap, head_dim]
  float2 acc[kOutPerThread];
#pragma unroll
  for (int i = 0; i < kOutPerThread; ++i) acc[i] = {0.0f, 0.0f};
  for (int t0 = 0; t0 < cnt; t0 += v_tile_keys) {
    const int n = min(v_tile_keys, cnt - t0);
    __syncthreads();  // e is final (first tile); the previous tile is read
    load_tile(tile, vg, rs, t0, n, head_dim, head_dim);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kOutPerThread; ++i) {
      const int o = threadIdx.x + i * kThreads;
      if (o >= nh * half) break;
      const int r = o / half, d = o % half;
      const float* er = e + r * keys_per_split + t0;  // [n]; t0 and keys_per_split are multiples of 4
      int jt = 0;
      for (; jt + 4 <= n; jt += 4) {  // four weights in one shared-memory read, in key order
        const float4 w = *reinterpret_cast<const float4*>(er + jt);
        const float2 x0 = S::to_float2(tile2[jt * half + d]), x1 = S::to_float2(tile2[(jt + 1) * half + d]);
        const float2 x2 = S::to_float2(tile2[(jt + 2) * half + d]), x3 = S::to_float2(tile2[(jt + 3) * half + d]);
        acc[i].x += w.x * x0.x;
        acc[i].y += w.x * x0.y;
        acc[i].x += w.y * x1.x;
        acc[i].y += w.y * x1.y;
        acc[i].x += w.z * x2.x;
        acc[i].y += w.z * x2.y;
        acc[i].x += w.w * x3.x;
        acc[i].y += w.w * x3.y;
      }
      for (; jt < n; ++jt) {
        const float2 x = S::to_float2(tile2[jt * half + d]);
        acc[i].x += er[jt] * x.x;
        acc[i].y += er[jt] * x.y;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kOutPerThread; ++i) {
    const int o = threadIdx.x + i * kThreads;
    if (o >= nh * half) break;
    const int r = o / half, d = o % half;
    float* pr = part + (static_cast<long>(h0 + r) * n_splits + split) * (head_dim + 2);  // [head_dim + 2]
    pr[2 * d] = acc[i].x;
    pr[2 * d + 1] = acc[i].y;
  }
}

// Decode, pass 2: one block per (head, kCombineKeys of its rows; one per head when probs is null).
// From the splits' m and l: the row's max M, sum L = sum of l * exp(m - M) and log-sum-exp; the
// block's probabilities become exp(logit - M) / L; the first block of each head also writes lse
// and the output row, the splits' sums weighted by exp(m - M) / L (each warp over every
// kWarps-th split, then the warps in order: the same bits on every run).
__global__ void decode_combine_kernel(float* out,         // [n_heads, head_dim]
                                      float* probs,       // [n_heads, probs_stride] or null
                                      long probs_stride,
                                      float* lse,         // [n_heads]
                                      const float* part,  // [n_heads, n_splits, head_dim + 2]
                                      const int32_t* n_rows,  // [n_kv_heads]
                                      int group, int n_splits, int head_dim) {
  detail::wait_for_previous_kernels();  // (launched overlapped: cuda_launch.cuh)
  detail::let_next_kernel_start();
  __shared__ float red[32];
  const int h = blockIdx.x;
  const int n = n_rows[h / group];
  const float* ph = part + static_cast<long>(h) * n_splits * (head_dim + 2);  // [n_splits, head_dim + 2]
  float m = -INFINITY;
  for (int s = threadIdx.x; s < n_splits; s += blockDim.x) m = fmaxf(m, ph[s * (head_dim + 2) + head_dim]);
  m = detail::block_max(m, red);  // finite: n >= 1
  float l = 0.0f;
  for (int s = threadIdx.x; s < n_splits; s += blockDim.x) {
    const float* ps = ph + s * (head_dim + 2);
    l += ps[head_dim + 1] * expf(ps[head_dim] - m);
  }
  l = detail::block_sum(l, red);
  const float inv = 1.0f / l;
  if (probs) {
    float* p = probs + static_cast<long>(h) * probs_stride;  // [n]
    exp_scale_round(p, static_cast<int>(blockIdx.y) * kCombineKeys + threadIdx.x, n, m, inv, 0.0f, [](int, float) {});
  }
  if (blockIdx.y != 0) return;
  // The output row: warp w sums the splits w, w + kWarps, ..., each lane its dimension pairs lane,
  // lane + 32, ...; then the warps' rows are added in warp order. (A thread per dimension walking
  // every split waited on one load after another: 32 times at 32K keys.)
  __shared__ float2 warp_rows[kWarps][kMaxHeadDim / 2];  // [warps, head_dim / 2]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = head_dim / 2;
  float2 o[kMaxHeadDim / 64];  // pairs lane + 32 i
#pragma unroll
  for (int i = 0; i < kMaxHeadDim / 64; ++i) o[i] = {0.0f, 0.0f};
  for (int s = warp; s < n_splits; s += kWarps) {
    const float* ps = ph + s * (head_dim + 2);  // [head_dim + 2]
    const float w = expf(ps[head_dim] - m);
#pragma unroll
    for (int i = 0; i < kMaxHeadDim / 64; ++i) {
      const int d = lane + 32 * i;
      if (d >= half) break;
      const float2 sum = reinterpret_cast<const float2*>(ps)[d];
      o[i].x += sum.x * w;
      o[i].y += sum.y * w;
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxHeadDim / 64; ++i) {
    if (lane + 32 * i < half) warp_rows[warp][lane + 32 * i] = o[i];
  }
  __syncthreads();
  for (int d = threadIdx.x; d < half; d += kThreads) {
    float2 sum = warp_rows[0][d];
    for (int w = 1; w < kWarps; ++w) {
      sum.x += warp_rows[w][d].x;
      sum.y += warp_rows[w][d].y;
    }
    out[static_cast<long>(h) * head_dim + 2 * d] = sum.x * inv;
    out[static_cast<long>(h) * head_dim + 2 * d + 1] = sum.y * inv;
  }
  if (threadIdx.x == 0) lse[h] = m + logf(l);
}

// Block row r of scores and of parts (a block per row): the softmax of its keys lo..hi-1 (soft-capped
// by cap) in place, zeros for its other keys 0..n_keys-1, entries at n_keys.. untouched; lse[r] its
// log-sum-exp; the same values of keys 0..n_keys-1 as parts of T (detail::store_split) for the P·V
// GEMMs.
template <class T>
__device__ void softmax_row_keys(float* scores, float* lse, T* parts, long part_stride, int n_parts, long r, long ld,
                                 int lo, int hi, int n_keys, float cap) {
  __shared__ float red[32];
  float* s = scores + r * ld;   // [n_keys]
  T* sp = parts + r * ld;       // [n_parts, part_stride] from the row's key 0
  const auto put = [&](int j, float v) { detail::store_split(sp + j, part_stride, n_parts, v); };
  const float row_lse = softmax_in_place(s + lo, hi - lo, cap, red, [&](int j, float v) { put(lo + j, v); });
  for (int j = threadIdx.x; j < lo; j += blockDim.x) {
    s[j] = 0.0f;
    put(j, 0.0f);
  }
  for (int j = hi + threadIdx.x; j < n_keys; j += blockDim.x) {
    s[j] = 0.0f;
    put(j, 0.0f);
  }
  if (threadIdx.x == 0) lse[r] = row_lse;
}

// One block per (head, query row): causal softmax of the row's keys 0..q0+i (from the window's
// first key with window > 0).
template <class T>
__global__ void softmax_causal_kernel(float* scores,  // [n_heads, nq, ld]
                                      float* lse,     // [n_heads, nq]
                                      T* parts,       // [n_parts, part_stride] indexed as scores
                                      long part_stride, int n_parts, int nq, int n_keys, long ld, int q0,
                                      int window, float cap) {
  const long r = blockIdx.x;  // h * nq + i
  const int n = q0 + static_cast<int>(r % nq) + 1;  // causal keys of this row (<= n_keys)
  softmax_row_keys(scores, lse, parts, part_stride, n_parts, r, ld, window > 0 ? max(0, n - window) : 0, n, n_keys,
                   cap);
}

// One block per (head, query row): softmax of the row's keys begin[i]..end[i]-1 (begin/end shared
// by the heads).
template <class T>
__global__ void softmax_ranges_kernel(float* scores,        // [n_heads, nq, ld]
                                      float* lse,           // [n_heads, nq]
                                      T* parts,             // [n_parts, part_stride] indexed as scores
                                      long part_stride, int n_parts, int nq, int n_keys, long ld,
                                      const int32_t* begin,  // [nq]
                                      const int32_t* end,    // [nq]
                                      float cap) {
  const long r = blockIdx.x;  // h * nq + i
  const int i = static_cast<int>(r % nq);
  softmax_row_keys(scores, lse, parts, part_stride, n_parts, r, ld, begin[i], end[i], n_keys, cap);
}

}  // namespace

long attend_decode_scratch_floats(int n_heads, int max_rows, int head_dim) {
  const long splits = max_rows > 0 ? (max_rows + kMinSplitKeys - 1) / kMinSplitKeys : 1;
  return static_cast<long>(n_heads) * splits * (head_dim + 2);
}

template <class T>
void attend_decode(float* out, float* probs, long probs_stride, float* lse,
                   const float* q, const T* k, const T* v, long head_stride,
                   const int32_t* rows, long rows_stride, const int32_t* n_rows, int max_rows,
                   int n_heads, int n_kv_heads, int head_dim, ops::Scoring score, const float* rope_cos,
                   const float* rope_sin, const int32_t* slots, bool interleaved, float* scratch,
                   cudaStream_t stream) {
  if (n_heads <= 0 || max_rows <= 0) return;
  if (head_dim < 8 || head_dim > kMaxHeadDim || head_dim % 8 != 0) {
    throw std::invalid_argument("attend_decode: head_dim must be a multiple of 8, at most 256");
  }
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    throw std::invalid_argument("attend_decode: n_heads must be a multiple of n_kv_heads");
  }
  const int group = n_heads / n_kv_heads;
  const int head_blocks = (group + kBlockHeads - 1) / kBlockHeads;
  const int keys = split_keys(n_kv_heads * head_blocks, max_rows);
  const int splits = (max_rows + keys - 1) / keys;
  detail::launch_overlapped(decode_split_kernel<T>, dim3(n_kv_heads * head_blocks, splits), kThreads, stream,
                            scratch, probs, probs_stride, q, k, v, head_stride, rows, rows_stride, n_rows, group,
                            head_blocks, keys, head_dim, score, rope_cos, rope_sin, slots, interleaved);
  const int combine_blocks = probs ? (max_rows + kCombineKeys - 1) / kCombineKeys : 1;
  detail::launch_overlapped(decode_combine_kernel, dim3(n_heads, combine_blocks), kThreads, stream, out, probs,
                            probs_stride, lse, scratch, n_rows, group, splits, head_dim);
}

template void attend_decode(float*, float*, long, float*, const float*, const __half*, const __half*,
                            long, const int32_t*, long, const int32_t*, int, int, int, int, ops::Scoring,
                            const float*, const float*, const int32_t*, bool, float*, cudaStream_t);
template void attend_decode(float*, float*, long, float*, const float*, const __nv_bfloat16*,
                            const __nv_bfloat16*, long, const int32_t*, long, const int32_t*, int, int,
                            int, int, ops::Scoring, const float*, const float*, const int32_t*, bool, float*,
                            cudaStream_t);
template void attend_decode(float*, float*, long, float*, const float*, const float*, const float*, long,
                            const int32_t*, long, const int32_t*, int, int, int, int, ops::Scoring, const float*,
                            const float*, const int32_t*, bool, float*, cudaStream_t);

template <class T>
void softmax_causal(float* scores, float* lse, T* parts, long part_stride, int n_parts, int n_heads, int nq,
                    int n_keys, long ld, int q0, int window, float softcap, cudaStream_t stream) {
  if (n_heads <= 0 || nq <= 0) return;
  const long blocks = static_cast<long>(n_heads) * nq;
  softmax_causal_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      scores, lse, parts, part_stride, n_parts, nq, n_keys, ld, q0, window, softcap);
}

template <class T>
void softmax_ranges(float* scores, float* lse, T* parts, long part_stride, int n_parts, int n_heads, int nq,
                    int n_keys, long ld, const int32_t* begin, const int32_t* end, float softcap,
                    cudaStream_t stream) {
  const long blocks = static_cast<long>(n_heads) * nq;
  if (blocks <= 0) return;
  softmax_ranges_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      scores, lse, parts, part_stride, n_parts, nq, n_keys, ld, begin, end, softcap);
}

template void softmax_causal(float*, float*, __half*, long, int, int, int, int, long, int, int, float,
                             cudaStream_t);
template void softmax_causal(float*, float*, __nv_bfloat16*, long, int, int, int, int, long, int, int, float,
                             cudaStream_t);
template void softmax_ranges(float*, float*, __half*, long, int, int, int, int, long, const int32_t*,
                             const int32_t*, float, cudaStream_t);
template void softmax_ranges(float*, float*, __nv_bfloat16*, long, int, int, int, int, long, const int32_t*,
                             const int32_t*, float, cudaStream_t);
template void softmax_causal(float*, float*, float*, long, int, int, int, int, long, int, int, float, cudaStream_t);
template void softmax_ranges(float*, float*, float*, long, int, int, int, int, long, const int32_t*, const int32_t*,
                             float, cudaStream_t);

}  // namespace kvs::cuda
