// StreamingLLM (mit-han-lab/streaming-llm, StartRecentKVCache.__call__): after the prompt and
// after every decode attention, keep cache slots [0, sinks) and the last `recent` slots.
#include "analysis/policy_streamingllm.h"

#include <algorithm>
#include <vector>

#include "analysis/policy_params.h"

namespace kvs {
namespace {

class StreamingLlmPolicy : public Policy {
 public:
  explicit StreamingLlmPolicy(const PolicySpec& spec) : Policy(spec) {
    ParamReader p(spec, {"sinks", "recent"});
    const int B = spec.budget;
    sinks_ = p.get_int("sinks", 4);
    if (sinks_ < 0) throw p.error("sinks must be >= 0");
    sinks_ = std::min(sinks_, B);  // the budget wins: sinks first, then the recent window
    recent_ = p.get_int("recent", B - sinks_);
    if (recent_ < 0) throw p.error("recent must be >= 0");
    recent_ = std::min(recent_, B - sinks_);
  }
  std::string params_json() const override {
    return JsonObject().add("sinks", sinks_).add("recent", recent_).str();
  }
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
      if (n <= sinks_ + recent_) continue;
      std::vector<uint8_t> keep(n, 0);  // [held]
      for (int i = 0; i < n; ++i) keep[i] = i < sinks_ || i >= n - recent_;
      kv.evict(layer, g, keep);
    }
  }
  int sinks_ = 4, recent_ = 0;
};

}  // namespace

std::unique_ptr<Policy> make_streamingllm_policy(const PolicySpec& spec, const ModelShape&) {
  return std::make_unique<StreamingLlmPolicy>(spec);
}

}  // namespace kvs
