// The live run's controller: a policy driven inside the engine, its kept sets recorded.
#include "analysis/enforcing_controller.h"

#include "analysis/parallel_for.h"
#include "analysis/policy_util.h"

namespace kvs {

EnforcingController::EnforcingController(Policy& policy, PrefillEvidence& evidence, const ModelShape& shape,
                                         int P, int S)
    : policy_(policy), evidence_(evidence), shape_(shape), P_(P), S_(S), T_(P + S),
      kept_(static_cast<size_t>(S) * shape.n_layers * shape.n_kv_heads * T_, 0), kept_rows_(shape.n_layers) {}

void EnforcingController::after_prefill(int prompt_len, KvSlots& kv) {
  if (!key_scores.empty()) evidence_.key_scores = key_scores;
  policy_.after_prefill(prompt_len, kv);
}

void EnforcingController::before_attention(int layer, int q_pos, KvSlots& kv) {
  policy_.before_attention(layer, q_pos, kv);
  const int step = q_pos - P_;
  if (step < 0 || step >= S_) return;
  uint8_t* rows = kept_.data() + (static_cast<size_t>(step) * shape_.n_layers + layer) * shape_.n_kv_heads * T_;
  kept_rows_.write(kv, layer, rows, T_);  // [Hkv, T]
}

void EnforcingController::after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads, KvSlots& kv) {
  const int H = static_cast<int>(heads.size());
  renormed_.assign(heads.begin(), heads.end());
  probs_.resize(H);
  lse_.resize(H);
  // A row is over its attended keys already; renormalize_kept gives it the numbers the simulator
  // gives a recorded row renormalized over the same keys.
  parallel_for(H, [&](int h) {
    const AttentionBlock& b = heads[h];
    probs_[h].resize(b.n_keys);
    lse_[h] = renormalize_kept(std::span<const float>(b.probs, b.n_keys), b.lse[0], probs_[h]);
    renormed_[h].probs = probs_[h].data();
    renormed_[h].lse = &lse_[h];
  }, H > 0 && worth_a_team(static_cast<long>(heads[0].n_keys) * H));
  policy_.after_attention(layer, q_pos, renormed_, kv);
}

}  // namespace kvs
