// PyramidKV (POLICIES.md §5): SnapKV scoring with an arithmetic per-layer budget schedule,
// widest at layer 0 (KVCache-Factory, beta = 20).
#pragma once
#include <memory>
#include <vector>

#include "analysis/policy.h"

namespace kvs {

// Prefix tokens kept per layer (the w window tokens come on top), for L layers, prompt P,
// average budget B (window included), window w, schedule parameter beta. Special cases:
// P < B -> every layer keeps the whole prefix P - w; P < 2 (B - w) -> uniform B - w.
std::vector<int> pyramid_prefix_budgets(int L, int P, int B, int w, double beta);

std::unique_ptr<Policy> make_pyramidkv_policy(const PolicySpec& spec, const ModelShape& shape);

}  // namespace kvs
