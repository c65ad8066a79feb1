// Key ranking on the host: the CPU twin of cuda::rank_keys (head-max logits, then the top k).
#include "kernels/key_ranking.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

namespace kvs::ops {

uint32_t order_key(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

void head_max_logit_keys(const float* rows, long stride, const float* lse, int n_heads, int n, uint32_t* key) {
  for (int j = 0; j < n; ++j) {
    float m = -INFINITY;
    for (int h = 0; h < n_heads; ++h) m = std::fmax(m, std::log(rows[h * stride + j]) + lse[h]);
    key[j] = order_key(m);
  }
}

int top_k_keys(const uint32_t* key, int n, int k, int32_t* out) {
  const int count = std::clamp(k, 0, std::max(n, 0));
  if (count == 0) return 0;
  if (count == n) {
    for (int j = 0; j < n; ++j) out[j] = j;
    return n;
  }
  std::vector<uint32_t> sorted(key, key + n);  // [n], partly ordered: the k-th largest in place
  std::nth_element(sorted.begin(), sorted.begin() + (count - 1), sorted.end(), std::greater<uint32_t>());
  const uint32_t kth = sorted[count - 1];
  int n_gt = 0, n_eq = 0;
  for (int j = 0; j < n; ++j) {
    n_gt += key[j] > kth;
    n_eq += key[j] == kth;
  }
  const int skip = n_eq - (count - n_gt);  // equal keys left out: the first ones
  int o = 0, seen = 0;
  for (int j = 0; j < n; ++j) {
    if (key[j] > kth) {
      out[o++] = j;
    } else if (key[j] == kth) {
      if (seen++ >= skip) out[o++] = j;
    }
  }
  return o;
}

}  // namespace kvs::ops
