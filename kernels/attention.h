// One query row of scaled dot-product attention over a set of key/value rows:
// scores = q.k / sqrt(d), softmax, weighted sum of values. Single-threaded (callers parallelise
// over heads and query rows).
#pragma once
#include <cstdint>

namespace kvs::ops {

// Over key/value rows 0..n_keys-1, row j at keys + j * stride (and values + j * stride).
// Writes probs[n_keys] and out[head_dim]; returns the log-sum-exp of the scaled scores.
float attend(float* out, float* probs, const float* q, const float* keys, const float* values,
             int n_keys, int head_dim, long stride, float scale);

// Over the rows listed in rows[n_keys] (indices into contiguous [*, head_dim] keys/values).
float attend_rows(float* out, float* probs, const float* q, const float* keys,
                  const float* values, const int32_t* rows, int n_keys, int head_dim, float scale);

}  // namespace kvs::ops
