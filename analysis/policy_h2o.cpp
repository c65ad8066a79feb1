// H2O: acc[l,g], a score per held entry (in held order), starts from the prompt's column sums
// (query heads reduced to their KV head with the selected GQA reduction) and adds every decode
// step's rows, reduced the same way; over budget, keep the top `heavy` candidates by acc (all but
// the last `recent` entries) plus the last `recent` entries.
#include "analysis/policy_h2o.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/parallel_for.h"
#include "analysis/policy_params.h"
#include "analysis/policy_util.h"
#include "inference/errors.h"
#include "inference/kv_positions.h"

namespace kvs {
namespace {

class H2oPolicy : public Policy {
 public:
  H2oPolicy(const PolicySpec& spec, const ModelShape& shape) : Policy(spec), shape_(shape) {
    ParamReader p(spec, {"heavy", "recent", "gqa"});
    const int B = spec.budget;
    if (p.get_int("heavy", 0) < 0) throw p.error("heavy must be >= 0");
    if (p.get_int("recent", 0) < 0) throw p.error("recent must be >= 0");
    heavy_ = std::clamp(p.get_int("heavy", p.has("recent") ? B - p.get_int("recent", 0) : B / 2), 0, B);
    recent_ = std::clamp(p.get_int("recent", B - heavy_), 0, B - heavy_);
    gqa_ = parse_gqa(spec.name, p.get_string("gqa", "mean"));
    cut_ = p.budget_cut({{"heavy", heavy_}, {"recent", recent_}});
  }
  std::string caveat(int) const override { return cut_; }
  std::string params_json() const override {
    return JsonObject().add("heavy", heavy_).add("recent", recent_).add("gqa", gqa_name(gqa_)).str();
  }
  bool has_scored_sets() const override { return true; }
  // The candidates kept: every held entry but the last `recent` (those before them were kept by
  // score, or all were kept while under budget).
  std::span<const int32_t> scored_set(int layer, int kv_head, const KvSlots& kv) const override {
    const std::span<const int32_t> held = kv.held(layer, kv_head);
    return held.first(held.size() - std::min<size_t>(held.size(), recent_));
  }
  void begin(const PolicyContext& ctx) override {
    ctx_ = ctx;
    const size_t n = (size_t)shape_.n_layers * shape_.n_kv_heads;
    acc_.assign(n, {});
    work_.assign(shape_.n_kv_heads, {});
  }
  void after_prefill(int P, KvSlots& kv) override {
    const PrefillEvidence* ev = ctx_.prefill;
    if (!ev || ev->colsum.size() != (size_t)shape_.n_layers * shape_.n_heads * P)
      throw input_error("--policy h2o",
                        "needs the prompt's attention column sums (the trace holds no prefill reductions)");
    const int G = shape_.group();
    for (int l = 0; l < shape_.n_layers; ++l) {
      parallel_for(shape_.n_kv_heads, [&](int g) {
        std::vector<const float*> rows;  // G pointers to [P]
        for (int i = 0; i < G; ++i) rows.push_back(ev->colsum_at(l, g * G + i));
        const std::vector<float> red = reduce_group(rows, P, gqa_);  // [P] by position
        const std::span<const int32_t> held = kv.held(l, g);
        std::vector<float>& acc = acc_[idx(l, g)];
        acc.resize(held.size());
        for (size_t i = 0; i < held.size(); ++i) acc[i] = red[held[i]];
        choose(l, g, (int)held.size());
      }, wide(P));
      evict_chosen(l, kv);
    }
  }
  void before_attention(int, int, KvSlots&) override {}
  // A decode step adds each KV head's group row: its query heads' rows, renormalized, reduced by
  // the GQA reduction (on the GPU in a CUDA run).
  bool needs_decode_rows(int) const override { return false; }
  std::optional<GqaReduce> group_rows(int) const override { return gqa_; }
  void on_group_rows(int, int, std::span<const GroupRow> rows) override { rows_ = rows; }
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock>, KvSlots& kv) override {
    if ((int)rows_.size() != shape_.n_kv_heads) throw std::logic_error("h2o: a decode step without its group rows");
    // Each KV head's sums and choice are its own, so the KV heads run side by side; the cache
    // is changed after, on this thread.
    parallel_for(shape_.n_kv_heads, [&](int g) {
      const std::span<const int32_t> held = kv.held(layer, g);
      std::vector<float>& acc = acc_[idx(layer, g)];
      acc.resize(held.size(), 0.0f);  // the entries appended since the last step, at the end
      add_row(rows_[g], held, acc);
      choose(layer, g, (int)held.size());
    }, wide(q_pos));
    rows_ = {};
    evict_chosen(layer, kv);
  }

 private:
  // Scratch of one KV head, reused every step.
  struct Work {
    std::vector<uint8_t> keep;  // [held] 1 = kept
    bool over = false;          // keep is to be applied
  };

  size_t idx(int l, int g) const { return (size_t)l * shape_.n_kv_heads + g; }
  // Worth a team of threads: a layer's rows over this many keys.
  bool wide(int n_keys) const { return worth_a_team((long)n_keys * shape_.n_heads); }

  // acc[i] += the row's value at held[i], for the held entries the row attended (every one,
  // unless an engine skipped some: then matched by position, both lists ascending).
  static void add_row(const GroupRow& r, std::span<const int32_t> held, std::vector<float>& acc) {
    const bool all = r.n_keys == (int)held.size() &&
                     (r.key_pos == held.data() || !r.key_pos || same_positions(held, {r.key_pos, held.size()}));
    if (all) {
      for (int j = 0; j < r.n_keys; ++j) acc[j] += r.values[j];
      return;
    }
    size_t i = 0;
    for (int j = 0; j < r.n_keys; ++j) {
      while (i < held.size() && held[i] < r.key(j)) ++i;
      if (i == held.size() || held[i] != r.key(j))
        throw std::logic_error("h2o: a group row over position " + std::to_string(r.key(j)) + ", which is not held");
      acc[i] += r.values[j];
    }
  }
  // When (layer, g)'s n held entries are more than the budget: its keep mask, and the scores of
  // the entries it leaves out dropped.
  void choose(int layer, int g, int n) {
    Work& w = work_[g];
    w.over = n > heavy_ + recent_;
    if (!w.over) return;
    const int n_cand = n - recent_;
    const std::span<const float> cand(acc_[idx(layer, g)].data(), n_cand);  // acc is in held order
    top_k_keep(cand, heavy_, n, w.keep);
    std::fill(w.keep.begin() + n_cand, w.keep.end(), 1);
    drop_left_out(w.keep, acc_[idx(layer, g)]);
  }
  // Drops the scores of the entries keep leaves out (the cache drops them in evict_chosen): the
  // stretches between them move down, one memmove a decode step. Here, not in evict_chosen, so
  // that the KV heads do it side by side.
  static void drop_left_out(std::span<const uint8_t> keep, std::vector<float>& acc) {
    const uint8_t* const end = keep.data() + acc.size();
    size_t out = 0, from = 0;
    for (const uint8_t* z = keep.data(); z != end && (z = static_cast<const uint8_t*>(std::memchr(z, 0, end - z)));
         ++z) {
      const size_t i = z - keep.data();
      std::memmove(acc.data() + out, acc.data() + from, (i - from) * sizeof(float));
      out += i - from;
      from = i + 1;
    }
    std::memmove(acc.data() + out, acc.data() + from, (acc.size() - from) * sizeof(float));
    acc.resize(out + acc.size() - from);
  }
  // Evicts what choose() left out (their scores are gone already).
  void evict_chosen(int layer, KvSlots& kv) {
    for (int g = 0; g < shape_.n_kv_heads; ++g)
      if (work_[g].over) kv.evict(layer, g, work_[g].keep);
  }

  ModelShape shape_;
  PolicyContext ctx_;
  int heavy_ = 0, recent_ = 0;
  std::string cut_;  // given values the budget cut, for caveat()
  GqaReduce gqa_ = GqaReduce::Mean;
  std::vector<std::vector<float>> acc_;       // [L * Hkv][held] accumulated attention, in held order
  std::vector<Work> work_;                    // [Hkv]
  std::span<const GroupRow> rows_;            // [Hkv] this step's group rows, until after_attention
};

}  // namespace

std::unique_ptr<Policy> make_h2o_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<H2oPolicy>(spec, shape);
}

}  // namespace kvs
