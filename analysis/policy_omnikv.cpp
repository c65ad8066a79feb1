// OmniKV (antgroup/OmniKV, num_wait_load_layers 1): filter layers re-select their segment's
// prompt index every decode step; sparse layers mark other prompt positions inactive before
// attention (kept value 2), never evicting.
//
// Selectors (POLICIES.md §9), at filter layer f and decode position t:
// - last (default): s[j] = max_h z[h,j], the current query's raw logits z = log p + lse over
//   prompt positions j < P; top k. The driver ranks them (KeyRanking: on the GPU for a CUDA run,
//   so the filter layers' rows stay there).
// - softmax_before_last: per head, softmax of those logits over j < P only (p_j / sum_{j<P} p_j),
//   then max over heads; top k.
// - uniform / exp: the queries of the last `window` positions t-window+1 .. t each give a vector
//   v_i[j] = max_h softmax_{j<C}(z_i[h, j]) over the C scored prompt keys (below); score =
//   sum_i w_i v_i with w_i = 1 (uniform) or 2^-(t-i) (exp); top k. Generated queries' per-head
//   prompt rows are kept, per filter layer, in a ring of the last `window` positions (filled at
//   after_attention); prompt queries still inside the window (the first window-1 decode steps)
//   come from the prefill evidence's window rows, and a needed row outside them (or a generated
//   position the driver never delivered) is an InputError, never skipped.
//
// Force-inclusion (windowed selectors): the nw prompt positions still inside the window
// (lo .. P-1 with lo = max(0, t - window + 1)) are always selected and count inside k, as in the
// reference (omnikv.py: num_selected_tokens -= num_prefill_token_in_window, floored at 1): the
// top min(max(1, k - nw), C) of the other prompt positions 0 .. C-1 (C = P - nw), plus the nw
// forced ones. So the selection holds exactly k positions when k > nw, and nw + 1 (or all P)
// otherwise. As in the reference (consider_len -= num_prefill_token_in_window), each query's
// softmax runs over those C keys only: its mass on the forced positions does not dilute the rest.
// Deviation: the reference projects every window query's hidden state afresh and rotates it at
// the current position t; we use each query's own attention row (rotated at its own position i).
// Scores are summed oldest query first, in double; ties go to the newer position (top_k_indices).
#include "analysis/policy_omnikv.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "analysis/filter_layers.h"
#include "analysis/policy_params.h"
#include "analysis/policy_util.h"
#include "inference/errors.h"

namespace kvs {

std::vector<int> omnikv_default_filters(int L) {
  const int f0 = std::max(0, std::min(std::max(2, L / 8), L - 1));
  const int n = std::max(1, L / 10);
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    const int f = f0 + i * (L - f0) / n;
    if (out.empty() || f > out.back()) out.push_back(f);
  }
  return out;
}

bool omnikv_budget_from_frac(const PolicySpec& spec) { return spec.name == "omnikv" && spec.params.count("frac"); }

void resolve_omnikv_frac(PolicySpec& spec, int prompt_len) {
  if (!omnikv_budget_from_frac(spec)) return;
  const std::string& text = spec.params.at("frac");
  char* end = nullptr;
  const double frac = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(frac > 0.0 && frac <= 1.0))
    throw input_error("--policy " + spec.name, "frac must be in (0, 1] (got '" + text + "')");
  spec.budget = std::min(prompt_len, std::max(1, (int)(frac * prompt_len)));
}

void resolve_omnikv_spec(PolicySpec& spec, const TraceReader& trace) {
  resolve_omnikv_frac(spec, trace.meta().prompt_len);
  if (spec.name != "omnikv" || spec.params.count("filters") || !trace.has_array("/layers/similarity")) return;
  const int L = trace.meta().shape.n_layers;
  const NamedArray sim = trace.read_array("/layers/similarity");
  if (sim.data.size() != static_cast<size_t>(L) * L) return;
  int wait = 1;
  if (auto it = spec.params.find("wait"); it != spec.params.end()) wait = std::atoi(it->second.c_str());
  if (wait < 0 || wait >= L) return;  // the policy reports the bad parameter itself
  const FilterPlan plan = optimize_filter_layers(sim.data, L, std::max(1, L / 10), wait);
  std::string filters;
  for (int f : plan.filters) {
    if (!filters.empty()) filters += ',';
    filters += std::to_string(f);
  }
  spec.params["filters"] = filters;
}

std::vector<OmniRole> omnikv_layer_roles(int L, const std::vector<int>& filters, int wait) {
  std::vector<OmniRole> role(L, OmniRole::Dense);
  int last = -1;
  size_t next = 0;
  for (int l = 0; l < L; ++l) {
    if (next < filters.size() && filters[next] == l) {
      role[l] = OmniRole::Filter;
      last = l;
      ++next;
    } else if (last >= 0) {
      role[l] = l <= last + wait ? OmniRole::Wait : OmniRole::Sparse;
    }
  }
  return role;
}

namespace {

enum class Selector { Last, SoftmaxBeforeLast, Uniform, Exp };

const char* selector_name(Selector s) {
  switch (s) {
    case Selector::Last: return "last";
    case Selector::SoftmaxBeforeLast: return "softmax_before_last";
    case Selector::Uniform: return "uniform";
    case Selector::Exp: return "exp";
  }
  return "last";
}

// Max over query heads of each head's softmax over keys j < C: rows[h][j] are that head's
// probabilities (any common normalization), renormalized over j < C. A head with no mass there
// contributes nothing.
void head_max_softmax(std::span<const float* const> rows, int C, std::vector<float>& out) {
  out.assign(C, 0.0f);
  for (const float* row : rows) {
    double sum = 0.0;
    for (int j = 0; j < C; ++j) sum += row[j];
    if (!(sum > 0.0)) continue;
    for (int j = 0; j < C; ++j) out[j] = std::max(out[j], (float)(row[j] / sum));
  }
}

class OmniKvPolicy : public Policy {
 public:
  OmniKvPolicy(const PolicySpec& spec, const ModelShape& shape) : Policy(spec), shape_(shape) {
    ParamReader p(spec, {"filters", "wait", "frac", "selector", "window"});
    const int L = shape.n_layers;
    filters_ = p.has("filters") ? p.get_int_list("filters") : omnikv_default_filters(L);
    std::sort(filters_.begin(), filters_.end());
    for (size_t i = 0; i < filters_.size(); ++i) {
      if (filters_[i] < 0) throw p.error("filter layer " + std::to_string(filters_[i]) + " is negative");
      if (filters_[i] >= L)
        throw p.error("filter layer " + std::to_string(filters_[i]) + " is beyond the last layer (" +
                      std::to_string(L - 1) + ")");
      if (i > 0 && filters_[i] == filters_[i - 1])
        throw p.error("filter layer " + std::to_string(filters_[i]) + " is listed twice");
    }
    wait_ = p.get_int("wait", 1);
    if (wait_ < 0) throw p.error("wait must be >= 0");
    frac_ = p.get_double("frac", 0.0);
    if (p.has("frac") && !(frac_ > 0.0 && frac_ <= 1.0)) throw p.error("frac must be in (0, 1]");
    const std::string sel = p.get_string("selector", "last");
    if (sel == "last") selector_ = Selector::Last;
    else if (sel == "softmax_before_last") selector_ = Selector::SoftmaxBeforeLast;
    else if (sel == "uniform") selector_ = Selector::Uniform;
    else if (sel == "exp") selector_ = Selector::Exp;
    else throw p.error("selector must be last, softmax_before_last, uniform or exp (got '" + sel + "')");
    window_ = p.get_int("window", 16);
    if (window_ < 1) throw p.error("window must be >= 1 (got " + std::to_string(window_) + ")");
    roles_ = omnikv_layer_roles(L, filters_, wait_);
  }
  std::string params_json() const override {
    JsonObject j;
    j.add("filters", filters_).add("wait", wait_).add("selector", selector_name(selector_)).add("window", window_);
    if (frac_ > 0.0) j.add("frac", frac_);
    return j.add("k", k_).str();
  }
  void begin(const PolicyContext& ctx) override {
    prefill_ = ctx.prefill;
    prompt_len_ = ctx.prompt_len;
    k_ = frac_ > 0.0 ? std::max(1, (int)(frac_ * prompt_len_)) : spec_.budget;
    k_ = std::min(k_, prompt_len_);
    selected_.assign(shape_.n_layers, std::vector<uint8_t>(prompt_len_, 1));
    segment_.assign(shape_.n_layers, -1);
    int last = -1;
    for (int l = 0; l < shape_.n_layers; ++l) {
      if (roles_[l] == OmniRole::Filter) last = l;
      segment_[l] = last;
    }
    ring_pos_.assign(shape_.n_layers, {});
    ring_rows_.assign(shape_.n_layers, {});
    if (windowed())
      for (int f : filters_) {
        ring_pos_[f].assign(window_, -1);
        ring_rows_[f].assign(window_, {});
      }
  }
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int layer, int, KvSlots& kv) override {
    // Dense and filter layers attend everything: their entries arrive active and stay so (a
    // pass over every entry of every head, at 32K keys, was host time the GPU waited for).
    if (roles_[layer] != OmniRole::Sparse) return;
    const std::vector<uint8_t>& sel = selected_[segment_[layer]];
    const int P = prompt_len_;
    for (int g = 0; g < shape_.n_kv_heads; ++g) {
      auto held = kv.held(layer, g);
      auto act = kv.active(layer, g);
      // Held positions ascend and are distinct: where P - 1 is entry P - 1, entries 0..P-1 hold
      // the prompt's positions in order (nothing evicted) and take the selection as it is. (An
      // entry-by-entry pass over 8 KV heads at 32K keys took ~0.2 ms a layer of host time a
      // GPU step waits for.)
      if (static_cast<int>(held.size()) >= P && held[P - 1] == P - 1) {
        std::memcpy(act.data(), sel.data(), static_cast<size_t>(P));
        continue;
      }
      for (size_t i = 0; i < held.size() && held[i] < P; ++i) act[i] = sel[held[i]];
    }
  }
  // Only the filter layers select: by the driver's ranking (last), or from their own rows.
  bool needs_decode_rows(int layer) const override {
    return roles_[layer] == OmniRole::Filter && selector_ != Selector::Last;
  }
  KeyRanking key_ranking(int layer) const override {
    if (roles_[layer] != OmniRole::Filter || selector_ != Selector::Last) return {};
    return {k_, prompt_len_};
  }
  void on_key_ranking(int layer, int, std::span<const int32_t> positions) override {
    std::vector<uint8_t>& sel = selected_[layer];
    std::fill(sel.begin(), sel.end(), 0);
    for (int32_t j : positions) sel[j] = 1;
  }
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads, KvSlots&) override {
    if (roles_[layer] != OmniRole::Filter || selector_ == Selector::Last) return;
    std::vector<uint8_t>& sel = selected_[layer];
    std::vector<float> dense = prompt_rows(heads);  // [H, P]
    if (selector_ == Selector::SoftmaxBeforeLast) {
      std::vector<float> v;  // [P] head-maxed prompt softmax of the current query
      head_max_softmax(head_pointers(dense.data()), prompt_len_, v);
      std::fill(sel.begin(), sel.end(), 0);
      for (int j : top_k_indices(v, k_)) sel[j] = 1;
      return;
    }
    const int slot = q_pos % window_;
    ring_pos_[layer][slot] = q_pos;
    ring_rows_[layer][slot] = std::move(dense);
    select_windowed(layer, q_pos);
  }

 private:
  bool windowed() const { return selector_ == Selector::Uniform || selector_ == Selector::Exp; }

  // The current query's per-head rows scattered to prompt positions: [H, P].
  std::vector<float> prompt_rows(std::span<const AttentionBlock> heads) const {
    std::vector<float> dense((size_t)heads.size() * prompt_len_, 0.0f);  // [H, P]
    for (size_t h = 0; h < heads.size(); ++h) {
      const AttentionBlock& b = heads[h];
      float* row = dense.data() + h * prompt_len_;
      for (int j = 0; j < b.n_keys; ++j)
        if (b.key(j) < prompt_len_) row[b.key(j)] = b.probs[j];
    }
    return dense;
  }
  // H pointers to the [P] rows of a [H, P] buffer.
  std::vector<const float*> head_pointers(const float* rows) const {
    std::vector<const float*> out(shape_.n_heads);
    for (int h = 0; h < shape_.n_heads; ++h) out[h] = rows + (size_t)h * prompt_len_;
    return out;
  }

  // Per-head prompt rows (H pointers to [P]) of the query at position i of filter layer
  // `layer`, i inside the window of the current query: from the ring (generated positions) or,
  // for a prompt position, from the prefill evidence's window rows.
  std::vector<const float*> window_rows(int layer, int i) const {
    const int slot = i % window_;
    if (ring_pos_[layer][slot] == i) return head_pointers(ring_rows_[layer][slot].data());
    const std::string who = "--policy " + spec_.name;
    const std::string why = "selector " + std::string(selector_name(selector_)) + " with window=" +
                            std::to_string(window_) + " needs filter layer " + std::to_string(layer) +
                            "'s attention row of the query at position " + std::to_string(i);
    if (i >= prompt_len_)
      throw input_error(who, why + ", a decode position the driver never delivered");
    const PrefillEvidence* ev = prefill_;
    const int P = prompt_len_;
    if (!ev || ev->window < 1 || ev->prompt_len != P ||
        ev->window_rows.size() != (size_t)shape_.n_layers * shape_.n_heads * ev->window * P)
      throw input_error(who, why + " (the prompt's window rows are absent: the trace holds no prefill "
                                   "reductions)");
    if (i < P - ev->window)
      throw input_error(who, why + ", but the prefill evidence holds the rows of positions " +
                                 std::to_string(P - ev->window) + ".." + std::to_string(P - 1) + " only (" +
                                 std::to_string(ev->window) + " rows; window=" + std::to_string(window_) +
                                 " needs " + std::to_string(std::min(P, window_ - 1)) + ")");
    std::vector<const float*> rows(shape_.n_heads);  // H pointers to [P]
    for (int h = 0; h < shape_.n_heads; ++h) rows[h] = ev->window_row(layer, h, i - (P - ev->window));
    return rows;
  }

  // uniform / exp at filter layer `layer`, current position t (its vector already in the ring).
  void select_windowed(int layer, int t) {
    const int P = prompt_len_;
    const int lo = std::max(0, t - window_ + 1);  // oldest query of the window
    const int nw = std::max(0, P - lo);           // forced prompt positions lo..P-1
    const int cand = P - nw;                      // scored prompt positions 0..cand-1
    std::vector<double> acc(cand, 0.0);           // [cand] weighted sum over the window's queries
    std::vector<float> v;                         // [cand] one query's head-maxed softmax over them
    for (int i = lo; i <= t; ++i) {
      head_max_softmax(window_rows(layer, i), cand, v);
      const double w = selector_ == Selector::Exp ? std::ldexp(1.0, -(t - i)) : 1.0;
      for (int j = 0; j < cand; ++j) acc[j] += w * v[j];
    }
    std::vector<float> score(acc.begin(), acc.end());  // [cand]
    const int n_sel = cand == 0 ? 0 : std::min(std::max(1, k_ - nw), cand);
    std::vector<uint8_t>& sel = selected_[layer];
    std::fill(sel.begin(), sel.end(), 0);
    for (int j : top_k_indices(score, n_sel)) sel[j] = 1;
    for (int j = cand; j < P; ++j) sel[j] = 1;
  }

  ModelShape shape_;
  std::vector<int> filters_;
  int wait_ = 1, k_ = 0, prompt_len_ = 0, window_ = 16;
  double frac_ = 0.0;
  Selector selector_ = Selector::Last;
  const PrefillEvidence* prefill_ = nullptr;
  std::vector<OmniRole> roles_;               // [L]
  std::vector<int> segment_;                  // [L] filter layer whose index layer l uses, -1 none
  std::vector<std::vector<uint8_t>> selected_;  // [L][P] selection made at each filter layer
  // Windowed selectors, per filter layer: a ring of `window` slots; slot i % window holds the
  // per-head prompt rows [H, P] of the generated query at position ring_pos (-1 = empty).
  std::vector<std::vector<int>> ring_pos_;                  // [L][window]
  std::vector<std::vector<std::vector<float>>> ring_rows_;  // [L][window][H * P]
};

}  // namespace

std::unique_ptr<Policy> make_omnikv_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<OmniKvPolicy>(spec, shape);
}

}  // namespace kvs
