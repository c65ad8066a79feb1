// KeyRanking (inference/hooks.h) computed on the host from one layer's decode rows: what the CPU
// engine and the trace simulator hand a controller that asks for one, and what the CUDA backend
// falls back to where its heads attend different keys.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "inference/hooks.h"

namespace kvs {

// The positions `ranking` asks for, ascending, from heads (a layer's query heads' decode rows,
// any key lists): per attended position below ranking.below, the largest logit log p + lse over
// the heads that attended it, ranked by ops::top_k_keys (kernels/key_ranking.h) — the same
// numbers and order as the device's ranking where every head attends the same keys.
std::vector<int32_t> rank_keys(std::span<const AttentionBlock> heads, const KeyRanking& ranking);

}  // namespace kvs
