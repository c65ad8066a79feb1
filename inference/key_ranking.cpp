// Host ranking of a layer's decode keys by their head-maxed logit (see key_ranking.h).
#include "inference/key_ranking.h"

#include <cmath>
#include <limits>

#include "kernels/key_ranking.h"

namespace kvs {

std::vector<int32_t> rank_keys(std::span<const AttentionBlock> heads, const KeyRanking& ranking) {
  const int below = ranking.below;
  if (ranking.k <= 0 || below <= 0) return {};
  std::vector<float> logit(below, -std::numeric_limits<float>::infinity());  // [below] head max
  std::vector<uint8_t> attended(below, 0);                                     // [below]
  for (const AttentionBlock& b : heads) {
    for (int j = 0; j < b.n_keys; ++j) {
      const int pos = b.key(j);
      if (pos >= below) break;  // keys ascend
      logit[pos] = std::fmax(logit[pos], std::log(b.probs[j]) + b.lse[0]);
      attended[pos] = 1;
    }
  }
  std::vector<int32_t> positions;  // [candidates] attended positions below `below`, ascending
  std::vector<uint32_t> keys;      // [candidates] their order keys
  for (int pos = 0; pos < below; ++pos) {
    if (!attended[pos]) continue;
    positions.push_back(pos);
    keys.push_back(ops::order_key(logit[pos]));
  }
  std::vector<int32_t> ranked(positions.size());  // [count] indices into positions, ascending
  ranked.resize(ops::top_k_keys(keys.data(), static_cast<int>(keys.size()), ranking.k, ranked.data()));
  for (int32_t& i : ranked) i = positions[i];
  return ranked;
}

}  // namespace kvs
