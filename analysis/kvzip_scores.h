// KVzip context-reconstruction key scores (POLICIES.md §7) computed through the engine's public
// API: after the context is prefilled (once), a repeat prompt and each chunk of the context are
// teacher-forced in batched passes over the cache (Engine::extend), the engine rewound to the
// context after each chunk; a key's score is the largest attention any query of its KV
// group gives it during the reconstruction of its chunk.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "analysis/run_progress.h"
#include "inference/engine.h"
#include "inference/hooks.h"

namespace kvs {

class Tokenizer;

struct KvzipOptions {
  int chunk = 2000;  // context tokens reconstructed per pass (m)
  int sinks = 4;     // first keys, always attended during scoring and scored 1
  int overlap = 8;   // tokens of the previous chunk quoted by the later repeat prompts
  std::string repeat_text = "Repeat the previous context exactly.";
  std::string continue_text = "Repeat the part of the previous context exactly, starting with";
  EngineOptions engine;
  // When set, the scoring runs on this engine (an engine of the model; `engine` is then unused),
  // which `from`, when also set, puts back where its prefill of the context left it
  // (Engine::snapshot_prefill), instead of processing the context again.
  Engine* on = nullptr;
  const PrefillSnapshot* from = nullptr;
  // The context's prefill by layer (restored: through at once), then the repeat tokens fed (`step`
  // of `total`, counted over all passes); stopping it throws RunCancelled.
  RunProgress progress;
};

// During one chunk's repeat pass, restricts every (layer, KV head) to the sinks, the chunk's keys
// [chunk_begin, chunk_end) and the repeat input itself (positions >= context_len).
class KvzipChunkController : public CacheController {
 public:
  KvzipChunkController(int sinks, int chunk_begin, int chunk_end, int context_len);
  void after_prefill(int prompt_len, KvSlots& kv) override {}
  void before_attention(int layer, int q_pos, KvSlots& kv) override;
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads, KvSlots& kv) override {}
 private:
  int sinks_, begin_, end_, context_;
};

// Keeps, per (layer, KV head, context key j < context_len), the max decode attention prob of any
// query head of the group (a running max over every decode row it sees).
class KvzipScoreObserver : public AttentionObserver {
 public:
  KvzipScoreObserver(int n_layers, int n_heads, int n_kv_heads, int context_len);
  PrefillNeed prefill_need() const override { return {false, 1}; }  // decode rows only
  void on_attention(const AttentionBlock& block) override;
  const std::vector<float>& scores() const { return scores_; }  // [L, Hkv, P]
  std::vector<float>& scores() { return scores_; }
 private:
  int n_heads_, n_kv_heads_, context_;
  std::vector<float> scores_;  // [L, Hkv, P]
};

// Scores for PrefillEvidence::key_scores: [L, Hkv, P] with P = context.size(), every value in
// [0, 1], keys [0, sinks) set to 1. Chunk i feeds, after the context's cache,
// repeat prompt + chunk i teacher-forced (the first chunk's repeat prompt is repeat_text, later
// ones continue_text + the last `overlap` tokens of the previous chunk); no chat template is
// applied. Throws InputError when the context is empty, an option is out of range, or context +
// repeat input exceed the model's context; RunCancelled when options.progress stopped it.
std::vector<float> kvzip_key_scores(const Model& model, const Tokenizer& tokenizer,
                                    std::span<const int> context, const KvzipOptions& options = {});

}  // namespace kvs
