// KVzip key scores through the engine: prefill the context once; per chunk, feed the repeat
// prompt and the chunk (Engine::extend, teacher-forced) with attention restricted to sinks +
// chunk + repeat input, keep the max attention each context key receives per KV head, and rewind
// the engine to the context.
#include "analysis/kvzip_scores.h"

#include <algorithm>
#include <optional>

#include "inference/errors.h"
#include "inference/tokenizer.h"

namespace kvs {

KvzipChunkController::KvzipChunkController(int sinks, int chunk_begin, int chunk_end, int context_len)
    : sinks_(sinks), begin_(chunk_begin), end_(chunk_end), context_(context_len) {}

void KvzipChunkController::before_attention(int layer, int q_pos, KvSlots& kv) {
  for (int g = 0; g < kv.n_kv_heads(); ++g) {
    std::span<const int32_t> held = kv.held(layer, g);
    std::span<uint8_t> active = kv.active(layer, g);
    for (size_t i = 0; i < held.size(); ++i) {
      const int p = held[i];
      active[i] = p < sinks_ || (p >= begin_ && p < end_) || p >= context_ ? 1 : 0;
    }
  }
}

KvzipScoreObserver::KvzipScoreObserver(int n_layers, int n_heads, int n_kv_heads, int context_len)
    : n_heads_(n_heads), n_kv_heads_(n_kv_heads), context_(context_len),
      scores_((size_t)n_layers * n_kv_heads * context_len, 0.0f) {}

void KvzipScoreObserver::on_attention(const AttentionBlock& block) {
  if (!block.decode) return;
  const int g = block.head / (n_heads_ / n_kv_heads_);
  float* s = scores_.data() + ((size_t)block.layer * n_kv_heads_ + g) * context_;
  for (int j = 0; j < block.n_keys; ++j) {
    const int p = block.key(j);
    if (p < context_) s[p] = std::max(s[p], block.probs[j]);
  }
}

std::vector<float> kvzip_key_scores(const Model& model, const Tokenizer& tokenizer,
                                    std::span<const int> context, const KvzipOptions& options) {
  const ModelConfig& c = model.config;
  const int P = (int)context.size();
  if (P == 0) throw input_error("kvzip", "empty context");
  if (options.chunk < 1) throw input_error("kvzip", "chunk must be >= 1");
  if (options.sinks < 0) throw input_error("kvzip", "sinks must be >= 0");
  if (options.overlap < 0) throw input_error("kvzip", "overlap must be >= 0");
  const std::vector<int> first = tokenizer.encode(options.repeat_text, false);
  std::vector<int> later = tokenizer.encode(options.continue_text, false);
  const int prompt_max = std::max((int)first.size(), (int)later.size() + options.overlap);
  // The chunk shrinks to what the model's context leaves after the prompt and a repeat prompt.
  const int chunk = std::min(options.chunk, c.seq_len - P - prompt_max);
  if (chunk < 1) {
    throw input_error("kvzip", "context of " + std::to_string(P) + " tokens leaves no room for the " +
                                   "repeat pass in the model's context of " + std::to_string(c.seq_len));
  }

  // Each pass feeds its repeat prompt + chunk tokens.
  std::vector<std::vector<int>> feeds;
  int total_fed = 0;
  for (int begin = 0; begin < P; begin += chunk) {
    const int end = std::min(P, begin + chunk);
    std::vector<int> feed = first;
    if (begin > 0) {
      feed = later;
      feed.insert(feed.end(), context.begin() + std::max(0, begin - options.overlap), context.begin() + begin);
    }
    feed.insert(feed.end(), context.begin() + begin, context.begin() + end);
    total_fed += static_cast<int>(feed.size());
    feeds.push_back(std::move(feed));
  }

  const RunProgress& progress = options.progress;
  std::optional<Engine> own;  // unless the caller's engine serves
  Engine& engine = options.on ? *options.on : own.emplace(model, options.engine);
  KvzipScoreObserver observer(c.n_layers, c.n_heads, c.n_kv_heads, P);
  PrefillProgress prefill(progress.on_prefill_layer, progress.cancelled);
  if (options.on && options.from) {
    const EngineAttachment detached(engine, nullptr, nullptr);
    engine.restore_prefill(*options.from);
    if (progress.on_prefill_layer) progress.on_prefill_layer(c.n_layers, c.n_layers);
  } else {
    const EngineAttachment attached(engine, &prefill, nullptr);
    engine.prefill(context);
  }
  int fed = 0;
  for (size_t pass = 0; pass < feeds.size(); ++pass) {
    const int begin = static_cast<int>(pass) * chunk, end = std::min(P, begin + chunk);
    KvzipChunkController restrict_keys(options.sinks, begin, end, P);
    const EngineAttachment attached(engine, &observer, &restrict_keys);
    // In pieces, to report progress and stop within a second or so; the restriction is the same
    // for every piece, so the rows are those of one extend.
    constexpr int kPiece = 256;
    const std::span<const int> feed = feeds[pass];
    for (std::size_t at = 0; at < feed.size(); at += kPiece) {
      if (progress.cancelled && progress.cancelled()) throw RunCancelled{};
      const std::span<const int> piece = feed.subspan(at, std::min<std::size_t>(kPiece, feed.size() - at));
      engine.extend(piece);
      fed += static_cast<int>(piece.size());
      if (progress.on_step) progress.on_step(fed - 1, total_fed);
    }
    engine.rewind(P);  // the next pass sees the context alone again
  }
  if (progress.cancelled && progress.cancelled()) throw RunCancelled{};  // stopped during the last piece
  std::vector<float>& scores = observer.scores();  // [L, Hkv, P]
  for (size_t row = 0; row < scores.size() / P; ++row) {
    std::fill_n(scores.begin() + row * P, std::min(options.sinks, P), 1.0f);
  }
  return std::move(scores);
}

}  // namespace kvs
