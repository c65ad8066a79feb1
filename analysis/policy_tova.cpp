// TOVA (schwartz-lab-NLP/TOVA, TOVACache.reduce): keep the top-B positions of each layer by
// mean_h A[l,h,last,j]; no sinks, no protected window. At prefill end the last prompt row (the
// last row of the evidence window) is used. A decode step's mean is summed per KV head first (the
// engine's group rows, made on the GPU in a CUDA run), then over the KV heads.
#include "analysis/policy_tova.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "analysis/parallel_for.h"
#include "analysis/policy_params.h"
#include "analysis/policy_util.h"
#include "inference/errors.h"
#include "inference/kv_positions.h"

namespace kvs {
namespace {

class TovaPolicy : public Policy {
 public:
  TovaPolicy(const PolicySpec& spec, const ModelShape& shape) : Policy(spec), shape_(shape) {
    ParamReader(spec, {});
  }
  std::string params_json() const override { return "{}"; }
  bool has_scored_sets() const override { return true; }
  // Everything held is kept by score.
  std::span<const int32_t> scored_set(int layer, int kv_head, const KvSlots& kv) const override {
    return kv.held(layer, kv_head);
  }
  void begin(const PolicyContext& ctx) override {
    ctx_ = ctx;
    chooser_.assign(shape_.n_kv_heads, 0);
    work_.assign(shape_.n_kv_heads, {});
  }
  void after_prefill(int P, KvSlots& kv) override {
    const PrefillEvidence* ev = ctx_.prefill;
    if (!ev || ev->window < 1 || ev->window_rows.empty())
      throw input_error("--policy tova",
                        "needs the prompt's last attention rows (the trace holds no prefill reductions)");
    for (int l = 0; l < shape_.n_layers; ++l) {
      score_.assign(P, 0.0f);
      for (int h = 0; h < shape_.n_heads; ++h) {
        const float* row = ev->window_row(l, h, ev->window - 1);
        for (int j = 0; j < P; ++j) score_[j] += row[j] / (float)shape_.n_heads;
      }
      find_choosers(l, kv);
      trim(l, kv);
    }
  }
  void before_attention(int, int, KvSlots&) override {}
  bool needs_decode_rows(int) const override { return false; }
  std::optional<ops::GroupReduce> group_rows(int) const override { return ops::GroupReduce::Sum; }
  void on_group_rows(int, int, std::span<const GroupRow> rows) override { rows_ = rows; }
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock>, KvSlots& kv) override {
    if ((int)rows_.size() != shape_.n_kv_heads) throw std::logic_error("tova: a decode step without its group rows");
    find_choosers(layer, kv);
    if (one_held_list(layer, kv)) {
      // Every KV head holds the same entries and every row is over them: the scores are the
      // rows' sums in held order, with no position map to fill and read back.
      Work& w = work_[0];
      w.score.resize(rows_[0].n_keys);
      add_rows(rows_, w.score.data());
      rows_ = {};
      top_k_keep(w.score, spec_.budget, w.score.size(), w.keep);
      evict_chosen(layer, kv);
      return;
    }
    score_.assign(q_pos + 1, 0.0f);
    for (size_t r0 = 0, r1 = 0; r0 < rows_.size(); r0 = r1) {
      for (r1 = r0 + 1; r1 < rows_.size() && same_keys(layer, kv, rows_[r0], rows_[r1]);) ++r1;
      add_rows(rows_.subspan(r0, r1 - r0));
    }
    rows_ = {};
    trim(layer, kv);
  }

 private:
  static constexpr int kChunk = 1024;  // keys a thread adds at a time
  // Scratch of one KV head, reused every step.
  struct Work {
    std::vector<float> score;   // [held] score of each held entry
    std::vector<uint8_t> keep;  // [held] 1 = kept
  };

  // Whether two group rows are over the same keys; rows over their KV heads' whole held lists
  // are when the heads share a chooser.
  bool same_keys(int layer, const KvSlots& kv, const GroupRow& a, const GroupRow& b) const {
    if (a.n_keys != b.n_keys) return false;
    if (a.key_pos == b.key_pos) return true;
    if (!a.key_pos || !b.key_pos) return false;
    const std::span<const int32_t> ha = kv.held(layer, a.kv_head), hb = kv.held(layer, b.kv_head);
    if (a.key_pos == ha.data() && (int)ha.size() == a.n_keys && b.key_pos == hb.data() && (int)hb.size() == b.n_keys)
      return chooser_[a.kv_head] == chooser_[b.kv_head];
    return same_positions(keys_of(a), keys_of(b));
  }
  // score_[key] += row / H for group rows over the same keys, the rows in order: every position
  // gets the same sums, in the same order, as one row after another would give it. A chunk of
  // keys is gathered once, the rows added to it as whole vectors, and put back. With `by_key`
  // ([n_keys]) the sums start from zero and go there instead, by the rows' key index: the
  // same numbers score_ would get from zero.
  void add_rows(std::span<const GroupRow> run, float* by_key = nullptr) {
    const GroupRow& first = run[0];
    const int n_chunks = (first.n_keys + kChunk - 1) / kChunk;
    parallel_for(n_chunks, [&](int c) {
      const int j0 = c * kChunk, n = std::min(kChunk, first.n_keys - j0);
      float sum[kChunk];  // [n] the sums at keys j0..j0+n-1
      if (by_key)
        std::fill_n(sum, n, 0.0f);
      else
        for (int j = 0; j < n; ++j) sum[j] = score_[first.key(j0 + j)];
      for (const GroupRow& r : run) add_scaled(sum, r.values + j0, n, (float)shape_.n_heads);
      if (by_key)
        std::copy_n(sum, n, by_key + j0);
      else
        for (int j = 0; j < n; ++j) score_[first.key(j0 + j)] = sum[j];
    }, worth_a_team((long)first.n_keys * (long)run.size()));
  }
  // sum[j] += v[j] / H for j < n. Not inlined: inlined beside the zeroing and the copy of
  // add_rows' fast path, GCC added the rows into by_key in place, one key at a time.
  [[gnu::noinline]] static void add_scaled(float* __restrict sum, const float* __restrict v, int n, float H) {
    for (int j = 0; j < n; ++j) sum[j] += v[j] / H;
  }
  // Whether every KV head took KV head 0's choice (holds what it holds) and every group row is
  // over its head's whole held list (the list itself, in a CUDA run; a copy, on the CPU).
  bool one_held_list(int layer, const KvSlots& kv) const {
    for (const GroupRow& r : rows_) {
      const std::span<const int32_t> held = kv.held(layer, r.kv_head);
      if (chooser_[r.kv_head] != 0 || r.n_keys != (int)held.size()) return false;
      if (r.key_pos == held.data()) continue;
      if (r.key_pos ? !same_positions(held, keys_of(r)) : !(held.empty() || (held[0] == 0 && consecutive(held))))
        return false;
    }
    return true;
  }
  // A group row's key positions (key_pos non-null).
  static std::span<const int32_t> keys_of(const GroupRow& r) { return {r.key_pos, static_cast<size_t>(r.n_keys)}; }

  // The KV heads all hold the same positions unless an engine put them there otherwise, so a
  // head that holds what the one before it holds takes that one's choice: its chooser.
  void find_choosers(int layer, const KvSlots& kv) {
    const int Hkv = shape_.n_kv_heads;
    std::vector<uint8_t> same(Hkv, 0);  // [Hkv] holds what KV head g - 1 holds
    parallel_for(Hkv - 1, [&](int i) {
      const std::span<const int32_t> a = kv.held(layer, i), b = kv.held(layer, i + 1);
      same[i + 1] = same_positions(a, b);
    }, worth_a_team((long)kv.held(layer, 0).size() * Hkv));
    chooser_[0] = 0;
    for (int g = 1; g < Hkv; ++g) chooser_[g] = same[g] ? chooser_[g - 1] : g;
  }
  // Keeps the top B held entries of each KV head by score_, chosen once for each chooser.
  void trim(int layer, KvSlots& kv) {
    const int Hkv = shape_.n_kv_heads;
    parallel_for(Hkv, [&](int g) {
      if (chooser_[g] == g) choose(kv.held(layer, g), work_[g]);
    }, worth_a_team((long)kv.held(layer, 0).size() * Hkv));
    evict_chosen(layer, kv);
  }
  void choose(std::span<const int32_t> held, Work& w) {
    const int n = (int)held.size();
    w.score.resize(n);
    for (int i = 0; i < n; ++i) w.score[i] = score_[held[i]];
    top_k_keep(w.score, spec_.budget, n, w.keep);
  }
  // Evicts from each KV head what its chooser's keep leaves out, where it holds more than B.
  void evict_chosen(int layer, KvSlots& kv) {
    for (int g = 0; g < shape_.n_kv_heads; ++g)
      if ((int)kv.held(layer, g).size() > spec_.budget) kv.evict(layer, g, work_[chooser_[g]].keep);
  }

  ModelShape shape_;
  PolicyContext ctx_;
  std::vector<int> chooser_;                  // [Hkv] the KV head whose choice this one took, this layer
  std::vector<float> score_;                  // [positions] position score of the current layer
  std::vector<Work> work_;                    // [Hkv]
  std::span<const GroupRow> rows_;            // [Hkv] this step's group rows, until after_attention
};

}  // namespace

std::unique_ptr<Policy> make_tova_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<TovaPolicy>(spec, shape);
}

}  // namespace kvs
