// Rotary position embedding of rows of heads on the device, by per-row positions.
// CPU twin: ops::rope_apply (kernels/rope.h), with the cos/sin tables of ops::RopeTable uploaded.
#include "kernels/cuda_launch.cuh"
#include "kernels/cuda_ops.h"
#include "kernels/cuda_rope.cuh"

namespace kvs::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row; threads stride over the n_heads * head_dim/2 pairs of the row.
__global__ void rope_kernel(float* x,              // [n, row_stride], heads [n_heads, head_dim]
                            long row_stride,
                            int n_heads, int head_dim,
                            const int32_t* pos,    // [n]
                            const float* cos_tab,  // [n_pos, head_dim/2]
                            const float* sin_tab,  // [n_pos, head_dim/2]
                            bool interleaved) {
  detail::wait_for_previous_kernels();  // (launched overlapped: cuda_launch.cuh)
  detail::let_next_kernel_start();
  const int half = head_dim / 2;
  const long r = blockIdx.x;
  float* row = x + r * row_stride;
  const float* c = cos_tab + static_cast<long>(pos[r]) * half;  // [head_dim/2]
  const float* s = sin_tab + static_cast<long>(pos[r]) * half;  // [head_dim/2]
  const int n_pairs = n_heads * half;
  for (int t = threadIdx.x; t < n_pairs; t += blockDim.x) {
    const int h = t / half, i = t - h * half;
    detail::rotate_pair(row + static_cast<long>(h) * head_dim, c, s, i, half, interleaved);
  }
}

}  // namespace

void rope_rows(float* x, long row_stride, int n, int n_heads, int head_dim, const int32_t* pos,
               const float* cos, const float* sin, bool interleaved, cudaStream_t stream) {
  if (n <= 0 || n_heads <= 0 || head_dim < 2) return;
  detail::launch_overlapped(rope_kernel, n, kThreads, stream, x, row_stride, n_heads, head_dim, pos, cos, sin,
                            interleaved);
}

}  // namespace kvs::cuda
