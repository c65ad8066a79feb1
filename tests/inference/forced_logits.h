// Test support: a run of forced tokens after a prompt (prefilled, or restored from a snapshot of
// its prefill) under a controller, and what it computed: the logits each token was chosen from
// and the cache's bytes then.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "inference/engine.h"
#include "inference/generate.h"

namespace kvs::test {

struct ForcedRun {
  std::vector<float> logits;          // [steps, vocab]
  std::vector<std::size_t> kv_bytes;  // [steps] when each token was chosen
};

inline ForcedRun forced_logits(Engine& engine, const std::vector<int>& prompt, const std::vector<int>& forced,
                               CacheController* controller, const PrefillSnapshot* from = nullptr) {
  ForcedRun r;
  GenerateRequest req;
  req.prompt = prompt;
  req.steps = static_cast<int>(forced.size());
  req.forced = forced;
  req.stop_at_eos = false;
  req.from = from;
  GenerateCallbacks cb;
  cb.on_token = [&](int, int, std::span<const float> logits) {
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
    r.kv_bytes.push_back(engine.kv_bytes());
  };
  const EngineAttachment attached(engine, nullptr, controller);
  generate(engine, req, cb);
  return r;
}

}  // namespace kvs::test
