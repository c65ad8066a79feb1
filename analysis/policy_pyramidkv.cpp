// PyramidKV (Zefan-Cai/KVCache-Factory): per-layer budgets max_num - l * step, selection as
// SnapKV (per KV head top-k of the pooled window score plus the window), once at prefill end.
#include "analysis/policy_pyramidkv.h"

#include <algorithm>
#include <cmath>

#include "analysis/policy_params.h"
#include "analysis/policy_snapkv.h"

namespace kvs {

std::vector<int> pyramid_prefix_budgets(int L, int P, int B, int w, double beta) {
  if (P < B) return std::vector<int>(L, P - w);
  const int base = B - w;
  if (P < 2 * base) return std::vector<int>(L, base);
  int min_num = (int)std::floor(base / beta);
  int max_num = 2 * base - min_num;
  if (max_num >= P - w) {
    max_num = P - w;
    min_num = 2 * base - max_num;
  }
  const int step = L > 1 ? (max_num - min_num) / (L - 1) : 0;
  std::vector<int> out(L);
  for (int l = 0; l < L; ++l) out[l] = std::clamp(max_num - l * step, 0, P - w);
  return out;
}

namespace {

class PyramidKvPolicy : public Policy {
 public:
  PyramidKvPolicy(const PolicySpec& spec, const ModelShape& shape) : Policy(spec), shape_(shape) {
    ParamReader p(spec, {"window", "kernel", "pool", "gqa", "beta"});
    window_ = p.get_int("window", 32);
    kernel_ = p.get_int("kernel", 5);
    beta_ = p.get_double("beta", 20.0);
    if (window_ < 1) throw p.error("window must be >= 1");
    if (kernel_ < 1 || kernel_ % 2 == 0) throw p.error("kernel must be a positive odd number");
    // Below 1 the schedule turns upside down: deeper layers would get more than shallow ones.
    if (!(beta_ >= 1.0)) throw p.error("beta must be >= 1");
    pool_ = parse_pool(spec.name, p.get_string("pool", "avg"));
    gqa_ = parse_gqa(spec.name, p.get_string("gqa", "mean"));
  }
  std::string caveat(int prompt_len) const override { return window_caveat(window_, spec_.budget, prompt_len); }
  std::string params_json() const override {
    JsonObject j;
    j.add("window", window_).add("kernel", kernel_).add("pool", pool_name(pool_))
        .add("gqa", gqa_name(gqa_)).add("beta", beta_);
    if (!layer_budgets_.empty()) j.add("layer_budgets", layer_budgets_);
    return j.str();
  }
  void begin(const PolicyContext& ctx) override {
    ctx_ = ctx;
    layer_budgets_.clear();
  }
  void after_prefill(int P, KvSlots& kv) override {
    if (P <= spec_.budget) return;  // nothing to compress
    require_window_rows(ctx_.prefill, spec_.name, P);
    const PrefillEvidence& ev = *ctx_.prefill;
    const int w = effective_window(ev, window_, spec_.budget);
    const std::vector<int> prefix = pyramid_prefix_budgets(shape_.n_layers, P, spec_.budget, w, beta_);
    for (int l = 0; l < shape_.n_layers; ++l) {
      layer_budgets_.push_back(prefix[l] + w);
      for (int g = 0; g < shape_.n_kv_heads; ++g) {
        const std::vector<float> s = snap_scores(ev, l, g, w, kernel_, pool_, gqa_, false);
        keep_prefix_and_window(kv, l, g, P, w, top_k_indices(s, prefix[l]));
      }
    }
  }
  void before_attention(int, int, KvSlots&) override {}
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
  bool needs_decode_rows(int) const override { return false; }

 private:
  ModelShape shape_;
  PolicyContext ctx_;
  int window_ = 32, kernel_ = 5;
  double beta_ = 20.0;
  Pool pool_ = Pool::Avg;
  GqaReduce gqa_ = GqaReduce::Mean;
  std::vector<int> layer_budgets_;  // [L] tokens kept per head after prefill (window included)
};

}  // namespace

std::unique_ptr<Policy> make_pyramidkv_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<PyramidKvPolicy>(spec, shape);
}

}  // namespace kvs
