// Group rows on the device: a layer's decode rows, still on the GPU, renormalized and reduced to
// one row per KV head, so that n_kv rows cross PCIe instead of n_heads (kernels/group_rows.h).
// A block a row sums it in ops::lane_sum's order; then a thread a key reduces its KV head's rows.
// Every sum, product and quotient is rounded on its own (__fadd_rn, __fmul_rn, __fdiv_rn, which
// nvcc never fuses), so the results are the twin's bits.
#include "kernels/cuda_ops.h"
#include "kernels/group_rows.h"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;  // reduce kernel
static_assert(ops::kSumLanes == 256, "the sum kernel's block is one thread a lane");

// sums[h] = ops::lane_sum(row h over its KV head's n_keys entries). One block of kSumLanes threads
// a row: thread k is lane k (its loads coalesced with its neighbours'), then the lanes pairwise
// through shared memory.
__global__ void __launch_bounds__(ops::kSumLanes) lane_sum_kernel(float* sums,            // [n_heads]
                                                                  const float* rows,      // [n_heads, stride]
                                                                  long stride,
                                                                  const int32_t* n_keys,  // [n_kv]
                                                                  int group) {
  __shared__ float lane[ops::kSumLanes];
  const int h = blockIdx.x, k = threadIdx.x;
  const int n = n_keys[h / group], body = n - n % ops::kSumLanes;
  const float* r = rows + h * stride;
  float s = 0.0f;
#pragma unroll 8
  for (int i = k; i < body; i += ops::kSumLanes) s = __fadd_rn(s, r[i]);
  if (body + k < n) s = __fadd_rn(s, r[body + k]);
  lane[k] = s;
  for (int half = ops::kSumLanes / 2; half > 0; half /= 2) {
    __syncthreads();
    if (k < half) lane[k] = __fadd_rn(lane[k], lane[k + half]);
  }
  if (k == 0) sums[h] = lane[0];
}

// out[g * out_stride + j] for j < n_keys[g]: KV head g's rows renormalized by their sums, reduced
// over the group in head order.
__global__ void reduce_kernel(float* out,             // [n_kv, out_stride]
                              long out_stride,
                              const float* rows,      // [n_heads, stride]
                              long stride,
                              const float* sums,      // [n_heads]
                              const int32_t* n_keys,  // [n_kv]
                              int group, ops::GroupReduce how) {
  const int g = blockIdx.y, n = n_keys[g];
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const float u = __fdiv_rn(1.0f, static_cast<float>(n));
  float acc = how == ops::GroupReduce::Max ? -INFINITY : 0.0f;
  for (int i = 0; i < group; ++i) {
    const int h = g * group + i;
    const float s = sums[h];
    const float v = s > 0.0f ? __fmul_rn(rows[h * stride + j], __fdiv_rn(1.0f, s)) : u;
    acc = how == ops::GroupReduce::Max ? fmaxf(acc, v) : __fadd_rn(acc, v);
  }
  if (how == ops::GroupReduce::Mean) acc = __fdiv_rn(acc, static_cast<float>(group));
  out[g * out_stride + j] = acc;
}

}  // namespace

void reduce_group_rows(float* out, long out_stride, const float* rows, long stride, const int32_t* n_keys,
                       int n_kv, int group, int max_keys, ops::GroupReduce how, float* sums, cudaStream_t stream) {
  if (n_kv <= 0 || group <= 0 || max_keys <= 0) return;
  lane_sum_kernel<<<n_kv * group, ops::kSumLanes, 0, stream>>>(sums, rows, stride, n_keys, group);
  const dim3 grid((max_keys + kThreads - 1) / kThreads, n_kv);
  reduce_kernel<<<grid, kThreads, 0, stream>>>(out, out_stride, rows, stride, sums, n_keys, group, how);
}

}  // namespace kvs::cuda
