// Sampling (greedy, temperature + top-p with a seed) and the prefill/decode generation loop.
#pragma once
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include "inference/engine.h"

namespace kvs {

struct SamplingOptions {
  float temperature = 0.0f;  // 0 = greedy (argmax; ties -> lowest id)
  float top_p = 1.0f;        // nucleus mass, (0, 1]
  uint64_t seed = 42;
};

class Sampler {
 public:
  explicit Sampler(SamplingOptions options);
  int sample(std::span<const float> logits);
 private:
  SamplingOptions options_;
  std::mt19937_64 rng_;
};

struct GenerateRequest {
  std::vector<int> prompt;      // token ids, BOS included when the model wants it
  int steps = 0;                // tokens to generate; each one is fed back (steps decode passes)
  SamplingOptions sampling;
  std::vector<int> forced;      // when non-empty: feed these tokens instead of sampling (forced mode)
  bool stop_at_eos = true;   // stop at a token of end_ids, which is not fed
  std::vector<int> end_ids;  // tokens that end the text: text_end_ids (loader.h)
  // When set, the prompt is not processed: the engine is put back where its prefill of `prompt`
  // left it (Engine::restore_prefill).
  const PrefillSnapshot* from = nullptr;
  // When > 0 and the prompt is longer: the prompt goes in in chunks of this many tokens, as a
  // server with chunked prefill feeds it — Engine::prefill of the first (the controller's
  // after_prefill compresses it), then Engine::extend of each later one over what the controller
  // kept (its before_attention runs once a layer at the chunk's first position). 0: one prefill.
  // Not with `from`.
  int prefill_chunk = 0;
};

struct GenerateCallbacks {
  // Called for each generated token (step 0..steps-1) after it is chosen, before it is fed.
  std::function<void(int step, int token, std::span<const float> logits)> on_token;
  // Called once the prompt is processed (or restored), before the first token is chosen.
  std::function<void()> after_prefill;
  // Polled between steps; returning true stops generation early.
  std::function<bool()> cancelled;
};

// Runs prefill + decode. Stops between prompt chunks, and between steps, when
// callbacks.cancelled says so. Returns the generated tokens (each of which was also fed to the model,
// so the engine ends at position prompt.size() + result.size()).
std::vector<int> generate(Engine& engine, const GenerateRequest& request,
                          const GenerateCallbacks& callbacks = {});

}  // namespace kvs
