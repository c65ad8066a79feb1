// DuoAttention gates estimated without training: per KV head, restrict that head alone to
// sink + recent keys while the answer of a passkey prompt is teacher-forced, and measure how far
// the next-token logits move from the full-attention run; max-normalized to [0, 1].
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "analysis/needle.h"
#include "inference/engine.h"
#include "inference/hooks.h"

namespace kvs {

class Tokenizer;

// One teacher-forced run on top of a prefilled context, for an engine whose keys are rotated by
// their slot in the cache (EngineOptions::rope_in_cache): when layer >= 0, restricts that
// (layer, KV head) to its first `sink` held entries and its last recent + 1 (the query's own
// included): sink + recent of DuoAttention. Every other head attends everything it holds (flags
// an earlier run on the same prefill cleared are set again).
class ForcedRunController : public CacheController {
 public:
  ForcedRunController(int layer, int kv_head, int sink, int recent);
  void after_prefill(int prompt_len, KvSlots& kv) override {}
  void before_attention(int layer, int q_pos, KvSlots& kv) override;
  void after_attention(int layer, int q_pos, std::span<const AttentionBlock> heads, KvSlots& kv) override {}
 private:
  int layer_, kv_head_, sink_, recent_;
};

struct AlphaEstimateOptions {
  int sink = 4;                               // S
  int recent = 32;                            // R
  int context_tokens = 256;                   // passkey prompt length
  std::vector<double> depths = {0.2, 0.5, 0.8};  // one prompt per depth, passkeys from `seed`
  unsigned seed = 11;
  NeedleOptions prompt;                       // question and filler (needle/answer are set here)
  std::string distance = "mse";               // "mse": mean squared logit difference; "kl": KL(full || restricted)
  bool reuse_prefill = true;                  // prefill each prompt once (false: once per run; same result)
  EngineOptions engine;                       // rope_in_cache is forced on
  std::function<void(int done, int total)> progress;  // after each run, when set
};

struct AlphaEstimate {
  int n_layers = 0;
  int n_kv_heads = 0;
  int sink = 0;
  int recent = 0;
  int n_prompts = 0;
  int n_scored_steps = 0;     // answer steps compared, over all prompts
  std::string distance;
  KvDtype kv_dtype = KvDtype::Fp32;  // the cache the runs kept keys and values in
  std::vector<double> raw;    // [L, Hkv] mean distance per answer step
  std::vector<float> alpha;   // [L, Hkv] raw / max(raw), in [0, 1]; all 0 when nothing moved
  // e.g. "estimated: mse of logits, sink 4, recent 32, 3 passkey prompts" (", fp16 cache" added
  // for a 16-bit cache)
  std::string source() const;
};

// Runs 1 + L * Hkv passes per prompt: the context (everything before the question) is prefilled
// with full attention, then the question and the answer ("The secret passkey is N.") are fed
// one token at a time, the target head restricted. Distances are taken on the logits that
// predict the answer tokens. The runs of a prompt share its prefill: the engine is rewound to
// the context before each. Throws InputError for bad options or a prompt longer than the model's
// context.
AlphaEstimate estimate_alpha(const Model& model, const Tokenizer& tokenizer,
                             const AlphaEstimateOptions& options);

// Writes DIR/full_attention_heads.tsv + DIR/config.json in the published DuoAttention layout.
void write_alpha_pattern(const std::string& dir, const AlphaEstimate& estimate);

}  // namespace kvs
