// Token sampling (greedy; temperature + nucleus with a seeded mt19937_64) and the generation loop.
#include "inference/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "inference/errors.h"
#include "inference/host_memory.h"
#include "inference/kv_store.h"

namespace kvs {

Sampler::Sampler(SamplingOptions options) : options_(options), rng_(options.seed) {
  if (!(options_.top_p > 0.0f && options_.top_p <= 1.0f)) {
    throw input_error("--top-p", "must be in (0, 1], got " + std::to_string(options_.top_p));
  }
  if (!(options_.temperature >= 0.0f)) {
    throw input_error("--temperature", "must be >= 0, got " + std::to_string(options_.temperature));
  }
}

int Sampler::sample(std::span<const float> logits) {
  const int n = static_cast<int>(logits.size());
  if (options_.temperature == 0.0f) {
    int best = 0;
    for (int i = 1; i < n; ++i) {
      if (logits[i] > logits[best]) best = i;  // strict: ties keep the lowest id
    }
    return best;
  }
  // probs = softmax(logits / T), in double for a stable cumulative sum.
  std::vector<double> probs(n);  // [vocab]
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    probs[i] = std::exp(static_cast<double>(logits[i] - max) / options_.temperature);
    sum += probs[i];
  }
  for (double& p : probs) p /= sum;
  // u uniform in [0, 1) from the top 53 bits, identical on every platform.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;

  if (options_.top_p >= 1.0f) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) {
      acc += probs[i];
      if (u < acc) return i;
    }
    return n - 1;
  }
  // Nucleus: the most probable tokens (ties by id) whose mass reaches top_p. A token below
  // (1 - top_p) / (n - 1) can never be needed, so those are not sorted.
  const double cutoff = n > 1 ? (1.0 - options_.top_p) / (n - 1) : 0.0;
  std::vector<int> order;  // candidate ids, most probable first
  for (int i = 0; i < n; ++i) {
    if (probs[i] >= cutoff) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return probs[a] != probs[b] ? probs[a] > probs[b] : a < b;
  });
  double mass = 0.0;
  std::size_t kept = order.size();
  for (std::size_t i = 0; i < order.size(); ++i) {
    mass += probs[order[i]];
    if (mass >= options_.top_p) {
      kept = i + 1;
      break;
    }
  }
  const double target = u * mass;
  double acc = 0.0;
  for (std::size_t i = 0; i < kept; ++i) {
    acc += probs[order[i]];
    if (target < acc) return order[i];
  }
  return order[kept - 1];
}

std::vector<int> generate(Engine& engine, const GenerateRequest& request,
                          const GenerateCallbacks& callbacks) {
  const bool forced = !request.forced.empty();
  if (forced && static_cast<int>(request.forced.size()) < request.steps) {
    throw input_error("forced tokens", std::to_string(request.forced.size()) +
                                           " tokens given for " + std::to_string(request.steps) +
                                           " steps");
  }
  const ModelConfig& c = engine.model().config;
  const int seq_len = c.seq_len;
  if (engine.options().device == Device::Cpu) {
    // The CPU cache takes its pages as positions fill: a run whose cache will not fit is refused
    // before its prefill, rather than by the out-of-memory killer partway through its steps.
    const int64_t positions = std::min<int64_t>(seq_len, static_cast<int64_t>(request.prompt.size()) + request.steps);
    require_host_memory("prompt (" + std::to_string(request.prompt.size()) + " tokens) + " +
                            std::to_string(request.steps) + " steps",
                        KvStore::bytes_for(c.n_layers, c.n_kv_heads, c.head_dim, positions,
                                           kv_row_type(engine.options().kv_dtype)),
                        engine.options().kv_dtype == KvDtype::Fp32
                            ? "their fp32 cache on this model (half that in fp16 or bf16)"
                            : std::string("their ") + kv_dtype_name(engine.options().kv_dtype) + " cache on this model");
  }
  Sampler sampler(request.sampling);
  std::vector<int> out;
  std::span<const float> logits;
  const std::span<const int> prompt(request.prompt);
  const std::size_t chunk = static_cast<std::size_t>(std::max(0, request.prefill_chunk));
  if (request.from) {
    if (chunk > 0) throw std::logic_error("generate: a restored prefill is not fed in chunks");
    logits = engine.restore_prefill(*request.from);
  } else if (chunk > 0 && prompt.size() > chunk) {
    if (prompt.size() > static_cast<std::size_t>(seq_len))  // as prefill says it of a whole prompt
      throw input_error("prompt", std::to_string(prompt.size()) + " tokens exceed the model's context of " +
                                      std::to_string(seq_len));
    logits = engine.prefill(prompt.first(chunk));
    for (std::size_t at = chunk; at < prompt.size(); at += chunk) {
      if (callbacks.cancelled && callbacks.cancelled()) return out;
      logits = engine.extend(prompt.subspan(at, std::min(chunk, prompt.size() - at)));
    }
  } else {
    logits = engine.prefill(prompt);
  }
  if (callbacks.after_prefill) callbacks.after_prefill();
  for (int step = 0; step < request.steps; ++step) {
    if (callbacks.cancelled && callbacks.cancelled()) break;
    const int token = forced ? request.forced[step] : sampler.sample(logits);
    const bool ends = std::find(request.end_ids.begin(), request.end_ids.end(), token) != request.end_ids.end();
    if (request.stop_at_eos && ends) break;
    if (engine.pos() >= seq_len) break;  // the context is full: nothing more can be fed
    if (callbacks.on_token) callbacks.on_token(step, token, logits);
    out.push_back(token);
    logits = engine.decode(token);
  }
  return out;
}

}  // namespace kvs
