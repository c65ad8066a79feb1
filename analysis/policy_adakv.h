// Ada-KV (POLICIES.md §6, official AdaptiveSnapKVCluster): per layer, the budget H*(B-w) is
// shared among the KV heads by a global top-k over their (normalized) sorted window scores,
// with a floor fraction alpha per head; each head keeps its own top b_h plus the window.
#pragma once
#include <memory>
#include <vector>

#include "analysis/policy.h"

namespace kvs {

// Per-head budgets b_h for one layer. scores[h] is head h's pooled prefix score (any order);
// b = B - w is the base per-head budget. Steps 2-5 of POLICIES.md §6:
// b_floor = int(alpha * b); c_h = how many of the global top H*b (normalized) sorted scores come
// from head h; b_h = round_half_even(c_h * (1 - alpha) + b_floor), capped at the prefix length.
std::vector<int> adakv_allocate(const std::vector<std::vector<float>>& scores, int b, double alpha,
                                bool normalize);

std::unique_ptr<Policy> make_adakv_policy(const PolicySpec& spec, const ModelShape& shape);

}  // namespace kvs
