// Full cache: keeps every position (the reference every other policy is compared with).
#pragma once
#include <memory>

#include "analysis/policy.h"

namespace kvs {
std::unique_ptr<Policy> make_full_policy(const PolicySpec& spec, const ModelShape& shape);
}
