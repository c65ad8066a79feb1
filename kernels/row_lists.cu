// Row-list edits on the device: each KV head's list of cache rows, kept between decode steps and
// edited by what changed (the evicted entries, the appended rows) instead of uploaded whole.
// CPU twin: ops::edit_row_list (kernels/row_lists.h).
#include <algorithm>

#include "kernels/cuda_ops.h"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

// Grid (blocks over a head's entries, n_kv_heads): blocks of head g stride over its source entries
// (each kept one moves down by the removed indices before it), its new rows and its slots.
__global__ void edit_row_lists_kernel(int32_t* dst,               // [n_kv_heads, stride]
                                      int32_t* slots,             // [n_kv_heads, stride] or null
                                      const int32_t* src,         // [n_kv_heads, stride]
                                      long stride,
                                      const ops::RowListEdit* edits,  // [n_kv_heads]
                                      const int32_t* payload) {
  const int g = blockIdx.y;
  const ops::RowListEdit e = edits[g];
  const int32_t* removed = payload + e.offset;   // [n_removed] ascending
  const int32_t* fresh = removed + e.n_removed;  // [n_new], then [n_new] slots when given
  const int kept = e.n_src - e.n_removed;
  int32_t* d = dst + g * stride;
  const int first = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
  for (int s = first; s < e.n_src; s += step) {
    int lo = 0, hi = e.n_removed;  // removed indices below s: lo
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (removed[mid] < s) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo < e.n_removed && removed[lo] == s) continue;
    d[s - lo] = src[g * stride + s];
  }
  for (int a = first; a < e.n_new; a += step) d[kept + a] = fresh[a];
  if (!slots) return;
  for (int i = first; i < kept + e.n_new; i += step) slots[g * stride + i] = e.slots_given ? fresh[e.n_new + i] : i;
}

}  // namespace

void edit_row_lists(int32_t* dst, int32_t* slots, const int32_t* src, long stride, const ops::RowListEdit* edits,
                    const int32_t* payload, int n_kv_heads, int max_entries, cudaStream_t stream) {
  if (n_kv_heads <= 0) return;
  const int blocks = std::min(32, std::max(1, (max_entries + kThreads - 1) / kThreads));
  edit_row_lists_kernel<<<dim3(blocks, n_kv_heads), kThreads, 0, stream>>>(dst, slots, src, stride, edits,
                                                                            payload);
}

}  // namespace kvs::cuda
