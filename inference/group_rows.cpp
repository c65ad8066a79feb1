// Host group rows: each KV head's query-head rows through ops::reduce_group_rows.
#include "inference/group_rows.h"

namespace kvs {

std::span<const GroupRow> HostGroupRows::reduce(std::span<const AttentionBlock> heads, int n_kv,
                                                ops::GroupReduce how) {
  const int group = static_cast<int>(heads.size()) / n_kv;
  values_.resize(n_kv);
  rows_.resize(n_kv);
  group_.resize(group);
  for (int g = 0; g < n_kv; ++g) {
    const AttentionBlock& first = heads[g * group];
    for (int i = 0; i < group; ++i) group_[i] = heads[g * group + i].probs;
    values_[g].resize(first.n_keys);
    ops::reduce_group_rows(group_.data(), group, first.n_keys, how, values_[g].data());
    rows_[g] = {g, first.n_keys, first.key_pos, values_[g].data()};
  }
  return rows_;
}

}  // namespace kvs
