// TOVA (schwartz-lab-NLP/TOVA, TOVACache.reduce): keep the top-B positions of each layer by
// mean_h A[l,h,last,j]; no sinks, no protected window. At prefill end the last prompt row (the
// last row of the evidence window) is used.
#include "analysis/policy_tova.h"

#include <algorithm>
#include <vector>

#include "analysis/policy_params.h"
#include "analysis/policy_util.h"
#include "inference/errors.h"

namespace kvs {
namespace {

class TovaPolicy : public Policy {
 public:
  TovaPolicy(const PolicySpec& spec, const ModelShape& shape) : Policy(spec), shape_(shape) {
    ParamReader(spec, {});
  }
  std::string params_json() const override { return "{}"; }
  bool has_scored_sets() const override { return true; }
  std::span<const int32_t> scored_set(int layer, int kv_head) const override {
    return scored_[(size_t)layer * shape_.n_kv_heads + kv_head];
  }
  void begin(const PolicyContext& ctx) override {
    ctx_ = ctx;
    scored_.assign((size_t)shape_.n_layers * shape_.n_kv_heads, {});
  }
  void after_prefill(int P, KvSlots& kv) override {
    const PrefillEvidence* ev = ctx_.prefill;
    if (!ev || ev->window < 1 || ev->window_rows.empty())
      throw input_error("--policy tova", "needs the prompt's last attention rows (absent from the evidence)");
    std::vector<float> score(P, 0.0f);  // [P] position score of this layer
    for (int l = 0; l < shape_.n_layers; ++l) {
      std::fill(score.begin(), score.end(), 0.0f);
      for (int h = 0; h < shape_.n_heads; ++h) {
        const float* row = ev->window_row(l, h, ev->window - 1);
        for (int j = 0; j < P; ++j) score[j] += row[j] / (float)shape_.n_heads;
      }
      trim(l, score, kv);
    }
  }
  void before_attention(int, int, KvSlots&) override {}
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads, KvSlots& kv) override {
    std::vector<float> score(q_pos + 1, 0.0f);  // [q_pos + 1] position score of this layer
    for (const AttentionBlock& b : heads)
      for (int j = 0; j < b.n_keys; ++j) score[b.key(j)] += b.probs[j] / (float)shape_.n_heads;
    trim(layer, score, kv);
  }

 private:
  void trim(int layer, const std::vector<float>& score, KvSlots& kv) {
    for (int g = 0; g < shape_.n_kv_heads; ++g) {
      auto held = kv.held(layer, g);
      const int n = (int)held.size();
      std::vector<float> s(n);  // [held]
      for (int i = 0; i < n; ++i) s[i] = score[held[i]];
      std::vector<int> top = top_k_indices(s, spec_.budget);
      std::vector<int32_t>& scored = scored_[(size_t)layer * shape_.n_kv_heads + g];
      scored.clear();
      for (int i : top) scored.push_back(held[i]);
      if (n <= spec_.budget) continue;
      std::vector<uint8_t> keep(n, 0);  // [held]
      for (int i : top) keep[i] = 1;
      kv.evict(layer, g, keep);
    }
  }

  ModelShape shape_;
  PolicyContext ctx_;
  std::vector<std::vector<int32_t>> scored_;  // [L * Hkv][<= B] kept positions
};

}  // namespace

std::unique_ptr<Policy> make_tova_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<TovaPolicy>(spec, shape);
}

}  // namespace kvs
