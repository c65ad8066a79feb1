// Prefill-capture reductions on host memory: per-key column sums of a block of attention
// probabilities, the copy of the last-W-query rows into the observation window and the
// block-pooled overview map. The CPU twins of kvs::cuda::colsum_add / window_rows / pool_add
// (kernels/cuda_ops.h), same arguments minus the stream.
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

// Block-pooled overview of the causal P x P map, pooled [n_heads, nb, nb] with nb = ceil(P / block):
// cell (a, b) is the mean over the queries of pool row a of their attention mass on the keys of
// pool column b, so every pooled row sums to 1 once all its queries have passed. For each cell
// with a touched by this block (queries q0..q0+nq-1, probs [n_heads, nq, ld], keys < n_keys) and
// b <= a (cells above the diagonal hold no causal mass and are left alone):
//   pooled[h, a, b] += (sum over block rows i in pool row a, keys j < n_keys in pool column b of
//                       probs[(h * nq + i) * ld + j]) / min(block, P - a * block),
// summed key by key, each key's block rows in order (the device kernel's order): the rows of a
// pool row are first added into per-key column sums, vectorized along the keys (summing each
// cell's rows key by key in a scalar chain cost a second of a 3,500-token SmolLM2 prefill,
// on the thread the others waited for).
void pool_add(float* pooled, const float* probs, int n_heads, int nq, int n_keys, long ld, int q0,
              int P, int block);

}  // namespace kvs::ops
