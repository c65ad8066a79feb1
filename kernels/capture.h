// Prefill-capture reductions on host memory: per-key column sums of a block of attention
// probabilities and the copy of the last-W-query rows into the observation window. The CPU twins
// of kvs::cuda::colsum_add / window_rows (kernels/cuda_ops.h), same arguments minus the stream.
#pragma once

namespace kvs::ops {

// colsum[h * col_stride + j] += sum over i < nq of probs[(h * nq + i) * ld + j], j < n_keys.
// Each column is summed in fp32 in row order, then added (the device kernel's order).
void colsum_add(float* colsum, long col_stride, const float* probs, int n_heads, int nq,
                int n_keys, long ld);

// Rows of a prefill block (probs [n_heads, nq, ld], queries q0..q0+nq-1) that fall in the last W
// prompt queries P-W..P-1 go to window [n_heads, W, P]: block row i lands in window row
// q0 + i - (P - W), keys 0..n_keys-1 copied, keys n_keys..P-1 zero; window_lse [n_heads, W] gets
// the row's lse [n_heads, nq]. Other window rows are untouched.
void window_rows(float* window, float* window_lse, const float* probs, const float* lse,
                 int n_heads, int nq, int n_keys, long ld, int q0, int P, int W);

}  // namespace kvs::ops
