// Shared set-up of the live-run tests: stories260K loaded once (single-threaded engine), every
// policy built with what it needs (KVzip repeat-pass scores, DuoAttention gates), and an observer
// that keeps a run's decode logits.
#pragma once
#include <filesystem>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/kvzip_scores.h"
#include "analysis/live_run.h"
#include "analysis/policy.h"
#include "inference/engine.h"
#include "inference/loader.h"
#include "tests/test_paths.h"

namespace kvs::test {

struct Stories {
  Model model;
  std::unique_ptr<Tokenizer> tok;
};

// stories260K, or nullptr when the model files are absent.
inline const Stories* stories() {
  static std::unique_ptr<Stories> s = [] {
    const std::filesystem::path dir = std::filesystem::path(test::shared_path("models/stories260K"));
    if (!std::filesystem::exists(dir / "stories260K.bin")) return std::unique_ptr<Stories>();
    auto out = std::make_unique<Stories>();
    out->model = load_model((dir / "stories260K.bin").string());
    out->tok = load_tokenizer(out->model, (dir / "tok512.bin").string());
    return out;
  }();
  return s.get();
}

// One thread: the tiny model is much slower under OpenMP on a loaded machine.
inline EngineOptions single_thread(bool rope_in_cache = false) {
  EngineOptions o;
  o.n_threads = 1;
  o.rope_in_cache = rope_in_cache;
  return o;
}

inline ModelShape shape_of(const Model& m) {
  const ModelConfig& c = m.config;
  return {c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim};
}

// Fixed DuoAttention gates [L, Hkv] spread over [0, 1], so half the heads are retrieval heads
// and half streaming heads at the default sparsity 0.5.
inline std::vector<float> test_alpha(const ModelShape& s) {
  std::vector<float> a(static_cast<size_t>(s.n_layers) * s.n_kv_heads);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7) % a.size()) / a.size();
  return a;
}

// A policy and the inputs a live run (and the simulator) must be given for it.
struct PolicyCase {
  std::string name;
  std::unique_ptr<Policy> policy;
  PolicyContext context;         // alpha for DuoAttention
  std::vector<float> key_scores; // [L, Hkv, P] for KVzip, else empty
};

// All registered policies at `budget`; KVzip scores are computed for `prompt` on the model.
inline std::vector<PolicyCase> all_policies(const Stories& st, const std::vector<int>& prompt, int budget) {
  const ModelShape shape = shape_of(st.model);
  std::vector<PolicyCase> out;
  std::vector<float> scores;  // [L, Hkv, P] computed once
  for (const std::string& name : policy_names()) {
    PolicyCase c;
    c.name = name;
    // DuoAttention takes the gates handed to it (the simulator would otherwise profile them).
    c.policy = make_policy(parse_policy_spec(name == "duoattention" ? name + ":gates=estimated" : name, budget), shape);
    if (name == "duoattention") {
      c.context.alpha = test_alpha(shape);
      c.context.alpha_source = "test gates";
    }
    if (c.policy->needs_key_scores()) {
      if (scores.empty()) {
        KvzipOptions ko;
        ko.engine = single_thread();
        scores = kvzip_key_scores(st.model, *st.tok, prompt, ko);
      }
      c.key_scores = scores;
    }
    out.push_back(std::move(c));
  }
  return out;
}

// Keeps the decode-step logits (query at P + s) of a run: [S, vocab].
class LogitsTap : public AttentionObserver {
 public:
  explicit LogitsTap(int prompt_len) : P_(prompt_len) {}
  void on_logits(int pos, std::span<const float> l) override {
    if (pos >= P_) logits.insert(logits.end(), l.begin(), l.end());
  }
  std::vector<float> logits;  // [S, vocab]
 private:
  int P_;
};

inline const NamedArray& metric(const RunData& run, const std::string& name) {
  for (const NamedArray& m : run.metrics)
    if (m.name == name) return m;
  throw std::runtime_error("run " + run.name + " has no metric " + name);
}

inline double scalar(const RunData& run, const std::string& name) {
  for (const auto& [k, v] : run.scalars)
    if (k == name) return v;
  throw std::runtime_error("run " + run.name + " has no scalar " + name);
}

}  // namespace kvs::test
