// Local window: after the prompt and after every decode attention, keep the last B entries.
#include "analysis/policy_window.h"

#include <vector>

#include "analysis/policy_params.h"

namespace kvs {
namespace {

class WindowPolicy : public Policy {
 public:
  explicit WindowPolicy(const PolicySpec& spec) : Policy(spec) { ParamReader(spec, {}); }
  std::string params_json() const override { return "{}"; }
  void begin(const PolicyContext&) override {}
  void after_prefill(int, KvSlots& kv) override {
    for (int l = 0; l < kv.n_layers(); ++l) trim(l, kv);
  }
  void before_attention(int, int, KvSlots&) override {}
  void after_attention(int layer, int, std::span<const AttentionBlock>, KvSlots& kv) override {
    trim(layer, kv);
  }

 private:
  void trim(int layer, KvSlots& kv) {
    for (int g = 0; g < kv.n_kv_heads(); ++g) {
      const int n = (int)kv.held(layer, g).size();
      if (n <= spec_.budget) continue;
      std::vector<uint8_t> keep(n, 0);  // [held]
      for (int i = n - spec_.budget; i < n; ++i) keep[i] = 1;
      kv.evict(layer, g, keep);
    }
  }
};

}  // namespace

std::unique_ptr<Policy> make_window_policy(const PolicySpec& spec, const ModelShape&) {
  return std::make_unique<WindowPolicy>(spec);
}

}  // namespace kvs
