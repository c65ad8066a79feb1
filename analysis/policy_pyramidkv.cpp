// PyramidKV (Zefan-Cai/KVCache-Factory): per-layer budgets max_num - l * step, selection as
// SnapKV (per KV head top-k of the pooled window score plus the window), once at prefill end.
#include "analysis/policy_pyramidkv.h"

#include <algorithm>
#include <cmath>

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

class PyramidKvPolicy : public WindowScorePolicy {
 public:
  PyramidKvPolicy(const PolicySpec& spec, const ModelShape& shape)
      : PyramidKvPolicy(spec, shape, ParamReader(spec, {"window", "kernel", "pool", "gqa", "beta"})) {}
  std::string params_json() const override {
    JsonObject j;
    add_settings(j).add("beta", beta_);
    if (!layer_budgets_.empty()) j.add("layer_budgets", layer_budgets_);
    return j.str();
  }
  void begin(const PolicyContext& ctx) override {
    WindowScorePolicy::begin(ctx);
    layer_budgets_.clear();
  }
  void after_prefill(int P, KvSlots& kv) override {
    const std::optional<int> w = cut_window(P);
    if (!w) return;
    const std::vector<int> prefix = pyramid_prefix_budgets(shape_.n_layers, P, spec_.budget, *w, beta_);
    for (int l = 0; l < shape_.n_layers; ++l) {
      layer_budgets_.push_back(prefix[l] + *w);
      for (int g = 0; g < shape_.n_kv_heads; ++g)
        keep_prefix_and_window(kv, l, g, P, *w, top_k_indices(scores(l, g, *w, false), prefix[l]));
    }
  }

 private:
  PyramidKvPolicy(const PolicySpec& spec, const ModelShape& shape, const ParamReader& p)
      : WindowScorePolicy(spec, shape, p, {.window = 32, .kernel = 5, .pool = Pool::Avg, .gqa = GqaReduce::Mean}),
        beta_(p.get_double("beta", 20.0)) {
    // Below 1 the schedule turns upside down: deeper layers would get more than shallow ones.
    if (!(beta_ >= 1.0)) throw p.error("beta must be >= 1");
  }

  double beta_;
  std::vector<int> layer_budgets_;  // [L] tokens kept per head after prefill (window included)
};

}  // namespace

std::unique_ptr<Policy> make_pyramidkv_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<PyramidKvPolicy>(spec, shape);
}

}  // namespace kvs
