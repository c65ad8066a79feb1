// Group rows (CacheController::group_rows, inference/hooks.h) made on the host from one layer's
// decode rows: what the CPU engine and the trace simulator hand a controller that asks for them,
// the same bits the CUDA backend makes on the device (ops::reduce_group_rows and its twin).
#pragma once
#include <span>
#include <vector>

#include "inference/hooks.h"

namespace kvs {

class HostGroupRows {
 public:
  // heads: a layer's n_kv * group query heads' decode rows, those of a KV head over the same keys
  // (not yet renormalized). The rows live until the next call.
  std::span<const GroupRow> reduce(std::span<const AttentionBlock> heads, int n_kv, ops::GroupReduce how);

 private:
  std::vector<std::vector<float>> values_;  // [n_kv][n_keys of the KV head]
  std::vector<const float*> group_;         // [group] the KV head's rows
  std::vector<GroupRow> rows_;              // [n_kv]
};

}  // namespace kvs
