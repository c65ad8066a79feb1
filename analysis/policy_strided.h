// Strided: a dense recent window plus older positions kept at a stride that doubles with age
// (docs/policies.md "strided" gives the exact rule).
#pragma once
#include <cstdint>
#include <memory>

#include "analysis/policy.h"

namespace kvs {

// Whether a position at `age` (newest held position minus this one) is kept by the stride rule
// with a dense window of `recent`: age < recent keeps; else band k = floor(log2(age/recent + 1))
// keeps positions divisible by 2^k.
bool strided_rule_keeps(int64_t age, int64_t pos, int recent);

std::unique_ptr<Policy> make_strided_policy(const PolicySpec& spec, const ModelShape& shape);

}  // namespace kvs
