// Llama-family forward pass (fp32): batched prefill (OpenMP) with blockwise attention capture,
// single-token decode (the engine's DecodeTeam) over the active entries of a per-(layer, KV head)
// cache, and the hook calls.
#include "inference/engine.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "inference/cuda_backend.h"
#include "inference/decode_team.h"
#include "inference/engine_state.h"
#include "inference/errors.h"
#include "inference/group_rows.h"
#include "inference/host_memory.h"
#include "inference/key_ranking.h"
#include "inference/kv_store.h"
#include "inference/thread_team.h"
#include "kernels/attention.h"
#include "kernels/attention_gathered.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/softcap.h"
#include "kernels/swiglu.h"

namespace kvs {
namespace {

void check_config(const Model& model) {
  const ModelConfig& c = model.config;
  const std::string what = model.path.empty() ? "model" : model.path;
  if (c.dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.head_dim <= 0 ||
      c.vocab_size <= 0 || c.seq_len <= 0 || c.hidden_dim <= 0) {
    throw input_error(what, "model hyper-parameters must all be positive");
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    throw input_error(what, std::to_string(c.n_heads) + " query heads are not a multiple of " +
                                std::to_string(c.n_kv_heads) + " KV heads");
  }
  if (c.head_dim % 2 != 0) throw input_error(what, "head_dim must be even for RoPE");
}

// Uses options.n_threads for the OpenMP regions started by this thread, restoring it afterwards;
// fewer where the threads beyond the running team would not have room for their stacks.
class ThreadScope {
 public:
  explicit ThreadScope(int n) : saved_(omp_get_max_threads()) {
    if (n > 0) omp_set_num_threads(team_size_for(n));
  }
  ~ThreadScope() { omp_set_num_threads(saved_); }
 private:
  int saved_;
};

void add_into(float* y, const float* x, long n) {
#pragma omp simd
  for (long i = 0; i < n; ++i) y[i] += x[i];
}

// x[n] <- what a cache of type d keeps of it: the prompt's K and V as its attention reads them
// (decode and extend read the cache itself, which rounds as it appends).
void round_cache(KvDtype d, float* x, std::size_t n) {
  if (d == KvDtype::Fp16) round_to_fp16(x, n);
  if (d == KvDtype::Bf16) round_to_bf16(x, n);
}

// Engine::extend fed as decode steps (rope_in_cache) gives its hooks what its batched pass gives:
// an observer its rows and tokens but not each step's logits (the last token's come after), a
// controller its before_attention but no after_attention (nothing is evicted inside a chunk).
class RowsAndTokens : public AttentionObserver {
 public:
  explicit RowsAndTokens(AttentionObserver* to) : to_(to) {}
  void on_attention(const AttentionBlock& block) override { to_->on_attention(block); }
  void on_token(int pos, int token) override { to_->on_token(pos, token); }

 private:
  AttentionObserver* to_;
};
class BeforeAttentionOnly : public CacheController {
 public:
  explicit BeforeAttentionOnly(CacheController* to) : to_(to) {}
  void after_prefill(int, KvSlots&) override {}
  void before_attention(int layer, int q_pos, KvSlots& kv) override { to_->before_attention(layer, q_pos, kv); }
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}

 private:
  CacheController* to_;
};

// Every id of `tokens` (named `what` in the error) is in the vocabulary.
void check_tokens(std::span<const int> tokens, int vocab_size, const char* what) {
  for (int t : tokens) {
    if (t < 0 || t >= vocab_size) {
      throw input_error(what, "token id " + std::to_string(t) + " is outside the vocabulary of " +
                                  std::to_string(vocab_size));
    }
  }
}

// X [n, dim] <- the embedding rows of tokens[n].
void embed_rows(float* X, const Model& m, std::span<const int> tokens) {
  const int dim = m.config.dim;
  const float scale = m.config.embed_scale;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    float* x = X + i * dim;
    m.weights.token_embedding.row(tokens[i], x);
    if (scale != 1.0f)
      for (int e = 0; e < dim; ++e) x[e] *= scale;
  }
}

// logits [vocab] <- the classifier's logits of the residual row x [dim], through the final norm
// (in xb [dim]) and the model's soft cap.
void row_logits(float* logits, float* xb, const float* x, const Model& m) {
  const ModelConfig& c = m.config;
  ops::rmsnorm(xb, x, m.weights.final_norm.data(), c.dim, c.rms_eps);
  ops::matvec_packed(logits, m.classifier().weights(), xb, c.vocab_size, c.dim);
  ops::softcap(logits, c.vocab_size, c.final_softcap);
}

// RoPE on n rows of Q [n, q_dim] and K [n, kv_dim] at positions pos0..pos0+n-1.
void rope_rows(float* Q, float* K, int n, int pos0, const ModelConfig& c, const ops::RopeTable& rope,
               ops::RopePairing pairing) {
  const int hd = c.head_dim;
  for (int i = 0; i < n; ++i) {
    const int p = pos0 + i;
    ops::rope_apply(Q + static_cast<std::size_t>(i) * c.q_dim(), c.n_heads, hd, rope.cos(p), rope.sin(p), pairing);
    ops::rope_apply(K + static_cast<std::size_t>(i) * c.kv_dim(), c.n_kv_heads, hd, rope.cos(p), rope.sin(p), pairing);
  }
}

// The QK-norm: Q [n, q_dim] and K [n, kv_dim] RMS-normalised in place by the layer's q_norm and
// k_norm, in slices of their width: every head on its own ([head_dim]: Qwen3, Gemma 3) or each
// row whole ([q_dim] and [kv_dim]: OLMo 2); nothing for models without them.
void norm_heads(const LayerWeights& lw, const ModelConfig& c, float* Q, float* K, int n) {
  const auto norm = [&](float* X, const WeightVector& w, int row_width) {
    const int width = static_cast<int>(w.size());
    ops::rmsnorm_rows(X, X, w.data(), n * (row_width / width), width, c.rms_eps);
  };
  if (!lw.q_norm.empty()) norm(Q, lw.q_norm, c.q_dim());
  if (!lw.k_norm.empty()) norm(K, lw.k_norm, c.kv_dim());
}

// XB [n, dim] <- n rows of the residual X [n, dim] as a block reads them: RMS-normalised by `w`
// [dim], or copied where the layer has no norm before the block (OLMo 2 normalises only after).
void block_input_rows(float* XB, const float* X, const WeightVector& w, int n, const ModelConfig& c) {
  if (w.empty()) std::copy_n(X, static_cast<std::size_t>(n) * c.dim, XB);
  else ops::rmsnorm_rows(XB, X, w.data(), n, c.dim, c.rms_eps);
}

// Q, K, V [n, q_dim / kv_dim] of n normalised rows XB [n, dim] (biases added, heads normalised
// where the model says, no RoPE).
void qkv_rows(const LayerWeights& lw, const ModelConfig& c, const float* XB, float* Q, float* K, float* V, int n) {
  const int dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim();
  ops::matmul_packed(Q, XB, lw.wq.weights(), n, qd, dim);
  ops::matmul_packed(K, XB, lw.wk.weights(), n, kvd, dim);
  ops::matmul_packed(V, XB, lw.wv.weights(), n, kvd, dim);
  if (!lw.bq.empty()) ops::add_bias(Q, lw.bq.data(), n, qd);
  if (!lw.bk.empty()) ops::add_bias(K, lw.bk.data(), n, kvd);
  if (!lw.bv.empty()) ops::add_bias(V, lw.bv.data(), n, kvd);
  norm_heads(lw, c, Q, K, n);
}

// The gated activation of one row: gate[hid] <- act(gate) * up[hid].
void gate_row(const ModelConfig& c, float* gate, const float* up, int hid) {
  if (c.activation == Activation::GeluTanh) ops::geglu_tanh(gate, up, hid);
  else ops::swiglu(gate, up, hid);
}

// A block's output out [n, dim] added to the residual X [n, dim], normalised first by `post`
// [dim] where the layer has that norm (Gemma's post-attention and post-FFN norms).
void add_block_output(const WeightVector& post, const ModelConfig& c, float* X, float* out, int n) {
  if (!post.empty()) ops::rmsnorm_rows(out, out, post.data(), n, c.dim, c.rms_eps);
  add_into(X, out, static_cast<long>(n) * c.dim);
}

// The attention block's output: X += post(W_o ATT).
//   X [n, dim], XB [n, dim] scratch, ATT [n, q_dim]
void attention_output_rows(const LayerWeights& lw, const ModelConfig& c, float* X, float* XB, const float* ATT,
                           int n) {
  ops::matmul_packed(XB, ATT, lw.wo.weights(), n, c.dim, c.q_dim());
  add_block_output(lw.post_attn_norm, c, X, XB, n);
}

// The feed-forward block of n rows of the residual stream: X += post(W_down act(W_gate x, W_up x))
// with x = the rows normalised.
//   X [n, dim], XB [n, dim] scratch, G and U [n, hidden_dim] scratch
void ffn_rows(const LayerWeights& lw, const ModelConfig& c, float* X, float* XB, float* G, float* U, int n) {
  const int dim = c.dim, hid = c.hidden_dim;
  block_input_rows(XB, X, lw.ffn_norm, n, c);
  ops::matmul_packed(G, XB, lw.w_gate.weights(), n, hid, dim);
  ops::matmul_packed(U, XB, lw.w_up.weights(), n, hid, dim);
#pragma omp parallel for schedule(static) if (static_cast<long>(n) * hid >= (1L << 16))
  for (int t = 0; t < n; ++t) gate_row(c, G + static_cast<std::size_t>(t) * hid, U + static_cast<std::size_t>(t) * hid, hid);
  ops::matmul_packed(XB, G, lw.w_down.weights(), n, dim, hid);
  add_block_output(lw.post_ffn_norm, c, X, XB, n);
}

}  // namespace

GpuDtype auto_gpu_dtype(std::string_view weight_type, std::size_t n_params) {
  if (n_params <= kAutoFp32MaxBytes / sizeof(float)) return GpuDtype::Fp32;
  return weight_type.starts_with("BF16") ? GpuDtype::Bf16 : GpuDtype::Fp16;
}

GpuDtype resolve_gpu_dtype(const Model& model, GpuDtype asked) {
  return asked == GpuDtype::Auto ? auto_gpu_dtype(model.weight_type, model.parameter_count()) : asked;
}

const char* gpu_dtype_name(GpuDtype d) {
  switch (d) {
    case GpuDtype::Auto: return "auto";
    case GpuDtype::Fp16: return "fp16";
    case GpuDtype::Bf16: return "bf16";
    case GpuDtype::Fp32: return "fp32";
  }
  return "?";
}

const char* device_name(Device d) { return d == Device::Cuda ? "cuda" : "cpu"; }

const char* kv_dtype_name(KvDtype d) {
  switch (d) {
    case KvDtype::Fp32: return "fp32";
    case KvDtype::Fp16: return "fp16";
    case KvDtype::Bf16: return "bf16";
  }
  return "?";
}

std::optional<KvDtype> parse_kv_dtype(std::string_view name) {
  for (KvDtype d : {KvDtype::Fp32, KvDtype::Fp16, KvDtype::Bf16})
    if (name == kv_dtype_name(d)) return d;
  return std::nullopt;
}

const char* storage_name(const Model& model, Device device, GpuDtype asked, KvDtype kv) {
  return device == Device::Cuda ? gpu_dtype_name(resolve_gpu_dtype(model, asked)) : kv_dtype_name(kv);
}

std::optional<GpuDtype> parse_gpu_dtype(std::string_view name) {
  for (GpuDtype d : {GpuDtype::Auto, GpuDtype::Fp16, GpuDtype::Bf16, GpuDtype::Fp32})
    if (name == gpu_dtype_name(d)) return d;
  return std::nullopt;
}

Engine::Engine(const Model& model, EngineOptions options) : model_(model), options_(options) {
  check_config(model);
  state_ = std::make_unique<State>(model, options_.rope_in_cache, options_.kv_dtype);
  if (options_.device == Device::Cuda) {
    cuda_ = std::make_unique<CudaBackend>(model, options_);
    return;
  }
  const ModelConfig& c = model.config;
  State& s = *state_;
  s.x.resize(c.dim);
  s.xb.resize(c.dim);
  s.q.resize(c.q_dim());
  s.k.resize(c.kv_dim());
  s.v.resize(c.kv_dim());
  s.att.resize(c.q_dim());
  s.gate.resize(c.hidden_dim);
  s.up.resize(c.hidden_dim);
  s.logits.resize(c.vocab_size);
  s.n_rows.resize(c.n_kv_heads);
  s.head_first.resize(c.n_kv_heads);
  s.head_rows.resize(c.n_kv_heads);
  s.head_pos.resize(c.n_kv_heads);
  s.lse.resize(c.n_heads);
  s.qrot.resize(c.q_dim());
  s.blocks.resize(c.n_heads);
}

Engine::~Engine() = default;

void Engine::set_observer(AttentionObserver* observer) { state_->observer = observer; }
void Engine::set_controller(CacheController* controller) { state_->controller = controller; }

void Engine::reset() {
  if (cuda_) cuda_->reset();
  state_->store.clear();
  state_->pos = 0;
}

void Engine::rewind(int n) {
  if (n < 0 || n > pos()) {
    throw std::logic_error("Engine::rewind: position " + std::to_string(n) + " is not in 0.." + std::to_string(pos()));
  }
  if (cuda_) return cuda_->rewind(n);
  state_->store.truncate(n);
  state_->pos = n;
}

int Engine::pos() const { return cuda_ ? cuda_->pos() : state_->pos; }
KvSlots& Engine::slots() { return cuda_ ? cuda_->slots() : state_->store; }
std::size_t Engine::kv_bytes() const { return cuda_ ? cuda_->kv_bytes() : state_->store.bytes(); }
std::size_t Engine::peak_kv_bytes() const { return cuda_ ? cuda_->peak_kv_bytes() : state_->store.peak_bytes(); }

std::span<const float> Engine::prefill(std::span<const int> tokens) {
  const ModelConfig& c = model_.config;
  const int P = static_cast<int>(tokens.size());
  if (P == 0) throw input_error("prompt", "empty prompt (no tokens)");
  if (P > c.seq_len) {
    throw input_error("prompt", std::to_string(P) + " tokens exceed the model's context of " +
                                    std::to_string(c.seq_len));
  }
  check_tokens(tokens, c.vocab_size, "prompt");
  if (cuda_) return cuda_->prefill(tokens, state_->observer, state_->controller);
  ThreadScope threads(options_.n_threads);
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  const std::size_t panel_floats = ops::key_panel_floats(P, hd);  // one KV head's keys in panels
  // Query rows per attention block handed to observers: by default four of the attention
  // kernel's groups, two per thread on two (64 rows were groups of 18, 18, 18 and 10: one thread
  // did 36 rows, the other 28), whatever the thread count, so observers see the same blocks.
  // Each kernel call takes several blocks (ops::causal_blocks_per_call).
  const int B = std::min(options_.prefill_block > 0 ? options_.prefill_block : 4 * ops::kCausalGroupRows, P);
  const int per_call = ops::causal_blocks_per_call(B, P, omp_get_max_threads());
  const int CB = std::min(per_call * B, P);                     // query rows per kernel call
  reset();
  State& s = *state_;
  const ModelWeights& w = model_.weights;
  const int group = c.group();
  const ops::Scoring score = c.scoring();
  const auto pairing = c.rope_style == RopeStyle::Interleaved ? ops::RopePairing::Interleaved
                                                               : ops::RopePairing::RotateHalf;
  if (s.observer) {
    s.observer->on_begin(c, tokens);
    for (int i = 0; i < P; ++i) s.observer->on_token(i, tokens[i]);
  }
  s.prepare_rope(P);
  // Refused here rather than by std::bad_alloc, or by the out-of-memory killer partway through:
  // the activations below, a call's probabilities and the prompt's K and V in the cache, once
  // the observers have taken what they keep of the prompt.
  const uint64_t activations = static_cast<uint64_t>(P) * (3 * dim + 2 * qd + 5 * kvd + 2 * hid) +
                               static_cast<uint64_t>(c.n_kv_heads) * panel_floats +
                               static_cast<uint64_t>(CB) * (P + 1);
  require_host_memory("prompt (" + std::to_string(P) + " tokens)",
                      4 * activations + KvStore::bytes_for(c.n_layers, c.n_kv_heads, hd, P, s.store.type()),
                      "the prefill's activations and cache on this model");

  std::vector<float> X(static_cast<std::size_t>(P) * dim);    // [P, dim] residual stream
  std::vector<float> XB(static_cast<std::size_t>(P) * dim);   // [P, dim]
  std::vector<float> Q(static_cast<std::size_t>(P) * qd);     // [P, q_dim]
  std::vector<float> K(static_cast<std::size_t>(P) * kvd);    // [P, kv_dim]
  std::vector<float> V(static_cast<std::size_t>(P) * kvd);    // [P, kv_dim]
  std::vector<float> KP(c.n_kv_heads * panel_floats);         // [n_kv_heads, panels, head_dim, kPanelKeys]
  std::vector<float> VH(static_cast<std::size_t>(P) * kvd);   // [n_kv_heads, P, head_dim] V by head
  std::vector<float> ATT(static_cast<std::size_t>(P) * qd);   // [P, q_dim]
  std::vector<float> G(static_cast<std::size_t>(P) * hid);    // [P, hidden_dim]
  std::vector<float> U(static_cast<std::size_t>(P) * hid);    // [P, hidden_dim]
  std::vector<float> probs(static_cast<std::size_t>(CB) * P);  // a call's blocks, [n_s, q0 + ...] each
  std::vector<float> lse(CB);                                   // [CB]

  embed_rows(X.data(), model_, tokens);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    block_input_rows(XB.data(), X.data(), lw.attn_norm, P, c);
    qkv_rows(lw, c, XB.data(), Q.data(), K.data(), V.data(), P);
    // rope_in_cache caches keys before rotation; attention below still uses rotated keys, since
    // during prefill every key's slot in the cache equals its position. Attention reads keys and
    // values as the cache holds them (rounded to a 16-bit cache's type): keys cached at their
    // position rounded after rotation, keys cached before it rounded and then rotated, as decode
    // rotates them.
    round_cache(options_.kv_dtype, V.data(), V.size());
    auto cache_kv = [&] {  // K as the cache keeps it, then into the cache
      round_cache(options_.kv_dtype, K.data(), K.size());
      for (int g = 0; g < c.n_kv_heads; ++g) s.store.append(l, g, 0, P, K.data() + g * hd, V.data() + g * hd, kvd);
    };
    if (options_.rope_in_cache) cache_kv();
    rope_rows(Q.data(), K.data(), P, 0, c, s.rope_of(l), pairing);
    if (!options_.rope_in_cache) cache_kv();

    for (int g = 0; g < c.n_kv_heads; ++g) {  // each head's keys and values contiguous
      ops::pack_key_panels(KP.data() + g * panel_floats, K.data() + g * hd, kvd, P, hd);
      for (int j = 0; j < P; ++j)
        std::copy_n(V.data() + static_cast<std::size_t>(j) * kvd + g * hd, hd,
                    VH.data() + (static_cast<std::size_t>(g) * P + j) * hd);
    }
    for (int h = 0; h < c.n_heads; ++h) {
      const int g = h / group;
      for (int q0 = 0; q0 < P; q0 += CB) {
        const int nq = std::min(CB, P - q0);
        const std::size_t row = static_cast<std::size_t>(q0) * qd + h * hd;
        ops::attend_causal_block(ATT.data() + row, qd, probs.data(), lse.data(), Q.data() + row, qd,
                                 KP.data() + g * panel_floats, VH.data() + static_cast<std::size_t>(g) * P * hd, hd,
                                 q0, nq, hd, c.window(l), score, B);
        if (!s.observer) continue;
        for (int b = 0; b * B < nq; ++b)
          s.observer->on_attention(AttentionBlock::prefill(l, h, q0 + b * B, std::min(B, nq - b * B),
                                                           probs.data() + ops::causal_block_offset(q0, B, b),
                                                           lse.data() + b * B));
      }
    }
    attention_output_rows(lw, c, X.data(), XB.data(), ATT.data(), P);
    ffn_rows(lw, c, X.data(), XB.data(), G.data(), U.data(), P);
  }
  s.pos = P;

  row_logits(s.logits.data(), s.xb.data(), X.data() + static_cast<std::size_t>(P - 1) * dim, model_);
  if (s.observer) s.observer->on_prefill_end(P);
  if (s.controller) s.controller->after_prefill(P, s.store);
  if (s.observer) s.observer->on_logits(P - 1, s.logits);
  return s.logits;
}

std::span<const float> Engine::decode(int token) {
  const ModelConfig& c = model_.config;
  State& s = *state_;
  if (pos() >= c.seq_len) {
    throw input_error("generation", "position " + std::to_string(pos()) +
                                        " exceeds the model's context of " + std::to_string(c.seq_len));
  }
  if (token < 0 || token >= c.vocab_size) {
    throw input_error("token", "id " + std::to_string(token) + " is outside the vocabulary of " +
                                   std::to_string(c.vocab_size));
  }
  if (cuda_) {
    const int pos = cuda_->pos();
    try {
      return cuda_->decode(token, s.observer, s.controller);
    } catch (...) {
      cuda_->rewind(pos);  // layers that took this token's key before a hook threw let it go
      throw;
    }
  }
  const int pos = s.pos;
  if (s.observer) s.observer->on_token(pos, token);
  s.prepare_rope(pos + 1);
  embed_rows(s.x.data(), model_, {&token, 1});
  // Unless told otherwise, a model this small decodes on one thread: its whole token takes less
  // time than waking a second thread.
  constexpr std::size_t kParallelMinBytes = std::size_t{4} << 20;
  int n_threads = options_.n_threads;
  if (n_threads <= 0) n_threads = model_.weight_bytes_per_token() < kParallelMinBytes ? 1 : omp_get_max_threads();
  s.team.resize(n_threads);
  try {
    decode_token(s.team, pos);
  } catch (...) {
    s.store.truncate(pos);  // layers that took this token's key before a hook threw let it go
    throw;
  }
  s.pos = pos + 1;
  if (s.observer) s.observer->on_logits(pos, s.logits);
  return s.logits;
}

std::span<const float> Engine::extend(std::span<const int> tokens) {
  const ModelConfig& c = model_.config;
  State& s = *state_;
  const int n = static_cast<int>(tokens.size()), pos0 = pos();
  if (n == 0) throw input_error("tokens", "nothing to feed (no tokens)");
  if (n > c.seq_len - pos0) {
    throw input_error("generation", "positions " + std::to_string(pos0) + ".." + std::to_string(pos0 + n - 1) +
                                        " exceed the model's context of " + std::to_string(c.seq_len));
  }
  check_tokens(tokens, c.vocab_size, "tokens");
  if (options_.rope_in_cache) {  // one decode step a token, the hooks given what extend gives
    AttentionObserver* const observer = s.observer;
    CacheController* const controller = s.controller;
    RowsAndTokens rows_and_tokens(observer);
    BeforeAttentionOnly before_only(controller);
    s.observer = observer ? &rows_and_tokens : nullptr;
    s.controller = controller ? &before_only : nullptr;
    std::span<const float> logits;
    try {
      for (int t : tokens) logits = decode(t);
    } catch (...) {
      s.observer = observer;
      s.controller = controller;
      rewind(pos0);  // all or nothing: the steps fed are forgotten
      throw;
    }
    s.observer = observer;
    s.controller = controller;
    if (observer) observer->on_logits(pos0 + n - 1, logits);
    return logits;
  }
  try {
    return cuda_ ? cuda_->extend(tokens, s.observer, s.controller) : extend_batched(tokens);
  } catch (...) {
    rewind(pos0);  // layers that took the chunk's keys before the failure let them go
    throw;
  }
}

// Engine::extend on the CPU: the chunk's rows through each layer at once.
std::span<const float> Engine::extend_batched(std::span<const int> tokens) {
  const ModelConfig& c = model_.config;
  State& s = *state_;
  const int n = static_cast<int>(tokens.size()), pos0 = s.pos;
  ThreadScope threads(options_.n_threads);
  const ModelWeights& w = model_.weights;
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  const int group = c.group();
  const ops::Scoring score = c.scoring();
  const auto pairing = c.rope_style == RopeStyle::Interleaved ? ops::RopePairing::Interleaved
                                                               : ops::RopePairing::RotateHalf;
  if (s.observer)
    for (int i = 0; i < n; ++i) s.observer->on_token(pos0 + i, tokens[i]);
  s.prepare_rope(pos0 + n);

  // Queries per attention call: bounds probs to kQueryBlock rows of the longest head's keys.
  constexpr int kQueryBlock = 256;
  std::vector<float> X(static_cast<std::size_t>(n) * dim);    // [n, dim] residual stream
  std::vector<float> XB(static_cast<std::size_t>(n) * dim);   // [n, dim]
  std::vector<float> Q(static_cast<std::size_t>(n) * qd);     // [n, q_dim]
  std::vector<float> K(static_cast<std::size_t>(n) * kvd);    // [n, kv_dim]
  std::vector<float> V(static_cast<std::size_t>(n) * kvd);    // [n, kv_dim]
  std::vector<float> ATT(static_cast<std::size_t>(n) * qd);   // [n, q_dim]
  std::vector<float> G(static_cast<std::size_t>(n) * hid);    // [n, hidden_dim]
  std::vector<float> U(static_cast<std::size_t>(n) * hid);    // [n, hidden_dim]
  std::vector<float> KG;      // [n_rows, head_dim] a KV head's attended keys, gathered
  std::vector<float> VT;      // [head_dim, n_rows] their values, gathered and transposed
  std::vector<float> value(hd);  // [head_dim] one cached value, as fp32
  std::vector<float> probs;   // [min(n, kQueryBlock), n_rows] a call's softmax rows
  std::vector<float> lse(std::min(n, kQueryBlock));  // [min(n, kQueryBlock)]

  embed_rows(X.data(), model_, tokens);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    block_input_rows(XB.data(), X.data(), lw.attn_norm, n, c);
    qkv_rows(lw, c, XB.data(), Q.data(), K.data(), V.data(), n);
    rope_rows(Q.data(), K.data(), n, pos0, c, s.rope_of(l), pairing);
    const int window = c.window(l);
    for (int g = 0; g < c.n_kv_heads; ++g) s.store.append(l, g, pos0, n, K.data() + g * hd, V.data() + g * hd, kvd);
    if (s.controller) s.controller->before_attention(l, pos0, s.store);
    s.gather_active(l, window > 0 ? pos0 - window + 1 : 0);

    for (int g = 0; g < c.n_kv_heads; ++g) {
      const int m = s.n_rows[g];
      const int32_t* rows = s.head_rows[g];
      const int32_t* key_pos = s.head_pos[g];
      KG.resize(static_cast<std::size_t>(m) * hd);
      VT.resize(static_cast<std::size_t>(m) * hd);
      for (int j = 0; j < m; ++j) {
        s.store.read_key(l, g, rows[j], KG.data() + static_cast<std::size_t>(j) * hd);
        s.store.read_value(l, g, rows[j], value.data());
        for (int d = 0; d < hd; ++d) VT[static_cast<std::size_t>(d) * m + j] = value[d];
      }
      probs.resize(static_cast<std::size_t>(lse.size()) * m);
      for (int h = g * group; h < (g + 1) * group; ++h) {
        for (int i0 = 0; i0 < n; i0 += kQueryBlock) {
          const int nq = std::min(kQueryBlock, n - i0);
          const std::size_t at = static_cast<std::size_t>(i0) * qd + static_cast<std::size_t>(h) * hd;
          try {
            ops::attend_gathered_block(ATT.data() + at, qd, probs.data(), lse.data(), Q.data() + at, qd, nq, pos0 + i0,
                                       KG.data(), VT.data(), key_pos, m, hd, window, score);
          } catch (const std::logic_error& e) {  // a controller left a query nothing: say where
            throw std::logic_error("layer " + std::to_string(l) + " KV head " + std::to_string(g) + ": " + e.what());
          }
          if (!s.observer) continue;
          for (int i = 0; i < nq; ++i) {  // each query's row over the keys it read, as a decode row
            int b = 0, e = 0;
            ops::gathered_row_keys(key_pos, m, pos0 + i0 + i, window, &b, &e);
            s.observer->on_attention(AttentionBlock::decode_row(l, h, pos0 + i0 + i, e - b, key_pos + b,
                                                                probs.data() + static_cast<std::size_t>(i) * m + b,
                                                                &lse[i]));
          }
        }
      }
    }
    attention_output_rows(lw, c, X.data(), XB.data(), ATT.data(), n);
    ffn_rows(lw, c, X.data(), XB.data(), G.data(), U.data(), n);
  }
  s.pos = pos0 + n;
  row_logits(s.logits.data(), s.xb.data(), X.data() + static_cast<std::size_t>(n - 1) * dim, model_);
  if (s.observer) s.observer->on_logits(pos0 + n - 1, s.logits);
  return s.logits;
}

// The serial parts (norms, RoPE, the cache, the hooks) here, the rows
// of each product and the heads of attention dealt out to the team.
void Engine::decode_token(DecodeTeam& team, int pos) {
  const ModelConfig& c = model_.config;
  State& s = *state_;
  const ModelWeights& w = model_.weights;
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  const int group = c.group();
  const ops::Scoring score = c.scoring();
  const auto pairing = c.rope_style == RopeStyle::Interleaved ? ops::RopePairing::Interleaved
                                                               : ops::RopePairing::RotateHalf;
  // Weight panels per dealt chunk: 32 rows (96 KiB at dim 768), a short tail at the join.
  constexpr long kPanels = std::max(1, 32 / ops::kPanelRows);
  // The product of the stacked jobs with x[cols], their panels dealt out to the team.
  auto product = [&](std::span<const ops::MatvecJob> jobs, const float* x, int cols) {
    team.parallel(ops::panel_count(jobs), kPanels, [&](long b, long e) { ops::matvec_panels(jobs, x, cols, b, e); });
  };
  // A team chunk of the residual update x[dim] += post(W · in[cols]) (W one of the layer's [dim,
  // cols] matrices, its product staged in xb): panels [b, e), then their rows added into x; where
  // the block has a post norm [dim], which reads the whole product, finish_residual adds it.
  auto residual_chunk = [&](const ops::MatvecJob* job, const float* in, int cols, const WeightVector& post) {
    return [&s, job, in, cols, dim, add = post.empty()](long b, long e) {
      ops::matvec_panels({job, 1}, in, cols, b, e);
      const long r0 = b * ops::kPanelRows, r1 = std::min<long>(e * ops::kPanelRows, dim);
      if (add) add_into(s.x.data() + r0, s.xb.data() + r0, r1 - r0);
    };
  };
  auto finish_residual = [&](const WeightVector& post) {
    if (post.empty()) return;
    ops::rmsnorm(s.xb.data(), s.xb.data(), post.data(), dim, c.rms_eps);
    add_into(s.x.data(), s.xb.data(), dim);
  };

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    block_input_rows(s.xb.data(), s.x.data(), lw.attn_norm, 1, c);
    const ops::MatvecJob qkv[] = {{s.q.data(), lw.wq.weights(), qd},
                                  {s.k.data(), lw.wk.weights(), kvd},
                                  {s.v.data(), lw.wv.weights(), kvd}};
    product(qkv, s.xb.data(), dim);
    if (!lw.bq.empty()) ops::add_bias(s.q.data(), lw.bq.data(), 1, qd);
    if (!lw.bk.empty()) ops::add_bias(s.k.data(), lw.bk.data(), 1, kvd);
    if (!lw.bv.empty()) ops::add_bias(s.v.data(), lw.bv.data(), 1, kvd);
    norm_heads(lw, c, s.q.data(), s.k.data(), 1);
    if (!options_.rope_in_cache) {
      const ops::RopeTable& rope = s.rope_of(l);
      ops::rope_apply(s.q.data(), c.n_heads, hd, rope.cos(pos), rope.sin(pos), pairing);
      ops::rope_apply(s.k.data(), c.n_kv_heads, hd, rope.cos(pos), rope.sin(pos), pairing);
    }
    for (int g = 0; g < c.n_kv_heads; ++g) {
      s.store.append(l, g, pos, 1, s.k.data() + g * hd, s.v.data() + g * hd, hd);
    }
    if (s.controller) s.controller->before_attention(l, pos, s.store);
    s.gather_active(l, c.window(l) > 0 ? pos - c.window(l) + 1 : 0);
    if (options_.rope_in_cache) s.rotate_by_slot(l, pairing);

    // Attention in (KV head, key range) pieces: a KV head's query heads share each range's keys
    // and values (read from memory once, not once per query head), and long contexts split into
    // enough pieces to keep every thread busy. Ranges are fixed at kRangeKeys keys, so results do
    // not depend on the thread count. A KV head with one range is finished in its piece; longer
    // ones are combined per query head by whichever thread finishes the KV head's last range, so
    // the layer needs no second join.
    constexpr int kRangeKeys = 512;
    const float* queries = options_.rope_in_cache ? s.qrot.data() : s.q.data();
    const int max_ranges = (s.cap + kRangeKeys - 1) / kRangeKeys;
    auto n_ranges = [&](int g) { return (s.n_rows[g] + kRangeKeys - 1) / kRangeKeys; };
    s.ranges.clear();
    for (int g = 0; g < c.n_kv_heads; ++g) {
      for (int r = 0; r < n_ranges(g); ++r) s.ranges.emplace_back(g, r);
      s.ranges_left[g].store(n_ranges(g), std::memory_order_relaxed);
    }
    s.part_out.resize(static_cast<std::size_t>(c.n_heads) * max_ranges * hd);
    s.part_m.resize(static_cast<std::size_t>(c.n_heads) * max_ranges);
    s.part_l.resize(static_cast<std::size_t>(c.n_heads) * max_ranges);
    auto merge = [&](int h) {
      const int g = h / group;
      const std::size_t at = static_cast<std::size_t>(h) * max_ranges;
      s.lse[h] = ops::attend_rows_merge(s.att.data() + static_cast<std::size_t>(h) * hd,
                                        s.probs.data() + static_cast<std::size_t>(h) * s.cap, s.n_rows[g], kRangeKeys,
                                        s.part_out.data() + at * hd, s.part_m.data() + at, s.part_l.data() + at,
                                        n_ranges(g), hd);
    };
    auto keys_of = [&](int g) {
      return options_.rope_in_cache ? ops::RowData{s.krot.data() + static_cast<std::size_t>(g) * s.cap * hd, ops::RowType::F32}
                                    : s.store.keys(l, g);
    };
    team.parallel(static_cast<long>(s.ranges.size()), 1, [&](long t0, long t1) {
      for (long t = t0; t < t1; ++t) {
        const auto [g, r] = s.ranges[t];
        const ops::RowData keys = keys_of(g);
        // A thread walks its part of the pieces in order: piece t + 1 is most likely its next.
        const void* next_keys = nullptr;
        if (t + 1 < static_cast<long>(s.ranges.size())) {
          const auto [gn, rn] = s.ranges[t + 1];
          const ops::RowData next = keys_of(gn);
          const std::size_t row = static_cast<std::size_t>(s.head_rows[gn][rn * kRangeKeys]);
          next_keys = static_cast<const std::byte*>(next.data) + row * hd * KvStore::element_bytes(next.type);
        }
        const int h0 = g * group;
        const std::size_t at = static_cast<std::size_t>(h0) * max_ranges + r;
        ops::attend_rows_part(s.part_out.data() + at * hd, static_cast<long>(max_ranges) * hd,
                              s.probs.data() + static_cast<std::size_t>(h0) * s.cap, s.cap, s.part_m.data() + at,
                              s.part_l.data() + at, max_ranges, queries + static_cast<std::size_t>(h0) * hd, group,
                              keys, s.store.values(l, g), s.head_rows[g],
                              r * kRangeKeys, std::min(s.n_rows[g], (r + 1) * kRangeKeys), hd, score, next_keys);
        // acq_rel: the last range's thread sees the other ranges' parts before merging them.
        if (s.ranges_left[g].fetch_sub(1, std::memory_order_acq_rel) == 1)
          for (int h = h0; h < h0 + group; ++h) merge(h);
      }
    });

    // The hooks see the rows while the team starts on the output projection, which reads neither
    // the probabilities nor the cache.
    const ops::MatvecJob wo{s.xb.data(), lw.wo.weights(), dim};
    team.parallel(
        ops::panel_count(dim), kPanels, residual_chunk(&wo, s.att.data(), qd, lw.post_attn_norm),
        [&] {
          const bool observer_rows = s.observer && s.observer->needs_decode_rows();
          const bool controller_rows = s.controller && s.controller->needs_decode_rows(l);
          const KeyRanking ranking = s.controller ? s.controller->key_ranking(l) : KeyRanking{};
          const std::optional<ops::GroupReduce> reduce =
              s.controller ? s.controller->group_rows(l) : std::nullopt;
          const bool any = observer_rows || controller_rows || ranking.k > 0 || reduce;
          for (int h = 0; h < c.n_heads && any; ++h) {
            const int g = h / group;
            s.blocks[h] = AttentionBlock::decode_row(l, h, pos, s.n_rows[g], s.head_pos[g],
                                                     s.probs.data() + static_cast<std::size_t>(h) * s.cap, &s.lse[h]);
            if (observer_rows) s.observer->on_attention(s.blocks[h]);
          }
          if (ranking.k > 0) s.controller->on_key_ranking(l, pos, rank_keys(s.blocks, ranking));
          if (reduce) s.controller->on_group_rows(l, pos, s.group_rows.reduce(s.blocks, c.n_kv_heads, *reduce));
          if (s.controller)
            s.controller->after_attention(l, pos, controller_rows ? std::span<const AttentionBlock>(s.blocks)
                                                                  : std::span<const AttentionBlock>(), s.store);
        });
    finish_residual(lw.post_attn_norm);

    block_input_rows(s.xb.data(), s.x.data(), lw.ffn_norm, 1, c);
    // Gate and up rows stacked: each thread streams one matrix part, not two in turns.
    const ops::MatvecJob gate_up[] = {{s.gate.data(), lw.w_gate.weights(), hid}, {s.up.data(), lw.w_up.weights(), hid}};
    product(gate_up, s.xb.data(), dim);
    gate_row(c, s.gate.data(), s.up.data(), hid);
    const ops::MatvecJob down{s.xb.data(), lw.w_down.weights(), dim};
    team.parallel(ops::panel_count(dim), kPanels, residual_chunk(&down, s.gate.data(), hid, lw.post_ffn_norm));
    finish_residual(lw.post_ffn_norm);
  }

  ops::rmsnorm(s.xb.data(), s.x.data(), w.final_norm.data(), dim, c.rms_eps);
  const ops::MatvecJob classifier[] = {{s.logits.data(), model_.classifier().weights(), c.vocab_size}};
  product(classifier, s.xb.data(), dim);
  ops::softcap(s.logits.data(), c.vocab_size, c.final_softcap);
}

}  // namespace kvs
