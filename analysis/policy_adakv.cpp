// Ada-KV (FFY0/AdaKV): window score with the mean over rows, GQA max over the group, max-pool
// k=7, floor alpha=0.2, normalize on; prefill-once.
#include "analysis/policy_adakv.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>

#include "analysis/policy_snapkv.h"

namespace kvs {

std::vector<int> adakv_allocate(const std::vector<std::vector<float>>& scores, int b, double alpha,
                                bool normalize) {
  const int H = (int)scores.size();
  const int b_floor = (int)(alpha * b);
  struct Entry {
    float value;
    int head, rank;
  };
  std::vector<Entry> all;  // [H * n] weighted sorted scores of every head
  for (int h = 0; h < H; ++h) {
    std::vector<float> s = scores[h];
    std::sort(s.begin(), s.end(), std::greater<float>());
    double top = 0.0, total = 0.0;
    for (size_t i = 0; i < s.size(); ++i) {
      total += s[i];
      if ((int)i < b) top += s[i];
    }
    const float rho = normalize && total > 0.0 ? (float)(top / total) : 1.0f;
    for (size_t i = 0; i < s.size(); ++i) all.push_back({s[i] * rho, h, (int)i});
  }
  const size_t k = std::min(all.size(), (size_t)H * std::max(0, b));
  // Deterministic order: larger value first, then lower rank, then lower head.
  auto better = [](const Entry& a, const Entry& c) {
    return std::make_tuple(-a.value, a.rank, a.head) < std::make_tuple(-c.value, c.rank, c.head);
  };
  std::nth_element(all.begin(), all.begin() + k, all.end(), better);
  std::vector<int> count(H, 0);
  for (size_t i = 0; i < k; ++i) ++count[all[i].head];
  std::vector<int> out(H);
  for (int h = 0; h < H; ++h) {
    const double v = std::nearbyint(count[h] * (1.0 - alpha) + b_floor);
    out[h] = std::clamp((int)v, 0, (int)scores[h].size());
  }
  return out;
}

namespace {

bool parse_bool(const ParamReader& p, const std::string& key, bool fallback) {
  const std::string v = p.get_string(key, fallback ? "true" : "false");
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  throw p.error("parameter '" + key + "' must be true or false (got '" + v + "')");
}

class AdaKvPolicy : public WindowScorePolicy {
 public:
  AdaKvPolicy(const PolicySpec& spec, const ModelShape& shape)
      : AdaKvPolicy(spec, shape, ParamReader(spec, {"window", "kernel", "pool", "gqa", "floor", "normalize"})) {}
  std::string params_json() const override {
    JsonObject j;
    add_settings(j).add("floor", floor_).add_bool("normalize", normalize_);
    if (!head_budgets_.empty()) j.add("head_budgets", head_budgets_);
    return j.str();
  }
  void begin(const PolicyContext& ctx) override {
    WindowScorePolicy::begin(ctx);
    head_budgets_.clear();
  }
  void after_prefill(int P, KvSlots& kv) override {
    const std::optional<int> w = cut_window(P);
    if (!w) return;
    for (int l = 0; l < shape_.n_layers; ++l) {
      std::vector<std::vector<float>> s(shape_.n_kv_heads);  // [Hkv][P - w]
      for (int g = 0; g < shape_.n_kv_heads; ++g) s[g] = scores(l, g, *w, true);
      const std::vector<int> b = adakv_allocate(s, spec_.budget - *w, floor_, normalize_);
      for (int g = 0; g < shape_.n_kv_heads; ++g) {
        head_budgets_.push_back(b[g] + *w);
        keep_prefix_and_window(kv, l, g, P, *w, top_k_indices(s[g], b[g]));
      }
    }
  }

 private:
  AdaKvPolicy(const PolicySpec& spec, const ModelShape& shape, const ParamReader& p)
      : WindowScorePolicy(spec, shape, p, {.window = 32, .kernel = 7, .pool = Pool::Max, .gqa = GqaReduce::Max}),
        floor_(p.get_double("floor", 0.2)), normalize_(parse_bool(p, "normalize", true)) {
    if (floor_ < 0.0 || floor_ > 1.0) throw p.error("floor must be in [0, 1]");
  }

  double floor_;
  bool normalize_;
  std::vector<int> head_budgets_;  // [L * Hkv] tokens kept per head after prefill (window included)
};

}  // namespace

std::unique_ptr<Policy> make_adakv_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<AdaKvPolicy>(spec, shape);
}

}  // namespace kvs
