// H2O (POLICIES.md §2, official real-drop variant): accumulated attention per KV head, heavy
// hitters plus a recent window, evicting after the prompt and after every decode attention.
#pragma once
#include <memory>

#include "analysis/policy.h"

namespace kvs {
std::unique_ptr<Policy> make_h2o_policy(const PolicySpec& spec, const ModelShape& shape);
}
