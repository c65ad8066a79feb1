// OmniKV (POLICIES.md §9): nothing is evicted; at every decode step each filter layer selects
// k prompt positions (selector "last", the default: head-max of the current query's raw logits;
// softmax_before_last, uniform and exp over the last `window` queries, see policy_omnikv.cpp)
// and the sparse layers up to the next filter layer attend only those plus all generated
// positions.
#pragma once
#include <memory>
#include <vector>

#include "analysis/policy.h"

namespace kvs {

// Default filter layers for L layers: n = max(1, L / 10) layers starting at
// f0 = min(max(2, L / 8), L - 1), spaced f_i = f0 + i * (L - f0) / n.
std::vector<int> omnikv_default_filters(int L);

enum class OmniRole : uint8_t { Dense, Filter, Wait, Sparse };
// Role of every layer for sorted filter layers and `wait` dense layers after each filter.
std::vector<OmniRole> omnikv_layer_roles(int L, const std::vector<int>& filters, int wait);

std::unique_ptr<Policy> make_omnikv_policy(const PolicySpec& spec, const ModelShape& shape);

}  // namespace kvs
