// Attention of a block of consecutive queries of one head over a list of gathered keys (the
// active cache entries before the block and the block's own keys), each query reading the
// listed keys up to its own position: Engine::extend's batched pass over a cache. Scores and the
// value mix are matrix products (ops::matmul), so a block of queries reads each key once.
#pragma once
#include <cstdint>

#include "kernels/softcap.h"

namespace kvs::ops {

// Query i (row q + i * q_stride, at position q_pos0 + i) attends the listed keys at positions in
// (q_pos0 + i - window, q_pos0 + i] (window 0: from the first), softmax over them.
//   keys:         [n_keys, head_dim] contiguous rows at ascending positions key_pos[n_keys]
//   values_t:     [head_dim, n_keys] their values, transposed (one KV head's, shared by its
//                 query heads)
//   probs:        [n_q, n_keys] the softmax rows, 0 outside each row's keys
//   lse:          [n_q] the log-sum-exp of each row's scores (score(q_i . k_j))
//   out:          [n_q] rows of head_dim floats, out_stride apart
// Throws std::logic_error when a query has no key to attend.
void attend_gathered_block(float* out, long out_stride, float* probs, float* lse, const float* q, long q_stride,
                           int n_q, int q_pos0, const float* keys, const float* values_t, const int32_t* key_pos,
                           int n_keys, int head_dim, int window, Scoring score);

// The keys query i of attend_gathered_block reads: [*begin, *end) of key_pos.
void gathered_row_keys(const int32_t* key_pos, int n_keys, int q_pos, int window, int* begin, int* end);

}  // namespace kvs::ops
