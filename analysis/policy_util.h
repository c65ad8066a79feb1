// Building blocks shared by the policies (POLICIES.md §0): top-k with the project's tie rule,
// 1-D pooling, GQA reductions, observation-window scores and renormalization over kept keys.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analysis/prefill_evidence.h"
#include "kernels/group_rows.h"

namespace kvs {

// Indices of the k largest scores, ascending. On equal scores the higher index (the newer
// position) wins, so the older position is evicted first. k is clamped to [0, n].
std::vector<int> top_k_indices(std::span<const float> scores, int k);

// Keep mask [n_held] with 1 at top_k_indices(scores, k) into `keep` (resized; a policy reuses it
// every step), the scores being the first held entries' (n_held >= scores.size(); those past them
// get 0): one pass where one is left out (a cache one entry over its budget, every decode step).
void top_k_keep(std::span<const float> scores, int k, std::size_t n_held, std::vector<uint8_t>& keep);

enum class Pool { Avg, Max };
Pool parse_pool(const std::string& policy, const std::string& value);
const char* pool_name(Pool p);

// Stride-1 pooling of kernel `kernel` (odd) with zero padding kernel/2; output length = input.
// Avg divides by `kernel` everywhere (PyTorch count_include_pad=True); Max pads with -inf.
std::vector<float> pool1d(std::span<const float> x, int kernel, Pool kind);

// The GQA reduction (--policy ...:gqa=mean|max|sum) is the one an engine reduces decode rows by.
using GqaReduce = ops::GroupReduce;
GqaReduce parse_gqa(const std::string& policy, const std::string& value);
const char* gqa_name(GqaReduce g);

// Reduces `rows` (G pointers, each [n]) element-wise over the group.
std::vector<float> reduce_group(std::span<const float* const> rows, int n, GqaReduce how);
// Same, into out [n] (n = out.size()): for a caller that reuses its buffer every step.
void reduce_group(std::span<const float* const> rows, GqaReduce how, std::span<float> out);

// Observation-window score of query head h in layer l (POLICIES.md §0): the last `w` prompt
// queries (w <= ev.window) attending the prefix keys j < P - w, summed (or averaged) over rows.
// Returns [P - w].
std::vector<float> window_scores(const PrefillEvidence& ev, int layer, int head, int w, bool mean);

// Same for every query head of KV head g, reduced over the group: [P - w].
std::vector<float> group_window_scores(const PrefillEvidence& ev, int layer, int kv_head, int w,
                                       bool mean, GqaReduce how);

// The attention a query "sees" over a subset of its keys: out[i] = full_row[keys[i]] / S with
// S = sum of full_row over keys. Returns the adjusted log-sum-exp full_lse + log(S), so that
// log(out[i]) + returned lse = log(full_row[keys[i]]) + full_lse (the raw logit). When S == 0
// the row is spread uniformly and the lse is returned unchanged.
float renormalize_row(std::span<const float> full_row, float full_lse,
                      std::span<const int32_t> keys, std::span<float> out);
// Same for a row already gathered at the kept keys (kept[i] = full_row[keys[i]]): the same
// numbers, computed the same way (S = ops::lane_sum, so that an engine's group rows,
// ops::reduce_group_rows, hold them too). out may be kept itself.
float renormalize_kept(std::span<const float> kept, float full_lse, std::span<float> out);

}  // namespace kvs
