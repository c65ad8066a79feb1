// SnapKV (FasterDecoding/SnapKV, init_snapkv defaults w=32, k=5, avgpool): the prompt is cut
// to B per KV head once, at prefill end; decode tokens are appended and never evicted. Also the
// family's base, WindowScorePolicy.
#include "analysis/policy_snapkv.h"

#include <algorithm>

#include "inference/errors.h"

namespace kvs {

WindowScorePolicy::WindowScorePolicy(const PolicySpec& spec, const ModelShape& shape, const ParamReader& p,
                                     WindowSettings defaults)
    : Policy(spec), shape_(shape) {
  settings_.window = p.get_int("window", defaults.window);
  settings_.kernel = p.get_int("kernel", defaults.kernel);
  if (settings_.window < 1) throw p.error("window must be >= 1");
  if (settings_.kernel < 1 || settings_.kernel % 2 == 0) throw p.error("kernel must be a positive odd number");
  settings_.pool = parse_pool(spec.name, p.get_string("pool", pool_name(defaults.pool)));
  settings_.gqa = parse_gqa(spec.name, p.get_string("gqa", gqa_name(defaults.gqa)));
}

std::string WindowScorePolicy::caveat(int prompt_len) const {
  const int window = settings_.window, budget = spec_.budget;
  if (prompt_len <= budget) return {};
  if (window >= budget)
    return "its window (" + std::to_string(window) + ") covers the whole budget (" + std::to_string(budget) +
           "): no prompt position is chosen by score, the last " + std::to_string(budget) +
           " prompt tokens are kept (give window=N below the budget)";
  if (rows_held_ > 0)
    return "its window (" + std::to_string(window) + ") is longer than the " + std::to_string(rows_held_) +
           " observation rows the prompt's evidence holds: it scored with the last " + std::to_string(rows_held_);
  return {};
}

JsonObject& WindowScorePolicy::add_settings(JsonObject& j) const {
  return j.add("window", settings_.window).add("kernel", settings_.kernel).add("pool", pool_name(settings_.pool))
      .add("gqa", gqa_name(settings_.gqa));
}

std::optional<int> WindowScorePolicy::cut_window(int P) {
  if (P <= spec_.budget) return std::nullopt;
  const PrefillEvidence* ev = ctx_.prefill;
  if (!ev || ev->window < 1 || ev->prompt_len != P ||
      ev->window_rows.size() != (size_t)ev->shape.n_layers * ev->shape.n_heads * ev->window * P)
    throw input_error("--policy " + spec_.name,
                      "needs the prompt's observation-window rows (the trace holds no prefill reductions)");
  if (ev->window < std::min({settings_.window, P, spec_.budget})) rows_held_ = ev->window;
  return std::max(0, std::min({settings_.window, ev->window, ev->prompt_len, spec_.budget}));
}

std::vector<float> WindowScorePolicy::scores(int layer, int kv_head, int w, bool mean_rows) const {
  return pool1d(group_window_scores(*ctx_.prefill, layer, kv_head, w, mean_rows, settings_.gqa), settings_.kernel,
                settings_.pool);
}

void WindowScorePolicy::keep_prefix_and_window(KvSlots& kv, int layer, int kv_head, int P, int w,
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

class SnapKvPolicy : public WindowScorePolicy {
 public:
  SnapKvPolicy(const PolicySpec& spec, const ModelShape& shape)
      : WindowScorePolicy(spec, shape, ParamReader(spec, {"window", "kernel", "pool", "gqa"}),
                          {.window = 32, .kernel = 5, .pool = Pool::Avg, .gqa = GqaReduce::Mean}) {}
  std::string params_json() const override {
    JsonObject j;
    return add_settings(j).str();
  }
  void after_prefill(int P, KvSlots& kv) override {
    const std::optional<int> w = cut_window(P);
    if (!w) return;
    for (int l = 0; l < shape_.n_layers; ++l)
      for (int g = 0; g < shape_.n_kv_heads; ++g)
        keep_prefix_and_window(kv, l, g, P, *w, top_k_indices(scores(l, g, *w, false), spec_.budget - *w));
  }
};

}  // namespace

std::unique_ptr<Policy> make_snapkv_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<SnapKvPolicy>(spec, shape);
}

}  // namespace kvs
