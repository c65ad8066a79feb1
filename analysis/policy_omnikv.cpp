// OmniKV (antgroup/OmniKV, selector "last", num_wait_load_layers 1): filter layers re-select
// their segment's prompt index every decode step; sparse layers mark other prompt positions
// inactive before attention (kept value 2), never evicting.
#include "analysis/policy_omnikv.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

class OmniKvPolicy : public Policy {
 public:
  OmniKvPolicy(const PolicySpec& spec, const ModelShape& shape) : Policy(spec), shape_(shape) {
    ParamReader p(spec, {"filters", "wait", "frac", "selector"});
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
    if (sel != "last") throw p.error("selector must be last (got '" + sel + "')");
    roles_ = omnikv_layer_roles(L, filters_, wait_);
  }
  std::string params_json() const override {
    JsonObject j;
    j.add("filters", filters_).add("wait", wait_).add("selector", "last");
    if (frac_ > 0.0) j.add("frac", frac_);
    return j.add("k", k_).str();
  }
  void begin(const PolicyContext& ctx) override {
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
  }
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int layer, int, KvSlots& kv) override {
    const bool sparse = roles_[layer] == OmniRole::Sparse;
    const std::vector<uint8_t>& sel = selected_[std::max(0, segment_[layer])];
    for (int g = 0; g < shape_.n_kv_heads; ++g) {
      auto held = kv.held(layer, g);
      auto act = kv.active(layer, g);
      for (size_t i = 0; i < held.size(); ++i)
        act[i] = !sparse || held[i] >= prompt_len_ || sel[held[i]];
    }
  }
  void after_attention(int layer, int, std::span<const AttentionBlock> heads, KvSlots&) override {
    if (roles_[layer] != OmniRole::Filter) return;
    std::vector<float> s(prompt_len_, -std::numeric_limits<float>::infinity());  // [P] head-max logit
    for (const AttentionBlock& b : heads)
      for (int j = 0; j < b.n_keys; ++j) {
        const int pos = b.key(j);
        if (pos >= prompt_len_) continue;
        const float z = std::log(b.probs[j]) + b.lse[0];
        s[pos] = std::max(s[pos], z);
      }
    std::vector<uint8_t>& sel = selected_[layer];
    std::fill(sel.begin(), sel.end(), 0);
    for (int j : top_k_indices(s, k_)) sel[j] = 1;
  }

 private:
  ModelShape shape_;
  std::vector<int> filters_;
  int wait_ = 1, k_ = 0, prompt_len_ = 0;
  double frac_ = 0.0;
  std::vector<OmniRole> roles_;               // [L]
  std::vector<int> segment_;                  // [L] filter layer whose index layer l uses, -1 none
  std::vector<std::vector<uint8_t>> selected_;  // [L][P] selection made at each filter layer
};

}  // namespace

std::unique_ptr<Policy> make_omnikv_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<OmniKvPolicy>(spec, shape);
}

}  // namespace kvs
