// DuoAttention (mit-han-lab/duo-attention): gates from a pattern folder (pattern=DIR), estimated
// by the caller (gates=estimated: PolicyContext::alpha) or profiled from the trace by the driver
// (gates=profiled, the default); sparsity quantile (default 0.5 GQA, 0.75 MHA) or
// threshold; streaming heads keep `sink` + `recent` slots with sink 4 (B < 320) or 64. With
// prefill_chunk=m a live run feeds the prompt m tokens at a time, as the reference's static path
// does: a streaming head's query in a later chunk reads the sink + recent slots of the tokens
// before its chunk, and its chunk up to itself.
#include "analysis/policy_duoattention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "analysis/duo_pattern.h"
#include "analysis/policy_params.h"
#include "inference/errors.h"

namespace kvs {

std::vector<uint8_t> duo_retrieval_by_sparsity(std::span<const float> alpha, double sparsity) {
  const size_t n = alpha.size();
  std::vector<uint8_t> out(n, 0);
  if (n == 0 || sparsity >= 1.0) return out;
  std::vector<double> a(n);  // [n] gates plus tie-breaking noise
  uint64_t state = 42;
  for (size_t i = 0; i < n; ++i) {
    state += 0x9E3779B97F4A7C15ull;  // splitmix64
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    a[i] = (double)alpha[i] + 1e-6 * (double)(z >> 11) / 9007199254740992.0;
  }
  std::vector<double> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  const double pos = std::max(0.0, sparsity) * (double)(n - 1);
  const size_t lo = (size_t)std::floor(pos);
  const size_t hi = std::min(n - 1, lo + 1);
  const double tau = sorted[lo] + (pos - (double)lo) * (sorted[hi] - sorted[lo]);
  for (size_t i = 0; i < n; ++i) out[i] = a[i] >= tau;
  return out;
}

std::vector<uint8_t> duo_retrieval_by_threshold(std::span<const float> alpha, double tau) {
  std::vector<uint8_t> out(alpha.size());
  for (size_t i = 0; i < alpha.size(); ++i) out[i] = alpha[i] > tau;
  return out;
}

namespace {

class DuoAttentionPolicy : public Policy {
 public:
  DuoAttentionPolicy(const PolicySpec& spec, const ModelShape& shape) : Policy(spec), shape_(shape) {
    ParamReader p(spec, {"pattern", "gates", "threshold", "sparsity", "sink", "recent", "prefill_chunk"});
    const int B = spec.budget;
    if (p.has("threshold") && p.has("sparsity")) throw p.error("give threshold or sparsity, not both");
    use_threshold_ = p.has("threshold");
    threshold_ = p.get_double("threshold", 0.5);
    // The official deployments' sparsities: 0.5 for GQA Llama-3-8B, 0.75 for MHA Llama-2-7B.
    sparsity_ = p.get_double("sparsity", shape.n_kv_heads == shape.n_heads ? 0.75 : 0.5);
    if (sparsity_ < 0.0 || sparsity_ > 1.0) throw p.error("sparsity must be in [0, 1]");
    sink_ = p.get_int("sink", B < 320 ? 4 : 64);
    if (sink_ < 0) throw p.error("sink must be >= 0");
    sink_ = std::min(sink_, B);
    recent_ = p.get_int("recent", B - sink_);
    if (recent_ < 0) throw p.error("recent must be >= 0");
    recent_ = std::min(recent_, B - sink_);
    cut_ = p.budget_cut({{"sink", sink_}, {"recent", recent_}});
    chunk_ = p.get_int("prefill_chunk", 0);
    if (chunk_ < 0) throw p.error("prefill_chunk must be >= 0 (0: the prompt in one prefill)");
    gates_ = p.get_string("gates", "profiled");
    if (gates_ != "profiled" && gates_ != "estimated") throw p.error("gates must be profiled or estimated");
    if (p.has("pattern") && p.has("gates")) throw p.error("give pattern or gates, not both");
    if (p.has("pattern")) {
      const std::string dir = p.get_string("pattern", "");
      DuoPattern pat = read_duo_pattern(dir);
      check_duo_shape(pat, shape.n_layers, shape.n_kv_heads, dir);
      pattern_alpha_ = pat.alpha;
      pattern_source_ = "pattern " + dir;
    }
  }
  // Whether the driver profiles the gates from the recorded rows (no pattern, gates=profiled).
  bool profiled() const { return pattern_alpha_.empty() && gates_ == "profiled"; }
  DuoWindow window() const { return {sink_, recent_}; }
  std::string caveat(int prompt_len) const override {
    if (chunk_ == 0 || prompt_len <= chunk_) return cut_;
    const int chunks = (prompt_len + chunk_ - 1) / chunk_;
    return cut_ + (cut_.empty() ? "" : "; ") + "a live run feeds the " + std::to_string(prompt_len) +
           "-token prompt in " + std::to_string(chunks) + " chunks of " + std::to_string(chunk_) +
           " (streaming heads read sink + recent + their chunk); replayed on a trace, the prompt is one prefill "
           "(the same kept sets)";
  }
  int prefill_chunk() const override { return chunk_; }
  std::string params_json() const override {
    JsonObject j;
    if (use_threshold_) j.add("threshold", threshold_);
    else j.add("sparsity", sparsity_);
    j.add("sink", sink_).add("recent", recent_).add("prefill_chunk", chunk_);
    if (pattern_alpha_.empty()) j.add("gates", gates_);
    j.add("alpha_source", source_);
    int n_retrieval = 0;
    for (uint8_t r : retrieval_) n_retrieval += r;
    if (!retrieval_.empty()) j.add("retrieval_heads", n_retrieval);
    return j.str();
  }
  void begin(const PolicyContext& ctx) override {
    std::vector<float> alpha = pattern_alpha_;
    source_ = pattern_source_;
    if (alpha.empty()) {
      alpha = ctx.alpha;
      source_ = ctx.alpha_source.empty() ? "context" : ctx.alpha_source;
    }
    if (alpha.empty() && gates_ == "estimated")
      throw input_error("--policy " + spec_.name + ":gates=estimated",
                        "no estimated gates: store them in the trace first (kvscope heads trace.h5 --model M)");
    if (alpha.empty())
      throw input_error("--policy duoattention", "no gates: give pattern=DIR or profile them from a trace");
    if (alpha.size() != (size_t)shape_.n_layers * shape_.n_kv_heads)
      throw input_error("--policy duoattention", "gates have " + std::to_string(alpha.size()) +
                                                     " values, the model has L*Hkv = " +
                                                     std::to_string(shape_.n_layers * shape_.n_kv_heads));
    retrieval_ = use_threshold_ ? duo_retrieval_by_threshold(alpha, threshold_)
                                : duo_retrieval_by_sparsity(alpha, sparsity_);
    prompt_len_ = ctx.prompt_len;
  }
  void after_prefill(int, KvSlots& kv) override {
    for (int l = 0; l < shape_.n_layers; ++l) trim(l, kv, INT_MAX);
  }
  // A prompt fed in chunks was trimmed after its first chunk only (the engine evicts nothing
  // inside a chunk): the slots before the query's chunk (before the query itself once decoding)
  // are trimmed here. Otherwise every earlier step trimmed them already.
  void before_attention(int layer, int q_pos, KvSlots& kv) override {
    if (chunk_ > 0) trim(layer, kv, q_pos < prompt_len_ ? q_pos / chunk_ * chunk_ : q_pos);
  }
  void after_attention(int layer, int, std::span<const AttentionBlock>, KvSlots& kv) override {
    trim(layer, kv, INT_MAX);
  }
  bool needs_decode_rows(int) const override { return false; }

 private:
  // Each streaming head of `layer` keeps, of its slots at positions before `boundary`, the first
  // `sink` and the last `recent`; later slots stay.
  void trim(int layer, KvSlots& kv, int boundary) {
    for (int g = 0; g < shape_.n_kv_heads; ++g) {
      if (retrieval_[(size_t)layer * shape_.n_kv_heads + g]) continue;
      const std::span<const int32_t> held = kv.held(layer, g);
      const int n = (int)(std::lower_bound(held.begin(), held.end(), boundary) - held.begin());  // slots before it
      if (n <= sink_ + recent_) continue;
      std::vector<uint8_t> keep(held.size(), 1);  // [held]
      for (int i = 0; i < n; ++i) keep[i] = i < sink_ || i >= n - recent_;
      kv.evict(layer, g, keep);
    }
  }

  ModelShape shape_;
  bool use_threshold_ = false;
  double threshold_ = 0.5, sparsity_ = 0.5;
  int sink_ = 4, recent_ = 0;
  int chunk_ = 0;       // prefill_chunk: prompt tokens a live run feeds at a time (0: all at once)
  int prompt_len_ = 0;  // P of the sequence begun
  std::string cut_;  // given values the budget cut, for caveat()
  std::string gates_ = "profiled";    // without pattern: profiled by the driver, or estimated (the caller's)
  std::vector<float> pattern_alpha_;  // [L, Hkv] from pattern=DIR, empty otherwise
  std::string pattern_source_, source_;
  std::vector<uint8_t> retrieval_;    // [L, Hkv] 1 = retrieval head
};

}  // namespace

std::optional<DuoWindow> duo_profile_window(const Policy& policy) {
  auto* d = dynamic_cast<const DuoAttentionPolicy*>(&policy);
  if (!d || !d->profiled()) return std::nullopt;
  return d->window();
}

std::unique_ptr<Policy> make_duoattention_policy(const PolicySpec& spec, const ModelShape& shape) {
  return std::make_unique<DuoAttentionPolicy>(spec, shape);
}

}  // namespace kvs
