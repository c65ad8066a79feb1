// Local window: every (layer, KV head) keeps the most recent B positions.
#pragma once
#include <memory>

#include "analysis/policy.h"

namespace kvs {
std::unique_ptr<Policy> make_window_policy(const PolicySpec& spec, const ModelShape& shape);
}
