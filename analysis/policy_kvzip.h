// KVzip (POLICIES.md §7): prompt KV pairs scored by context reconstruction (repeat-pass
// key_scores [L, Hkv, P] from PrefillEvidence), kept once at prefill end: per head top-B
// ("uniform", official pair-uniform) or one global threshold keeping L*Hkv*B pairs ("global",
// official 'pair', the default).
#pragma once
#include <memory>

#include "analysis/policy.h"

namespace kvs {
std::unique_ptr<Policy> make_kvzip_policy(const PolicySpec& spec, const ModelShape& shape);
}
