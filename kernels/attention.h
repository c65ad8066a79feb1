// Scaled dot-product attention: scores = q.k / sqrt(d), softmax, weighted sum of values.
// attend_rows takes one query row (single-threaded: decode parallelises over heads);
// attend_causal_block takes a block of consecutive prompt queries of one head (prefill),
// four rows at a time against sixteen keys, on the OpenMP threads.
#pragma once
#include <cstdint>

namespace kvs::ops {

// One query over the rows listed in rows[n_keys] (indices into contiguous [*, head_dim]
// keys/values). Writes probs[n_keys] and out[head_dim]; returns the log-sum-exp of the scaled
// scores.
float attend_rows(float* out, float* probs, const float* q, const float* keys,
                  const float* values, const int32_t* rows, int n_keys, int head_dim, float scale);

// Causal attention of the nq queries at positions q0..q0+nq-1 of one head, query q over keys
// lo(q)..q, lo(q) = window > 0 ? max(0, q - window + 1) : 0.
//   q:      [nq] rows of head_dim floats, q_stride apart
//   keys_t: the head's keys transposed: component d of key j at keys_t[d * kt_stride + j]
//   values: value rows of head_dim floats, v_stride apart
//   out:    [nq] rows of head_dim floats, out_stride apart
//   probs:  [nq, q0 + nq] softmax rows, 0 outside each row's keys;  lse: [nq]
void attend_causal_block(float* out, long out_stride, float* probs, float* lse, const float* q, long q_stride,
                         const float* keys_t, long kt_stride, const float* values, long v_stride, int q0, int nq,
                         int head_dim, int window, float scale);

}  // namespace kvs::ops
