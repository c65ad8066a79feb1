// KVzip (snu-mllab/KVzip, kv.prune): consumes the repeat-pass scores computed elsewhere
// (analysis/kvzip_scores) and prunes the prompt once; decode tokens are never evicted.
#include "analysis/policy_kvzip.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "analysis/policy_params.h"
#include "analysis/policy_util.h"
#include "inference/errors.h"

namespace kvs {
namespace {

class KvzipPolicy : public Policy {
 public:
  KvzipPolicy(const PolicySpec& spec, const ModelShape& shape) : Policy(spec), shape_(shape) {
    ParamReader p(spec, {"level"});
    level_ = p.get_string("level", "global");
    if (level_ != "global" && level_ != "uniform")
      throw p.error("level must be global or uniform (got '" + level_ + "')");
  }
  std::string params_json() const override { return JsonObject().add("level", level_).str(); }
  bool needs_key_scores() const override { return true; }
  void begin(const PolicyContext& ctx) override { ctx_ = ctx; }
  void after_prefill(int P, KvSlots& kv) override {
    const PrefillEvidence* ev = ctx_.prefill;
    const size_t expect = (size_t)shape_.n_layers * shape_.n_kv_heads * P;
    if (!ev || ev->key_scores.empty())
      throw input_error("kvzip", "needs the repeat-pass scores (run with --model)");
    if (ev->key_scores.size() != expect)
      throw input_error("kvzip", "repeat-pass scores have " + std::to_string(ev->key_scores.size()) +
                                     " values, expected L*Hkv*P = " + std::to_string(expect));
    if (P <= spec_.budget) return;  // nothing to compress
    std::vector<uint8_t> keep_pos(expect, 0);  // [L, Hkv, P]
    if (level_ == "uniform") {
      for (size_t lg = 0; lg < (size_t)shape_.n_layers * shape_.n_kv_heads; ++lg)
        for (int j : top_k_indices(std::span<const float>(ev->key_scores.data() + lg * P, P), spec_.budget))
          keep_pos[lg * P + j] = 1;
    } else {
      select_global(ev->key_scores, P, keep_pos);
    }
    for (int l = 0; l < shape_.n_layers; ++l)
      for (int g = 0; g < shape_.n_kv_heads; ++g) {
        auto held = kv.held(l, g);
        const uint8_t* kp = keep_pos.data() + ((size_t)l * shape_.n_kv_heads + g) * P;
        std::vector<uint8_t> keep(held.size(), 1);  // [held]
        for (size_t i = 0; i < held.size(); ++i)
          if (held[i] < P) keep[i] = kp[held[i]];
        kv.evict(l, g, keep);
      }
  }
  void before_attention(int, int, KvSlots&) override {}
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
  bool needs_decode_rows(int) const override { return false; }

 private:
  // One threshold over all L*Hkv*P pairs: the L*Hkv*B highest scores stay. Ties keep the newer
  // position (then the later head).
  void select_global(const std::vector<float>& s, int P, std::vector<uint8_t>& keep) const {
    std::vector<uint32_t> idx(s.size());  // flat [L, Hkv, P] indices
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = (uint32_t)i;
    const size_t k = std::min(idx.size(), (size_t)shape_.n_layers * shape_.n_kv_heads * spec_.budget);
    auto better = [&](uint32_t a, uint32_t b) {
      return std::make_tuple(s[a], a % P, a) > std::make_tuple(s[b], b % P, b);
    };
    std::nth_element(idx.begin(), idx.begin() + k, idx.end(), better);
    for (size_t i = 0; i < k; ++i) keep[idx[i]] = 1;
  }

  ModelShape shape_;
  PolicyContext ctx_;
  std::string level_ = "global";
};

}  // namespace

std::unique_ptr<Policy> make_kvzip_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<KvzipPolicy>(spec, shape);
}

}  // namespace kvs
