// Full cache: nothing is evicted or skipped.
#include "analysis/policy_full.h"

#include "analysis/policy_params.h"

namespace kvs {
namespace {

class FullPolicy : public Policy {
 public:
  explicit FullPolicy(const PolicySpec& spec) : Policy(spec) { ParamReader(spec, {}); }
  std::string params_json() const override { return "{}"; }
  void begin(const PolicyContext&) override {}
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int, int, KvSlots&) override {}
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
  bool needs_decode_rows(int) const override { return false; }
};

}  // namespace

std::unique_ptr<Policy> make_full_policy(const PolicySpec& spec, const ModelShape&) {
  return std::make_unique<FullPolicy>(spec);
}

}  // namespace kvs
