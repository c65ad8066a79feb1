// Simulation driver: per step, per layer, per policy: append q_s, before_attention, record kept +
// metrics, the key ranking a policy asks for (from the recorded rows over each KV head's active
// entries, as the live engine ranks its own), after_attention with the recorded rows renormalized
// over those entries (none for a policy that reads no rows at that layer, as the live engine
// gives none).
#include "analysis/simulator.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "analysis/head_stats.h"
#include "analysis/kept_row.h"
#include "analysis/metrics.h"
#include "analysis/policy_duoattention.h"
#include "analysis/policy_util.h"
#include "analysis/position_slots.h"
#include "inference/errors.h"
#include "inference/group_rows.h"
#include "inference/key_ranking.h"

namespace kvs {
namespace {

class SimInputSource : public StepSource {
 public:
  explicit SimInputSource(const SimInput& in) : in_(in) {}
  ModelShape shape() const override { return in_.shape; }
  int prompt_len() const override { return in_.prompt_len; }
  int n_steps() const override { return in_.n_steps; }
  int total_len() const override { return in_.total_len; }
  int query_pos(int s) const override { return in_.q_pos.empty() ? in_.prompt_len + s : in_.q_pos[s]; }
  const PrefillEvidence& prefill() const override { return in_.prefill; }
  void read_step(int s, std::vector<float>& rows, std::vector<float>& lse) override {
    const size_t nr = (size_t)in_.shape.n_layers * in_.shape.n_heads * in_.total_len;
    const size_t nl = (size_t)in_.shape.n_layers * in_.shape.n_heads;
    rows.assign(in_.rows.begin() + s * nr, in_.rows.begin() + (s + 1) * nr);
    lse.assign(in_.lse.begin() + s * nl, in_.lse.begin() + (s + 1) * nl);
  }

 private:
  const SimInput& in_;
};

// State of one policy's run.
struct Lane {
  Policy* policy;
  PositionSlots slots;
  RunData run;
  std::unique_ptr<RunMetrics> metrics;
  LayerKeptRows kept_rows;
};

std::vector<float> profile_alpha(StepSource& src, DuoWindow w) {
  AlphaAccumulator acc(src.shape(), w.sink, w.recent);
  std::vector<float> rows, lse;  // [L, H, T], [L, H]
  for (int s = 0; s < src.n_steps(); ++s) {
    src.read_step(s, rows, lse);
    acc.add_step(rows, src.total_len(), src.query_pos(s));
  }
  return acc.alpha();
}

}  // namespace

std::vector<RunData> simulate(StepSource& src, std::span<Policy* const> policies, const SimulateOptions& opt) {
  const ModelShape shape = src.shape();
  const int L = shape.n_layers, H = shape.n_heads, Hkv = shape.n_kv_heads, G = shape.group();
  const int P = src.prompt_len(), S = src.n_steps(), T = src.total_len();
  // The evidence policies read: the source's, or a copy carrying the given KVzip scores.
  PrefillEvidence with_scores;
  const PrefillEvidence* evidence = &src.prefill();
  if (!opt.key_scores.empty()) {
    if (opt.key_scores.size() != (size_t)L * Hkv * P)
      throw input_error("kvzip", "repeat-pass scores have " + std::to_string(opt.key_scores.size()) +
                                     " values, expected L*Hkv*P = " + std::to_string((size_t)L * Hkv * P));
    with_scores = src.prefill();
    with_scores.key_scores = opt.key_scores;
    evidence = &with_scores;
  }
  for (Policy* p : policies)
    if (p->needs_key_scores() && evidence->key_scores.empty())
      throw input_error(p->spec().name, "needs the repeat-pass scores (run with --model)");
  for (int s = 0; s < S; ++s) {
    const int q = src.query_pos(s);
    if (q < P || q >= T || (s > 0 && q <= src.query_pos(s - 1)))
      throw input_error("trace", "decode query position " + std::to_string(q) + " of step " +
                                     std::to_string(s) + " is out of order or out of range");
  }

  std::vector<Lane> lanes;
  lanes.reserve(policies.size());
  for (Policy* p : policies) {
    lanes.push_back({p, PositionSlots(L, Hkv), RunData{}, nullptr, LayerKeptRows(L)});
    Lane& lane = lanes.back();
    PolicyContext ctx;
    ctx.shape = shape;
    ctx.prompt_len = P;
    ctx.prefill = evidence;
    ctx.alpha = opt.alpha;
    ctx.alpha_source = opt.alpha_source;
    if (auto w = duo_profile_window(*p)) {
      ctx.alpha = profile_alpha(src, *w);
      ctx.alpha_source = "profiled from trace";
    }
    p->begin(ctx);
    lane.slots.fill_prompt(P);
    p->after_prefill(P, lane.slots);
    if (opt.metrics)
      lane.metrics = std::make_unique<RunMetrics>(shape, S, T, p->spec().budget, opt.block_size, p->has_scored_sets());
    if (lane.metrics && p->has_scored_sets())
      for (int l = 0; l < L; ++l)
        for (int g = 0; g < Hkv; ++g) lane.metrics->record_scored_set(-1, l, g, p->scored_set(l, g, lane.slots));
    lane.run.kept.assign((size_t)S * L * Hkv * T, 0);
  }

  std::vector<float> rows, lse;                     // [L, H, T], [L, H]
  std::vector<std::vector<int32_t>> keys(Hkv);      // [Hkv][attended] positions
  std::vector<std::vector<float>> probs(H);         // [H][attended] renormalized rows
  std::vector<float> lse2(H);                       // [H] adjusted log-sum-exp
  std::vector<AttentionBlock> blocks(H);
  std::vector<std::vector<float>> recorded(H);      // [H][attended] the rows as recorded, for rankings
  std::vector<AttentionBlock> recorded_blocks(H);   // and group rows
  HostGroupRows reduced;                            // a policy's group rows, from the recorded rows
  std::vector<const float*> group_rows(G);
  FullRowCache full_rows;
  for (int s = 0; s < S; ++s) {
    src.read_step(s, rows, lse);
    full_rows.clear();
    const int q = src.query_pos(s);
    for (int l = 0; l < L; ++l) {
      for (Lane& lane : lanes) {
        Policy& p = *lane.policy;
        for (int g = 0; g < Hkv; ++g) lane.slots.append(l, g, q);
        p.before_attention(l, q, lane.slots);
        lane.kept_rows.write(lane.slots, l, lane.run.kept.data() + ((size_t)s * L + l) * Hkv * T, T);  // [Hkv, T]
        for (int g = 0; g < Hkv; ++g) {
          auto held = lane.slots.held(l, g);
          auto act = std::as_const(lane.slots).active(l, g);
          keys[g].clear();
          for (size_t i = 0; i < held.size(); ++i)
            if (act[i]) keys[g].push_back(held[i]);
          if (lane.metrics) {
            for (int i = 0; i < G; ++i) group_rows[i] = rows.data() + ((size_t)l * H + g * G + i) * T;
            lane.metrics->record(s, l, g, q, group_rows, held, act, full_rows);
          }
        }
        const KeyRanking ranking = p.key_ranking(l);
        const std::optional<ops::GroupReduce> reduce = p.group_rows(l);
        for (int h = 0; h < H && (ranking.k > 0 || reduce); ++h) {
          const std::vector<int32_t>& k = keys[h / G];
          const size_t r = (size_t)l * H + h;
          recorded[h].resize(k.size());
          for (size_t j = 0; j < k.size(); ++j) recorded[h][j] = rows[r * T + k[j]];
          recorded_blocks[h] =
              AttentionBlock::decode_row(l, h, q, (int)k.size(), k.data(), recorded[h].data(), &lse[r]);
        }
        if (ranking.k > 0) p.on_key_ranking(l, q, rank_keys(recorded_blocks, ranking));
        if (reduce) p.on_group_rows(l, q, reduced.reduce(recorded_blocks, Hkv, *reduce));
        const bool reads_rows = p.needs_decode_rows(l);  // else no renormalization: it reads none
        for (int h = 0; h < H && reads_rows; ++h) {
          const std::vector<int32_t>& k = keys[h / G];
          probs[h].resize(k.size());
          const size_t r = (size_t)l * H + h;
          lse2[h] = renormalize_row(std::span<const float>(rows.data() + r * T, q + 1), lse[r], k, probs[h]);
          blocks[h] = AttentionBlock::decode_row(l, h, q, (int)k.size(), k.data(), probs[h].data(), &lse2[h]);
        }
        p.after_attention(l, q, reads_rows ? std::span<const AttentionBlock>(blocks) : std::span<const AttentionBlock>(),
                          lane.slots);
        if (lane.metrics && p.has_scored_sets())
          for (int g = 0; g < Hkv; ++g) lane.metrics->record_scored_set(s, l, g, p.scored_set(l, g, lane.slots));
      }
    }
    if (opt.on_step) opt.on_step(s, S);
  }

  std::vector<RunData> out;
  for (Lane& lane : lanes) {
    const PolicySpec& spec = lane.policy->spec();
    lane.run.name = spec.run_name();
    lane.run.policy = spec.name;
    lane.run.params_json = lane.policy->params_json();
    lane.run.budget = spec.budget;
    lane.run.eviction = "simulated";
    if (lane.metrics) {
      lane.run.metrics = lane.metrics->take();
      lane.run.scalars = {{"block_size", static_cast<double>(opt.block_size)}};  // of paged_bytes_freed
    }
    out.push_back(std::move(lane.run));
  }
  return out;
}

void add_kept_set_metrics(StepSource& src, std::span<RunData> runs, std::span<const int> compare_until,
                          int block_size) {
  const ModelShape shape = src.shape();
  const int L = shape.n_layers, H = shape.n_heads, Hkv = shape.n_kv_heads, G = shape.group();
  const int T = src.total_len();
  const size_t per_step = (size_t)L * Hkv * T;
  std::vector<std::unique_ptr<RunMetrics>> metrics;  // [runs]
  std::vector<int> steps;                            // [runs] steps each run holds
  int S = 0;
  for (const RunData& run : runs) {
    const int n = std::min<int>((int)(run.kept.size() / per_step), src.n_steps());
    steps.push_back(n);
    S = std::max(S, n);
    metrics.push_back(std::make_unique<RunMetrics>(shape, n, T, run.budget, block_size, false));
  }
  std::vector<float> rows, lse;  // [L, H, T], [L, H]
  std::vector<int32_t> held;     // a (layer, KV head)'s held positions, ascending
  std::vector<uint8_t> active;   // [held]
  std::vector<const float*> group_rows(G);
  FullRowCache full_rows;
  for (int s = 0; s < S; ++s) {
    src.read_step(s, rows, lse);
    full_rows.clear();
    const int q = src.query_pos(s);
    for (size_t i = 0; i < runs.size(); ++i) {
      if (s >= steps[i]) continue;
      for (int l = 0; l < L; ++l)
        for (int g = 0; g < Hkv; ++g) {
          const uint8_t* kept = runs[i].kept.data() + (((size_t)s * L + l) * Hkv + g) * T;  // [T]
          held.clear();
          active.clear();
          for (int t = 0; t < T; ++t)
            if (kept[t]) {
              held.push_back(t);
              active.push_back(kept[t] == 1);
            }
          for (int j = 0; j < G; ++j) group_rows[j] = rows.data() + ((size_t)l * H + g * G + j) * T;
          const std::span<const float* const> full = rows.empty() ? std::span<const float* const>{} : group_rows;
          metrics[i]->record(s, l, g, q, full, held, active, full_rows);
        }
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<NamedArray> m = metrics[i]->take();
    const size_t from = (size_t)std::clamp(compare_until[i], 0, steps[i]) * L * Hkv;
    for (NamedArray& a : m)
      if (a.name == "recall" || a.name == "topk_miss") std::fill(a.data.begin() + from, a.data.end(), nan);
    std::vector<NamedArray>& have = runs[i].metrics;  // a metric computed here replaces one of its name
    for (NamedArray& a : m) {
      std::erase_if(have, [&](const NamedArray& h) { return h.name == a.name; });
      have.push_back(std::move(a));
    }
    runs[i].scalars.emplace_back("block_size", static_cast<double>(block_size));
  }
}

namespace {

// A live run's steps with no rows to measure against: the query positions P + s of its own text.
class KeptSetsOnlySource final : public StepSource {
 public:
  KeptSetsOnlySource(const ModelShape& shape, int prompt_len, int n_steps, int total_len)
      : shape_(shape), P_(prompt_len), S_(n_steps), T_(total_len) {}
  ModelShape shape() const override { return shape_; }
  int prompt_len() const override { return P_; }
  int n_steps() const override { return S_; }
  int total_len() const override { return T_; }
  int query_pos(int step) const override { return P_ + step; }
  const PrefillEvidence& prefill() const override { return prefill_; }
  void read_step(int, std::vector<float>& rows, std::vector<float>& lse) override {
    rows.clear();
    lse.clear();
  }

 private:
  ModelShape shape_;
  int P_, S_, T_;
  PrefillEvidence prefill_;  // none
};

}  // namespace

void add_kept_set_counts(const ModelShape& shape, int prompt_len, RunData& run, int block_size) {
  const int T = static_cast<int>(run.tokens.size());
  const size_t per_step = (size_t)shape.n_layers * shape.n_kv_heads * T;
  KeptSetsOnlySource src(shape, prompt_len, per_step ? static_cast<int>(run.kept.size() / per_step) : 0, T);
  const int compare_until[] = {0};
  add_kept_set_metrics(src, std::span<RunData>(&run, 1), compare_until, block_size);
}

void add_kept_set_metrics(const SimInput& input, std::span<RunData> runs, std::span<const int> compare_until,
                          int block_size) {
  SimInputSource src(input);
  add_kept_set_metrics(src, runs, compare_until, block_size);
}

std::vector<RunData> simulate(const SimInput& input, std::span<Policy* const> policies, const SimulateOptions& opt) {
  SimInputSource src(input);
  return simulate(src, policies, opt);
}

}  // namespace kvs
