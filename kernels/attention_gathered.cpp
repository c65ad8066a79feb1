// attend_gathered_block: scores by one matrix product, each row's softmax over its own keys,
// then the value mix by a second product against the (caller's) transposed values.
#include "kernels/attention_gathered.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/softmax.h"

namespace kvs::ops {

void gathered_row_keys(const int32_t* key_pos, int n_keys, int q_pos, int window, int* begin, int* end) {
  *begin = window > 0 ? static_cast<int>(std::lower_bound(key_pos, key_pos + n_keys, q_pos - window + 1) - key_pos) : 0;
  *end = static_cast<int>(std::upper_bound(key_pos, key_pos + n_keys, q_pos) - key_pos);
}

void attend_gathered_block(float* out, long out_stride, float* probs, float* lse, const float* q, long q_stride,
                           int n_q, int q_pos0, const float* keys, const float* values_t, const int32_t* key_pos,
                           int n_keys, int head_dim, int window, Scoring score) {
  const std::size_t hd = static_cast<std::size_t>(head_dim), nk = static_cast<std::size_t>(n_keys);
  std::vector<float> qc(n_q * hd);  // [n_q, head_dim] the queries, contiguous for the product
  for (int i = 0; i < n_q; ++i) std::copy_n(q + i * q_stride, hd, qc.data() + i * hd);
  matmul(probs, qc.data(), keys, n_q, n_keys, head_dim);  // probs[i, j] = q_i . k_j

  bool empty_row = false;
#pragma omp parallel for schedule(static) if (static_cast<long>(n_q) * n_keys >= (1L << 16)) reduction(|| : empty_row)
  for (int i = 0; i < n_q; ++i) {
    int b = 0, e = 0;
    gathered_row_keys(key_pos, n_keys, q_pos0 + i, window, &b, &e);
    float* row = probs + i * nk;
    if (e <= b) {
      empty_row = true;
      continue;
    }
    std::fill(row, row + b, 0.0f);
    std::fill(row + e, row + nk, 0.0f);
    score.apply(row + b, e - b);
    lse[i] = softmax(row + b, e - b);
  }
  if (empty_row) {
    throw std::logic_error("attend_gathered_block: a query of the block at positions " + std::to_string(q_pos0) +
                           ".. has no key to attend");
  }

  std::vector<float> oc(n_q * hd);  // [n_q, head_dim] the value mix
  matmul(oc.data(), probs, values_t, n_q, head_dim, n_keys);
  for (int i = 0; i < n_q; ++i) std::copy_n(oc.data() + i * hd, hd, out + i * out_stride);
}

}  // namespace kvs::ops
