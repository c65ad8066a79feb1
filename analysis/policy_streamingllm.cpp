// StreamingLLM (mit-han-lab/streaming-llm, StartRecentKVCache.__call__): after the prompt and
// after every decode attention, keep cache slots [0, sinks) and the last `recent` slots.
#include "analysis/policy_streamingllm.h"

#include <algorithm>
#include <vector>

#include "analysis/policy_params.h"
#include "analysis/policy_positional.h"

namespace kvs {
namespace {

class StreamingLlmPolicy : public PositionalPolicy {
 public:
  explicit StreamingLlmPolicy(const PolicySpec& spec) : PositionalPolicy(spec) {
    ParamReader p(spec, {"sinks", "recent"});
    const int B = spec.budget;
    sinks_ = p.get_int("sinks", 4);
    if (sinks_ < 0) throw p.error("sinks must be >= 0");
    sinks_ = std::min(sinks_, B);  // the budget wins: sinks first, then the recent window
    recent_ = p.get_int("recent", B - sinks_);
    if (recent_ < 0) throw p.error("recent must be >= 0");
    recent_ = std::min(recent_, B - sinks_);
    cut_ = p.budget_cut({{"sinks", sinks_}, {"recent", recent_}});
  }
  std::string caveat(int) const override { return cut_; }
  std::string params_json() const override {
    return JsonObject().add("sinks", sinks_).add("recent", recent_).str();
  }

 private:
  int capacity() const override { return sinks_ + recent_; }
  void keep_mask(std::span<const int32_t> held, std::vector<uint8_t>& keep) const override {
    const int n = static_cast<int>(held.size());  // > sinks + recent; keep arrives all 0
    std::fill(keep.begin(), keep.begin() + sinks_, uint8_t{1});
    std::fill(keep.begin() + (n - recent_), keep.end(), uint8_t{1});
  }
  int sinks_ = 4, recent_ = 0;
  std::string cut_;  // given values the budget cut, for caveat()
};

}  // namespace

std::unique_ptr<Policy> make_streamingllm_policy(const PolicySpec& spec, const ModelShape&) {
  return std::make_unique<StreamingLlmPolicy>(spec);
}

}  // namespace kvs
