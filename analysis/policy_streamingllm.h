// StreamingLLM (POLICIES.md §1): the first `sinks` entries plus the most recent `recent`.
#pragma once
#include <memory>

#include "analysis/policy.h"

namespace kvs {
std::unique_ptr<Policy> make_streamingllm_policy(const PolicySpec& spec, const ModelShape& shape);
}
