// DuoAttention (POLICIES.md §8): per KV head gate alpha; retrieval heads keep everything,
// streaming heads keep sink + recent (evicting after the prompt and every step).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "analysis/policy.h"

namespace kvs {

// Quantile rule (official sparsify_attention_heads): add deterministic noise in [0, 1e-6) to
// break ties, tau = the `sparsity` quantile (NumPy linear interpolation), retrieval = a >= tau.
// sparsity >= 1 makes every head streaming. Returns [n] 1 = retrieval.
std::vector<uint8_t> duo_retrieval_by_sparsity(std::span<const float> alpha, double sparsity);
// Paper rule: retrieval = alpha > tau.
std::vector<uint8_t> duo_retrieval_by_threshold(std::span<const float> alpha, double tau);

struct DuoWindow {
  int sink = 0, recent = 0;
};
// For a DuoAttention policy whose gates the driver profiles from the recorded rows (no
// pattern=DIR, gates=profiled, the default): the streaming window the profile uses. nullopt for
// any other policy; gates=estimated takes PolicyContext::alpha as the caller hands it.
std::optional<DuoWindow> duo_profile_window(const Policy& policy);

std::unique_ptr<Policy> make_duoattention_policy(const PolicySpec& spec, const ModelShape& shape);

}  // namespace kvs
