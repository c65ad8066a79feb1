// SnapKV (FasterDecoding/SnapKV, init_snapkv defaults w=32, k=5, avgpool): the prompt is cut
// to B per KV head once, at prefill end; decode tokens are appended and never evicted.
#include "analysis/policy_snapkv.h"

#include <algorithm>

#include "analysis/policy_params.h"
#include "inference/errors.h"

namespace kvs {

void require_window_rows(const PrefillEvidence* ev, const std::string& policy, int P) {
  if (!ev || ev->window < 1 || ev->prompt_len != P ||
      ev->window_rows.size() != (size_t)ev->shape.n_layers * ev->shape.n_heads * ev->window * P)
    throw input_error("--policy " + policy, "needs the prompt's observation-window rows (absent from the evidence)");
}

int effective_window(const PrefillEvidence& ev, int requested, int budget) {
  return std::max(0, std::min({requested, ev.window, ev.prompt_len, budget}));
}

std::string window_caveat(int window, int budget, int prompt_len) {
  if (prompt_len <= budget || window < budget) return {};
  return "its window (" + std::to_string(window) + ") covers the whole budget (" + std::to_string(budget) +
         "): no prompt position is chosen by score, the last " + std::to_string(budget) +
         " prompt tokens are kept (give window=N below the budget)";
}

std::vector<float> snap_scores(const PrefillEvidence& ev, int layer, int kv_head, int w, int kernel,
                               Pool pool, GqaReduce gqa, bool mean_rows) {
  return pool1d(group_window_scores(ev, layer, kv_head, w, mean_rows, gqa), kernel, pool);
}

void keep_prefix_and_window(KvSlots& kv, int layer, int kv_head, int P, int w,
                            std::span<const int> keep_prefix) {
  std::vector<uint8_t> keep_pos(P, 0);  // [P] by prompt position
  for (int i : keep_prefix) keep_pos[i] = 1;
  auto held = kv.held(layer, kv_head);
  std::vector<uint8_t> keep(held.size(), 1);  // [held]
  for (size_t i = 0; i < held.size(); ++i)
    if (held[i] < P - w) keep[i] = keep_pos[held[i]];
  kv.evict(layer, kv_head, keep);
}

namespace {

class SnapKvPolicy : public Policy {
 public:
  SnapKvPolicy(const PolicySpec& spec, const ModelShape& shape) : Policy(spec), shape_(shape) {
    ParamReader p(spec, {"window", "kernel", "pool", "gqa"});
    window_ = p.get_int("window", 32);
    kernel_ = p.get_int("kernel", 5);
    if (window_ < 1) throw p.error("window must be >= 1");
    if (kernel_ < 1 || kernel_ % 2 == 0) throw p.error("kernel must be a positive odd number");
    pool_ = parse_pool(spec.name, p.get_string("pool", "avg"));
    gqa_ = parse_gqa(spec.name, p.get_string("gqa", "mean"));
  }
  std::string caveat(int prompt_len) const override { return window_caveat(window_, spec_.budget, prompt_len); }
  std::string params_json() const override {
    return JsonObject().add("window", window_).add("kernel", kernel_).add("pool", pool_name(pool_))
        .add("gqa", gqa_name(gqa_)).str();
  }
  void begin(const PolicyContext& ctx) override { ctx_ = ctx; }
  void after_prefill(int P, KvSlots& kv) override {
    if (P <= spec_.budget) return;  // nothing to compress
    require_window_rows(ctx_.prefill, spec_.name, P);
    const PrefillEvidence& ev = *ctx_.prefill;
    const int w = effective_window(ev, window_, spec_.budget);
    for (int l = 0; l < shape_.n_layers; ++l)
      for (int g = 0; g < shape_.n_kv_heads; ++g) {
        const std::vector<float> s = snap_scores(ev, l, g, w, kernel_, pool_, gqa_, false);
        keep_prefix_and_window(kv, l, g, P, w, top_k_indices(s, spec_.budget - w));
      }
  }
  void before_attention(int, int, KvSlots&) override {}
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
  bool needs_decode_rows(int) const override { return false; }

 private:
  ModelShape shape_;
  PolicyContext ctx_;
  int window_ = 32, kernel_ = 5;
  Pool pool_ = Pool::Avg;
  GqaReduce gqa_ = GqaReduce::Mean;
};

}  // namespace

std::unique_ptr<Policy> make_snapkv_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<SnapKvPolicy>(spec, shape);
}

}  // namespace kvs
