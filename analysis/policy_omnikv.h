// OmniKV (POLICIES.md §9): nothing is evicted; at every decode step each filter layer selects
// k prompt positions (selector "last", the default: head-max of the current query's raw logits;
// softmax_before_last, uniform and exp over the last `window` queries, see policy_omnikv.cpp)
// and the sparse layers up to the next filter layer attend only those plus all generated
// positions.
#pragma once
#include <memory>
#include <vector>

#include "analysis/policy.h"
#include "analysis/trace.h"

namespace kvs {

// Default filter layers for L layers: n = max(1, L / 10) layers starting at
// f0 = min(max(2, L / 8), L - 1), spaced f_i = f0 + i * (L - f0) / n.
std::vector<int> omnikv_default_filters(int L);

enum class OmniRole : uint8_t { Dense, Filter, Wait, Sparse };
// Role of every layer for sorted filter layers and `wait` dense layers after each filter.
std::vector<OmniRole> omnikv_layer_roles(int L, const std::vector<int>& filters, int wait);

std::unique_ptr<Policy> make_omnikv_policy(const PolicySpec& spec, const ModelShape& shape);

// Whether the spec sets its budget from the prompt (OmniKV's frac=F) rather than from --budget.
bool omnikv_budget_from_frac(const PolicySpec& spec);
// OmniKV's frac=F: spec.budget = k = max(1, floor(F * prompt_len)), at most prompt_len, the k the
// policy selects, so the run name shows it and the metrics' top-k compare with it. Other specs
// are left as they are. Throws InputError when F is not a number in (0, 1].
void resolve_omnikv_frac(PolicySpec& spec, int prompt_len);
// An OmniKV spec on a trace: its frac resolved for the trace's prompt, and without filters=, on
// a trace holding the inter-layer similarity, the L/10 filter layers the optimizer of POLICIES.md
// §9 chooses there for the spec's wait (default 1). Other specs, and traces without the
// similarity, are left as they are. The CLI and the app both resolve specs through it.
void resolve_omnikv_spec(PolicySpec& spec, const TraceReader& trace);

}  // namespace kvs
