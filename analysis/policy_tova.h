// TOVA (POLICIES.md §3): per layer, the last query's attention averaged over all query heads;
// one kept set shared by every KV head of the layer, cut to B after the prompt and every step.
#pragma once
#include <memory>

#include "analysis/policy.h"

namespace kvs {
std::unique_ptr<Policy> make_tova_policy(const PolicySpec& spec, const ModelShape& shape);
}
