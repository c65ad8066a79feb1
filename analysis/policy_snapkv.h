// SnapKV (POLICIES.md §4): prefill-once, per KV head, top (B - w) prefix positions by the pooled
// observation-window score plus the w window tokens. The scoring helpers are shared with
// PyramidKV and Ada-KV.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "analysis/policy.h"
#include "analysis/policy_util.h"

namespace kvs {

// Throws InputError("--policy NAME: ...") unless the evidence holds window rows for prompt P.
void require_window_rows(const PrefillEvidence* ev, const std::string& policy, int P);

// Effective observation window: the request capped to the recorded window, to P and to B.
int effective_window(const PrefillEvidence& ev, int requested, int budget);

// Policy::caveat of the SnapKV family: with a window of at least the budget (and a prompt longer
// than it) no prompt position is chosen by score.
std::string window_caveat(int window, int budget, int prompt_len);

// Pooled window score of KV head (layer, g): [P - w]. Rows are summed (mean_rows = false) or
// averaged, the group is reduced with `gqa`, then pooled (reduce first, then pool).
std::vector<float> snap_scores(const PrefillEvidence& ev, int layer, int kv_head, int w, int kernel,
                               Pool pool, GqaReduce gqa, bool mean_rows);

// Keeps, in (layer, g), the prefix positions (< P - w) at `keep_prefix` indices into the prefix,
// every position >= P - w, and evicts the other prefix positions.
void keep_prefix_and_window(KvSlots& kv, int layer, int kv_head, int P, int w,
                            std::span<const int> keep_prefix);

std::unique_ptr<Policy> make_snapkv_policy(const PolicySpec& spec, const ModelShape& shape);

}  // namespace kvs
