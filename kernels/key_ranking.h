// Key ranking: per decode step and layer, the k cache entries whose attention logit, maximized over
// the layer's query heads, is largest (a KeyRanking a cache controller asks for). Logits are
// recovered from the attention rows and their log-sum-exps (log p + lse) and ranked through an
// unsigned order key, so the device can select with a radix select over integers.
// CPU twin of cuda::rank_keys (kernels/key_ranking.cu).
#pragma once
#include <cstdint>

namespace kvs::ops {

// The float's total order as unsigned order: flips every bit of a negative value, sets the sign bit of the rest
// (-inf lowest; -0 just below +0). Attention logits are never NaN.
uint32_t order_key(float v);

// key[j] = order_key(max over h < n_heads of (logf(rows[h * stride + j]) + lse[h])) for j < n.
// rows [n_heads, stride] attention probabilities (>= 0; a 0 gives -inf), lse [n_heads]. Max by fmaxf.
void head_max_logit_keys(const float* rows, long stride, const float* lse, int n_heads, int n, uint32_t* key);

// The indices of the k largest of key[n] (k clamped to [0, n]), ascending; among keys equal to the
// k-th largest, the later indices. Writes them to out[0..count) and returns count = clamp(k, 0, n).
int top_k_keys(const uint32_t* key, int n, int k, int32_t* out);

}  // namespace kvs::ops
