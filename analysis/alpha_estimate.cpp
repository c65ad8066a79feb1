// Training-free DuoAttention gate estimation: one full run and one single-head streaming run per
// (layer, KV head) on teacher-forced passkey prompts, compared on the answer logits.
#include "analysis/alpha_estimate.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "analysis/duo_pattern.h"
#include "inference/errors.h"
#include "inference/tokenizer.h"

namespace kvs {

ForcedRunController::ForcedRunController(int layer, int kv_head, int sink, int recent)
    : layer_(layer), kv_head_(kv_head), sink_(sink), recent_(recent) {}

void ForcedRunController::before_attention(int layer, int q_pos, KvSlots& kv) {
  for (int g = 0; g < kv.n_kv_heads(); ++g) {
    // Entries an earlier run restricted are still inactive: every head starts from all active.
    std::span<uint8_t> active = kv.active(layer, g);
    const int n = (int)active.size();
    const bool restricted = layer == layer_ && g == kv_head_;
    for (int i = 0; i < n; ++i) active[i] = !restricted || i < sink_ || i >= n - 1 - recent_ ? 1 : 0;
  }
}

std::string AlphaEstimate::source() const {
  std::ostringstream s;
  s << "estimated: " << distance << " of logits, sink " << sink << ", recent " << recent << ", "
    << n_prompts << " passkey prompt" << (n_prompts == 1 ? "" : "s");
  if (kv_dtype != KvDtype::Fp32) s << ", " << kv_dtype_name(kv_dtype) << " cache";
  return s.str();
}

namespace {

// A teacher-forced prompt: prefill tokens[0, context), feed the rest one by one, and compare the
// logits computed at positions [score_begin, score_end) of the fed sequence.
struct ForcedPrompt {
  std::vector<int> tokens;
  int context = 0;
  int score_begin = 0;
  int score_end = 0;
};

// One run restricting (layer, kv_head) (layer -1: none) on the prefilled context: prefilled
// afresh when `fresh`, else the engine is rewound to it.
// Returns the logits at the scored positions: [score_end - score_begin, vocab].
std::vector<float> run_forced(Engine& engine, const ForcedPrompt& p, int layer, int kv_head,
                              const AlphaEstimateOptions& o, bool fresh) {
  if (fresh) {
    engine.reset();
    engine.prefill(std::span<const int>(p.tokens).first(p.context));
  } else {
    engine.rewind(p.context);
  }
  ForcedRunController controller(layer, kv_head, o.sink, o.recent);
  const EngineAttachment attached(engine, nullptr, &controller);
  std::vector<float> out;
  for (int i = p.context; i < (int)p.tokens.size(); ++i) {
    std::span<const float> logits = engine.decode(p.tokens[i]);
    if (i >= p.score_begin && i < p.score_end) out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

double mse(const float* a, const float* b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
  return s / n;
}

// KL(softmax(a) || softmax(b)).
double kl(const float* a, const float* b, int n) {
  const double ma = *std::max_element(a, a + n), mb = *std::max_element(b, b + n);
  double za = 0.0, zb = 0.0;
  for (int i = 0; i < n; ++i) { za += std::exp(a[i] - ma); zb += std::exp(b[i] - mb); }
  const double la = ma + std::log(za), lb = mb + std::log(zb);
  double s = 0.0;
  for (int i = 0; i < n; ++i) {
    const double lpa = a[i] - la;
    s += std::exp(lpa) * (lpa - (b[i] - lb));
  }
  return std::max(0.0, s);
}

ForcedPrompt passkey_prompt(const Tokenizer& tokenizer, const AlphaEstimateOptions& o, int index) {
  NeedleOptions n = o.prompt;
  n.context_tokens = o.context_tokens;
  n.depth = o.depths[index];
  n.needle = passkey_needle(passkey_for_seed(o.seed + index));
  n.answer = n.needle;
  NeedlePrompt np = build_needle_prompt(tokenizer, n);
  ForcedPrompt p;
  p.tokens = np.tokens;
  p.context = np.question.begin;
  p.score_begin = std::max(np.answer.begin - 1, p.context);
  p.score_end = np.answer.end - 1;
  if (p.context < 1 || p.score_end <= p.score_begin) {
    throw input_error("passkey prompt", "no answer tokens to compare");
  }
  return p;
}

}  // namespace

AlphaEstimate estimate_alpha(const Model& model, const Tokenizer& tokenizer,
                             const AlphaEstimateOptions& options) {
  if (options.sink < 0) throw input_error("--sink", "must be >= 0");
  if (options.recent < 0) throw input_error("--recent", "must be >= 0");
  if (options.depths.empty()) throw input_error("alpha estimation", "no passkey depth given");
  if (options.distance != "mse" && options.distance != "kl") {
    throw input_error("--distance", "unknown '" + options.distance + "' (mse or kl)");
  }
  const ModelConfig& c = model.config;
  if (options.context_tokens < 1 || options.context_tokens > c.seq_len) {
    throw input_error("alpha estimation", "prompt length " + std::to_string(options.context_tokens) +
                                              " outside 1.." + std::to_string(c.seq_len));
  }
  const int L = c.n_layers, Hkv = c.n_kv_heads, V = c.vocab_size;
  AlphaEstimate est;
  est.n_layers = L;
  est.n_kv_heads = Hkv;
  est.sink = options.sink;
  est.recent = options.recent;
  est.distance = options.distance;
  est.kv_dtype = options.engine.kv_dtype;
  est.raw.assign((size_t)L * Hkv, 0.0);
  EngineOptions engine_options = options.engine;
  engine_options.rope_in_cache = true;
  Engine engine(model, engine_options);
  const int n_prompts = (int)options.depths.size();
  const int total = n_prompts * (1 + L * Hkv);
  int done = 0;
  for (int i = 0; i < n_prompts; ++i) {
    ForcedPrompt p = passkey_prompt(tokenizer, options, i);
    if ((int)p.tokens.size() > c.seq_len) {
      throw input_error("passkey prompt", std::to_string(p.tokens.size()) +
                                              " tokens exceed the model's context of " +
                                              std::to_string(c.seq_len));
    }
    const std::vector<float> full = run_forced(engine, p, -1, 0, options, true);  // [steps, V]
    const int steps = p.score_end - p.score_begin;
    if (options.progress) options.progress(++done, total);
    for (int l = 0; l < L; ++l) {
      for (int g = 0; g < Hkv; ++g) {
        const std::vector<float> cut = run_forced(engine, p, l, g, options, !options.reuse_prefill);
        double d = 0.0;
        for (int s = 0; s < steps; ++s) {
          const float* a = full.data() + (size_t)s * V;
          const float* b = cut.data() + (size_t)s * V;
          d += options.distance == "kl" ? kl(a, b, V) : mse(a, b, V);
        }
        est.raw[(size_t)l * Hkv + g] += d;
        if (options.progress) options.progress(++done, total);
      }
    }
    est.n_scored_steps += steps;
  }
  est.n_prompts = n_prompts;
  for (double& v : est.raw) v /= est.n_scored_steps;
  const double top = *std::max_element(est.raw.begin(), est.raw.end());
  est.alpha.assign(est.raw.size(), 0.0f);
  if (top > 0.0) {
    for (size_t i = 0; i < est.raw.size(); ++i) est.alpha[i] = (float)(est.raw[i] / top);
  }
  return est;
}

void write_alpha_pattern(const std::string& dir, const AlphaEstimate& estimate) {
  DuoPattern pattern;
  pattern.n_layers = estimate.n_layers;
  pattern.n_kv_heads = estimate.n_kv_heads;
  pattern.alpha = estimate.alpha;
  pattern.sink_size = estimate.sink;
  pattern.recent_size = estimate.recent;
  write_duo_pattern(dir, pattern, estimate.source());
}

}  // namespace kvs
