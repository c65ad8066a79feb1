// CudaBackend: the Llama-family forward pass on the GPU. Weights and the KV cache are fp16 on the
// device; activations, accumulation and softmax fp32. Decode projections are a matvec kernel
// (fp16 weights read once, fp32 inputs). Prefill projections are cuBLAS GEMMs (fp16 inputs, fp32
// output and compute) by the activations split into high and low halves, so that rounding the
// activations to fp16 costs no accuracy; prefill attention is computed a block of query rows at a
// time (scores and P·V by batched GEMMs, the same split, a causal softmax kernel between), so
// memory stays bounded at any prompt length. Hooks get exactly what the CPU engine gives them.
#include "inference/cuda_backend.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "inference/cuda_device.h"
#include "inference/cuda_kv_cache.h"
#include "kernels/cuda_ops.h"
#include "kernels/rope.h"

namespace kvs {
namespace {

void blas_check(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(st));
}

// Y[n, rows] (+)= X[n, cols] · W[rows, cols]^T, row-major, with X given as its high and low
// halves [n, cols] each (cuda::split_half); beta 0 overwrites, 1 accumulates.
void gemm(cublasHandle_t blas, float* y, const __half* x_hi, const __half* x_lo, const __half* w,
          int n, int rows, int cols, float beta) {
  const float alpha = 1.0f, one = 1.0f;
  for (const __half* x : {x_hi, x_lo}) {
    blas_check(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, CUDA_R_16F, cols,
                            x, CUDA_R_16F, cols, x == x_hi ? &beta : &one, y, CUDA_R_32F, rows,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "projection");
  }
}

struct DeviceLayer {
  cuda::DeviceBuffer<float> attn_norm, ffn_norm;  // [dim]
  cuda::DeviceBuffer<float> bq, bk, bv;           // [q_dim], [kv_dim], [kv_dim] or empty
  cuda::DeviceBuffer<__half> wq;                  // [q_dim, dim]
  cuda::DeviceBuffer<__half> wk, wv;              // [kv_dim, dim]
  cuda::DeviceBuffer<__half> wo;                  // [dim, q_dim]
  cuda::DeviceBuffer<__half> w_gate, w_up;        // [hidden_dim, dim]
  cuda::DeviceBuffer<__half> w_down;              // [dim, hidden_dim]
};

long round_up(long n, long m) { return (n + m - 1) / m * m; }

// The stream and the cuBLAS handle, released even when the constructor throws later on.
struct StreamDeleter {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct BlasDeleter {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
using StreamHandle = std::unique_ptr<CUstream_st, StreamDeleter>;
using BlasHandle = std::unique_ptr<cublasContext, BlasDeleter>;
using EventHandle = std::unique_ptr<CUevent_st, EventDeleter>;

}  // namespace

bool cuda_usable(std::string* why) { return cuda::gpu_present(why); }

struct CudaBackend::Impl {
  Impl(const Model& m, const EngineOptions& o);
  ~Impl();

  const Model& model;
  const ModelConfig& c;
  EngineOptions options;
  StreamHandle stream_handle, copy_stream_handle;
  BlasHandle blas_handle;
  cudaStream_t stream = nullptr;       // stream_handle's: all compute
  cudaStream_t copy_stream = nullptr;  // copy_stream_handle's: decode rows to the host
  cublasHandle_t blas = nullptr;       // blas_handle's
  std::vector<EventHandle> attended;   // [n_layers] recorded when a layer's decode rows are ready
  std::size_t weight_bytes = 0;

  // Weights.
  cuda::DeviceBuffer<__half> embedding;   // [vocab, dim]
  cuda::DeviceBuffer<__half> classifier;  // [vocab, dim]; empty when tied to the embedding
  cuda::DeviceBuffer<float> final_norm;   // [dim]
  std::vector<DeviceLayer> layers;        // [n_layers]
  cuda::DeviceBuffer<float> rope_cos, rope_sin;  // [seq_len, head_dim/2]
  cuda::DeviceBuffer<int32_t> iota;              // [seq_len] 0, 1, 2, ...

  std::unique_ptr<CudaKvCache> cache;
  int pos = 0;

  // Decode activations.
  cuda::DeviceBuffer<float> x, xb;         // [dim]
  cuda::DeviceBuffer<float> q, att;        // [q_dim]
  cuda::DeviceBuffer<float> k, v;          // [kv_dim]
  cuda::DeviceBuffer<float> gate, up;      // [hidden_dim]
  cuda::DeviceBuffer<float> logits;        // [vocab]
  // Decode attention rows of every layer, grown with the context (rows_cap >= every head's
  // held count); copied to pinned memory on copy_stream only when a hook listens.
  int rows_cap = 0;
  int host_rows_cap = 0;
  cuda::DeviceBuffer<float> probs;         // [n_layers, n_heads, rows_cap]
  cuda::DeviceBuffer<float> lse;           // [n_layers, n_heads]
  cuda::DeviceBuffer<float> att_scratch;   // attend_decode's scratch at seq_len rows
  // Per-layer step metadata: slot0 [n_kv], n_rows [n_kv], qslot [n_heads], rows [n_kv, seq_len]
  // at layer * meta_stride; written on the host (pinned) and copied before use.
  long meta_stride = 0;
  cuda::DeviceBuffer<int32_t> meta;        // [n_layers, meta_stride]
  cuda::PinnedBuffer<int32_t> meta_host;   // [n_layers, meta_stride]
  cuda::PinnedBuffer<int32_t> token_host;  // [1]
  cuda::DeviceBuffer<int32_t> token;       // [1]
  cuda::PinnedBuffer<float> logits_host;   // [vocab]
  cuda::PinnedBuffer<float> probs_host;    // [n_layers, n_heads, host_rows_cap], layer l packed as
                                           // [n_heads, layer_max_rows[l]]
  cuda::PinnedBuffer<float> lse_host;      // [n_layers, n_heads]
  std::vector<int32_t> key_pos;            // [n_layers, n_kv, host_rows_cap] attended positions
  std::vector<int32_t> layer_rows;         // [n_layers, n_kv] attended rows per KV head
  std::vector<int> layer_max_rows;         // [n_layers]
  std::vector<AttentionBlock> blocks;      // [n_heads]
  std::vector<float> logits_out;           // [vocab]

  void upload_weights();
  void upload(float* dst, const WeightVector& src, const char* what);
  cuda::DeviceBuffer<__half> upload_half(const WeightVector& src, const char* what);
  void sync() { cuda::check(cudaStreamSynchronize(stream), "stream"); }
  int32_t* meta_at(int layer) const { return meta.get() + layer * meta_stride; }
  int32_t* meta_host_at(int layer) const { return meta_host.get() + layer * meta_stride; }
  void copy_meta(int layer, long offset, long n) {
    cuda::check(cudaMemcpyAsync(meta_at(layer) + offset, meta_host_at(layer) + offset,
                                n * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
                "upload of step metadata");
  }
  void logits_to_host(const float* x_last);
  void ensure_rows(int needed, bool to_host);
  void deliver_rows(int layer, int q_pos, AttentionObserver* observer, CacheController* controller);

  std::span<const float> prefill(std::span<const int> tokens, AttentionObserver* observer,
                                 CacheController* controller);
  std::span<const float> decode(int token, AttentionObserver* observer, CacheController* controller);
};

CudaBackend::Impl::Impl(const Model& m, const EngineOptions& o) : model(m), c(m.config), options(o) {
  std::string why;
  if (!cuda::gpu_present(&why)) throw std::runtime_error("CUDA: no usable GPU (" + why + ")");
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream creation");
  stream_handle.reset(stream);
  cuda::check(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking), "stream creation");
  copy_stream_handle.reset(copy_stream);
  for (int l = 0; l < m.config.n_layers; ++l) {
    cudaEvent_t e = nullptr;
    cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event creation");
    attended.emplace_back(e);
  }
  blas_check(cublasCreate(&blas), "handle creation");
  blas_handle.reset(blas);
  blas_check(cublasSetStream(blas, stream), "stream binding");
  upload_weights();
  // The cache's rows grow with the sequence; the tables below are sized for the whole context,
  // on the device before on the host, so that a context too long fails as out of GPU memory.
  cache = std::make_unique<CudaKvCache>(c.n_layers, c.n_kv_heads, c.head_dim, c.seq_len, stream);

  const int half = c.head_dim / 2, L = c.n_layers, n_kv = c.n_kv_heads, H = c.n_heads;
  rope_cos = cuda::DeviceBuffer<float>(static_cast<std::size_t>(c.seq_len) * half, "RoPE cos table");
  rope_sin = cuda::DeviceBuffer<float>(static_cast<std::size_t>(c.seq_len) * half, "RoPE sin table");
  iota = cuda::DeviceBuffer<int32_t>(c.seq_len, "position table");
  ops::RopeTable table(rope_inv_freq(m));
  table.reserve(c.seq_len);
  cuda::check(cudaMemcpy(rope_cos.get(), table.cos(0), rope_cos.bytes(), cudaMemcpyHostToDevice), "RoPE upload");
  cuda::check(cudaMemcpy(rope_sin.get(), table.sin(0), rope_sin.bytes(), cudaMemcpyHostToDevice), "RoPE upload");
  std::vector<int32_t> counting(c.seq_len);
  std::iota(counting.begin(), counting.end(), 0);
  cuda::check(cudaMemcpy(iota.get(), counting.data(), iota.bytes(), cudaMemcpyHostToDevice), "position upload");

  x = cuda::DeviceBuffer<float>(c.dim, "activations");
  xb = cuda::DeviceBuffer<float>(c.dim, "activations");
  q = cuda::DeviceBuffer<float>(c.q_dim(), "activations");
  att = cuda::DeviceBuffer<float>(c.q_dim(), "activations");
  k = cuda::DeviceBuffer<float>(c.kv_dim(), "activations");
  v = cuda::DeviceBuffer<float>(c.kv_dim(), "activations");
  gate = cuda::DeviceBuffer<float>(c.hidden_dim, "activations");
  up = cuda::DeviceBuffer<float>(c.hidden_dim, "activations");
  logits = cuda::DeviceBuffer<float>(c.vocab_size, "logits");
  lse = cuda::DeviceBuffer<float>(static_cast<std::size_t>(L) * H, "attention rows");
  att_scratch = cuda::DeviceBuffer<float>(cuda::attend_decode_scratch_floats(H, c.seq_len, c.head_dim),
                                          "attention scratch");
  meta_stride = round_up(2L * n_kv + H + static_cast<long>(n_kv) * c.seq_len, 32);
  meta = cuda::DeviceBuffer<int32_t>(static_cast<std::size_t>(L) * meta_stride, "step metadata");
  meta_host = cuda::PinnedBuffer<int32_t>(static_cast<std::size_t>(L) * meta_stride, "step metadata");
  token_host = cuda::PinnedBuffer<int32_t>(1, "token");
  token = cuda::DeviceBuffer<int32_t>(1, "token");
  logits_host = cuda::PinnedBuffer<float>(c.vocab_size, "logits");
  lse_host = cuda::PinnedBuffer<float>(static_cast<std::size_t>(L) * H, "attention rows");
  layer_rows.resize(static_cast<std::size_t>(L) * n_kv);
  layer_max_rows.resize(L);
  blocks.resize(H);
  logits_out.resize(c.vocab_size);
  // The tables above were copied from pageable memory on the legacy stream, which `stream` does
  // not wait for.
  cuda::check(cudaDeviceSynchronize(), "table upload");
}

CudaBackend::Impl::~Impl() {
  cudaStreamSynchronize(stream);
  cudaStreamSynchronize(copy_stream);
}

// Grows the decode row buffers to `needed` rows per head (the device ones always, the host ones
// when a hook will read them); waits for both streams first, since the old buffers may be in use.
void CudaBackend::Impl::ensure_rows(int needed, bool to_host) {
  const std::size_t lh = static_cast<std::size_t>(c.n_layers) * c.n_heads;
  if (needed > rows_cap) {
    sync();
    cuda::check(cudaStreamSynchronize(copy_stream), "copy stream");
    rows_cap = std::min(c.seq_len, std::max({needed, 2 * rows_cap, 256}));
    probs = cuda::DeviceBuffer<float>(lh * rows_cap, "attention rows");
  }
  if (to_host && host_rows_cap < rows_cap) {
    cuda::check(cudaStreamSynchronize(copy_stream), "copy stream");
    probs_host = cuda::PinnedBuffer<float>(lh * rows_cap, "attention rows");
    key_pos.resize(static_cast<std::size_t>(c.n_layers) * c.n_kv_heads * rows_cap);
    host_rows_cap = rows_cap;
  }
}

// Hands layer `layer`'s decode rows (already on the host) to the observer, then the controller.
void CudaBackend::Impl::deliver_rows(int layer, int q_pos, AttentionObserver* observer,
                                     CacheController* controller) {
  const int H = c.n_heads, n_kv = c.n_kv_heads, group = c.group();
  const int max_rows = layer_max_rows[layer];
  const float* probs_l = probs_host.get() + static_cast<std::size_t>(layer) * H * host_rows_cap;  // [H, max_rows]
  for (int h = 0; h < H; ++h) {
    const int g = h / group;
    AttentionBlock& b = blocks[h];
    b.layer = layer;
    b.head = h;
    b.q_pos0 = q_pos;
    b.n_q = 1;
    b.n_keys = layer_rows[static_cast<std::size_t>(layer) * n_kv + g];
    b.key_pos = key_pos.data() + (static_cast<std::size_t>(layer) * n_kv + g) * host_rows_cap;
    b.probs = probs_l + static_cast<std::size_t>(h) * max_rows;
    b.lse = lse_host.get() + static_cast<std::size_t>(layer) * H + h;
    b.decode = true;
    if (observer) observer->on_attention(b);
  }
  if (controller) controller->after_attention(layer, q_pos, blocks, *cache);
}

void CudaBackend::Impl::upload(float* dst, const WeightVector& src, const char* what) {
  cuda::check(cudaMemcpy(dst, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice), what);
}

cuda::DeviceBuffer<__half> CudaBackend::Impl::upload_half(const WeightVector& src, const char* what) {
  cuda::DeviceBuffer<__half> out(src.size(), what);
  constexpr std::size_t kChunk = std::size_t{16} << 20;  // floats staged per copy
  cuda::DeviceBuffer<float> staging(std::min(kChunk, src.size()), "weight upload staging");
  for (std::size_t i = 0; i < src.size(); i += kChunk) {
    const std::size_t n = std::min(kChunk, src.size() - i);
    cuda::check(cudaMemcpy(staging.get(), src.data() + i, n * sizeof(float), cudaMemcpyHostToDevice), what);
    cuda::to_half(out.get() + i, staging.get(), static_cast<long>(n), nullptr);
    cuda::check(cudaDeviceSynchronize(), what);
  }
  weight_bytes += out.bytes();
  return out;
}

void CudaBackend::Impl::upload_weights() {
  const ModelWeights& w = model.weights;
  auto floats = [&](const WeightVector& src, const char* what) {
    cuda::DeviceBuffer<float> out(src.size(), what);
    if (!src.empty()) upload(out.get(), src, what);
    weight_bytes += out.bytes();
    return out;
  };
  embedding = upload_half(w.token_embedding, "the token embedding");
  if (!c.tied_classifier) classifier = upload_half(w.classifier, "the classifier");
  final_norm = floats(w.final_norm, "the final norm");
  layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    DeviceLayer& d = layers[l];
    d.attn_norm = floats(lw.attn_norm, "a norm weight");
    d.ffn_norm = floats(lw.ffn_norm, "a norm weight");
    d.bq = floats(lw.bq, "a bias");
    d.bk = floats(lw.bk, "a bias");
    d.bv = floats(lw.bv, "a bias");
    d.wq = upload_half(lw.wq, "an attention weight");
    d.wk = upload_half(lw.wk, "an attention weight");
    d.wv = upload_half(lw.wv, "an attention weight");
    d.wo = upload_half(lw.wo, "an attention weight");
    d.w_gate = upload_half(lw.w_gate, "an FFN weight");
    d.w_up = upload_half(lw.w_up, "an FFN weight");
    d.w_down = upload_half(lw.w_down, "an FFN weight");
  }
}

// Final norm of the last position's residual x_last [dim], the classifier, and the copy back.
void CudaBackend::Impl::logits_to_host(const float* x_last) {
  cuda::rmsnorm_rows(xb.get(), x_last, final_norm.get(), 1, c.dim, c.rms_eps, stream);
  cuda::matvec_half(logits.get(), c.tied_classifier ? embedding.get() : classifier.get(), xb.get(),
                    c.vocab_size, c.dim, 0.0f, stream);
  cuda::check(cudaMemcpyAsync(logits_host.get(), logits.get(), logits.bytes(), cudaMemcpyDeviceToHost, stream),
              "logits copy");
  sync();
  std::copy_n(logits_host.get(), c.vocab_size, logits_out.begin());
}

std::span<const float> CudaBackend::Impl::prefill(std::span<const int> tokens, AttentionObserver* observer,
                                                  CacheController* controller) {
  const int P = static_cast<int>(tokens.size());
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  const int H = c.n_heads, n_kv = c.n_kv_heads, group = c.group();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const bool interleaved = c.rope_style == RopeStyle::Interleaved;
  cache->clear();
  pos = 0;
  if (observer) {
    observer->on_begin(c, tokens);
    for (int i = 0; i < P; ++i) observer->on_token(i, tokens[i]);
  }
  const PrefillNeed need = observer ? observer->prefill_need() : PrefillNeed{false, 0, 0};
  const bool want_rows = observer && need.rows;
  const bool want_summary = observer && !need.rows;
  const int W = want_summary ? std::max(1, std::min(need.window, P)) : 0;
  const int pool = want_summary ? std::clamp(need.pool_block, 0, P) : 0;  // 0: no pooled map
  const int nb = pool > 0 ? (P + pool - 1) / pool : 0;

  // Query rows per attention block: scores of every head within a fixed budget (and, when the
  // rows go to the host, within a smaller pinned one).
  const long ld = round_up(P, 8);
  const long per_row = static_cast<long>(H) * ld;  // score floats per block row
  long B = std::max(1L, (256L << 20) / (per_row * 8));  // S fp32 + two fp16 halves
  if (want_rows) B = std::min(B, std::max(1L, (64L << 20) / (per_row * 4)));
  B = std::min<long>(B, P);

  const std::size_t Pz = P;
  cuda::DeviceBuffer<int32_t> ids(Pz, "prompt tokens");
  cuda::DeviceBuffer<float> X(Pz * dim, "prefill activations");    // [P, dim] residual stream
  cuda::DeviceBuffer<float> XB(Pz * dim, "prefill activations");   // [P, dim]
  cuda::DeviceBuffer<__half> XB16(Pz * dim, "prefill activations");    // [P, dim] high half
  cuda::DeviceBuffer<__half> XB16lo(Pz * dim, "prefill activations");  // [P, dim] low half
  cuda::DeviceBuffer<float> Q(Pz * qd, "prefill activations");       // [P, q_dim]
  cuda::DeviceBuffer<__half> Q16(Pz * qd, "prefill activations");    // [P, q_dim] high half
  cuda::DeviceBuffer<__half> Q16lo(Pz * qd, "prefill activations");  // [P, q_dim] low half
  cuda::DeviceBuffer<float> K(Pz * kvd, "prefill activations");    // [P, kv_dim]
  cuda::DeviceBuffer<float> V(Pz * kvd, "prefill activations");    // [P, kv_dim]
  cuda::DeviceBuffer<__half> K16(Pz * kvd, "prefill activations");  // [P, kv_dim]
  cuda::DeviceBuffer<__half> V16(Pz * kvd, "prefill activations");  // [P, kv_dim]
  cuda::DeviceBuffer<float> ATT(Pz * qd, "prefill activations");    // [P, q_dim]
  cuda::DeviceBuffer<__half> ATT16(Pz * qd, "prefill activations");    // [P, q_dim] high half
  cuda::DeviceBuffer<__half> ATT16lo(Pz * qd, "prefill activations");  // [P, q_dim] low half
  cuda::DeviceBuffer<float> G(Pz * hid, "prefill activations");    // [P, hidden_dim]
  cuda::DeviceBuffer<float> U(Pz * hid, "prefill activations");    // [P, hidden_dim]
  cuda::DeviceBuffer<__half> G16(Pz * hid, "prefill activations");    // [P, hidden_dim] high half
  cuda::DeviceBuffer<__half> G16lo(Pz * hid, "prefill activations");  // [P, hidden_dim] low half
  cuda::DeviceBuffer<float> S(B * per_row, "prefill attention scores");        // [H, nq <= B, ld]
  cuda::DeviceBuffer<__half> S16(B * per_row, "prefill attention scores");     // [H, nq <= B, ld] high
  cuda::DeviceBuffer<__half> S16lo(B * per_row, "prefill attention scores");   // [H, nq <= B, ld] low
  cuda::DeviceBuffer<float> S_lse(B * H, "prefill attention scores");          // [H, nq <= B]
  cuda::DeviceBuffer<int32_t> slot0(n_kv, "prefill cache slots");              // [n_kv] zeros
  cuda::DeviceBuffer<float> colsum, window, window_lse, pooled;                // device reductions
  cuda::PinnedBuffer<float> colsum_host, window_host, window_lse_host, pooled_host;
  if (want_summary) {
    colsum = cuda::DeviceBuffer<float>(static_cast<std::size_t>(H) * P, "prefill column sums");  // [H, P]
    window = cuda::DeviceBuffer<float>(static_cast<std::size_t>(H) * W * P, "prefill window");  // [H, W, P]
    window_lse = cuda::DeviceBuffer<float>(static_cast<std::size_t>(H) * W, "prefill window");  // [H, W]
    colsum_host = cuda::PinnedBuffer<float>(colsum.size(), "prefill column sums");
    window_host = cuda::PinnedBuffer<float>(window.size(), "prefill window");
    window_lse_host = cuda::PinnedBuffer<float>(window_lse.size(), "prefill window");
    if (pool > 0) {
      pooled = cuda::DeviceBuffer<float>(static_cast<std::size_t>(H) * nb * nb, "prefill pooled map");  // [H, nb, nb]
      pooled_host = cuda::PinnedBuffer<float>(pooled.size(), "prefill pooled map");
    }
  }
  cuda::PinnedBuffer<float> rows_host, rows_lse_host;
  if (want_rows) {
    rows_host = cuda::PinnedBuffer<float>(B * per_row, "prefill attention rows");  // [H, nq, n_keys]
    rows_lse_host = cuda::PinnedBuffer<float>(B * H, "prefill attention rows");     // [H, nq]
  }

  std::vector<int32_t> ids_host(tokens.begin(), tokens.end());
  cuda::check(cudaMemcpyAsync(ids.get(), ids_host.data(), Pz * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
              "prompt upload");
  cuda::check(cudaMemsetAsync(slot0.get(), 0, slot0.bytes(), stream), "prefill cache slots");
  cuda::embed_rows(X.get(), embedding.get(), ids.get(), P, dim, stream);

  const float one = 1.0f, zero = 0.0f;
  for (int l = 0; l < c.n_layers; ++l) {
    const DeviceLayer& lw = layers[l];
    cuda::rmsnorm_rows(XB.get(), X.get(), lw.attn_norm.get(), P, dim, c.rms_eps, stream);
    cuda::split_half(XB16.get(), XB16lo.get(), XB.get(), static_cast<long>(Pz * dim), stream);
    gemm(blas, Q.get(), XB16.get(), XB16lo.get(), lw.wq.get(), P, qd, dim, 0.0f);
    gemm(blas, K.get(), XB16.get(), XB16lo.get(), lw.wk.get(), P, kvd, dim, 0.0f);
    gemm(blas, V.get(), XB16.get(), XB16lo.get(), lw.wv.get(), P, kvd, dim, 0.0f);
    if (lw.bq.size()) cuda::add_bias(Q.get(), lw.bq.get(), P, qd, stream);
    if (lw.bk.size()) cuda::add_bias(K.get(), lw.bk.get(), P, kvd, stream);
    if (lw.bv.size()) cuda::add_bias(V.get(), lw.bv.get(), P, kvd, stream);
    // rope_in_cache caches keys before rotation; attention still uses rotated keys, since during
    // prefill every key's slot equals its position.
    auto cache_kv = [&] {
      for (int g = 0; g < n_kv; ++g) cache->push(l, g, 0, P);
      cuda::kv_append(cache->keys(l), cache->values(l), cache->head_stride(), K.get(), V.get(), kvd, P,
                      n_kv, hd, slot0.get(), stream);
    };
    if (options.rope_in_cache) cache_kv();
    cuda::rope_rows(Q.get(), qd, P, H, hd, iota.get(), rope_cos.get(), rope_sin.get(), interleaved, stream);
    cuda::rope_rows(K.get(), kvd, P, n_kv, hd, iota.get(), rope_cos.get(), rope_sin.get(), interleaved, stream);
    if (!options.rope_in_cache) cache_kv();
    cuda::split_half(Q16.get(), Q16lo.get(), Q.get(), static_cast<long>(Pz * qd), stream);
    cuda::to_half(K16.get(), K.get(), static_cast<long>(Pz * kvd), stream);  // as the cache holds them
    cuda::to_half(V16.get(), V.get(), static_cast<long>(Pz * kvd), stream);

    for (int q0 = 0; q0 < P; q0 += static_cast<int>(B)) {
      const int nq = static_cast<int>(std::min<long>(B, P - q0));
      const int n_keys = q0 + nq;
      const long head_block = static_cast<long>(nq) * ld;  // floats of one head's rows in S
      // Heads g * group + r for g = 0..n_kv-1 form one strided batch per r.
      for (int r = 0; r < group; ++r) {
        // S_h[nq, n_keys] = scale * Q_h[nq, hd] · K_g[n_keys, hd]^T, Q as its high then low half
        for (const __half* q_half : {Q16.get(), Q16lo.get()}) {
          blas_check(cublasGemmStridedBatchedEx(
                         blas, CUBLAS_OP_T, CUBLAS_OP_N, n_keys, nq, hd, &scale, K16.get(), CUDA_R_16F, kvd, hd,
                         q_half + static_cast<std::size_t>(q0) * qd + r * hd, CUDA_R_16F, qd,
                         static_cast<long long>(group) * hd, q_half == Q16.get() ? &zero : &one,
                         S.get() + r * head_block, CUDA_R_32F, ld, group * head_block, n_kv, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
                     "prefill scores");
        }
      }
      cuda::softmax_causal(S.get(), S_lse.get(), H, nq, n_keys, ld, q0, stream);
      cuda::split_half(S16.get(), S16lo.get(), S.get(), H * head_block, stream);
      for (int r = 0; r < group; ++r) {
        // ATT_h[nq, hd] = P_h[nq, n_keys] · V_g[n_keys, hd], P as its high then low half
        for (const __half* p_half : {S16.get(), S16lo.get()}) {
          blas_check(cublasGemmStridedBatchedEx(
                         blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, nq, n_keys, &one, V16.get(), CUDA_R_16F, kvd, hd,
                         p_half + r * head_block, CUDA_R_16F, ld, group * head_block,
                         p_half == S16.get() ? &zero : &one, ATT.get() + static_cast<std::size_t>(q0) * qd + r * hd,
                         CUDA_R_32F, qd, static_cast<long long>(group) * hd, n_kv, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
                     "prefill attention output");
        }
      }
      if (want_summary) {
        if (q0 == 0) cuda::check(cudaMemsetAsync(colsum.get(), 0, colsum.bytes(), stream), "column sums");
        cuda::colsum_add(colsum.get(), P, S.get(), H, nq, n_keys, ld, stream);
        cuda::window_rows(window.get(), window_lse.get(), S.get(), S_lse.get(), H, nq, n_keys, ld, q0, P, W, stream);
        if (pool > 0) {
          if (q0 == 0) cuda::check(cudaMemsetAsync(pooled.get(), 0, pooled.bytes(), stream), "pooled map");
          cuda::pool_add(pooled.get(), S.get(), H, nq, n_keys, ld, q0, P, pool, stream);
        }
      }
      if (want_rows) {
        // Rows packed to [H, nq, n_keys] as AttentionBlock wants them.
        cuda::check(cudaMemcpy2DAsync(rows_host.get(), n_keys * sizeof(float), S.get(), ld * sizeof(float),
                                      n_keys * sizeof(float), static_cast<std::size_t>(H) * nq,
                                      cudaMemcpyDeviceToHost, stream),
                    "prefill rows copy");
        cuda::check(cudaMemcpyAsync(rows_lse_host.get(), S_lse.get(), static_cast<std::size_t>(H) * nq * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream),
                    "prefill rows copy");
        sync();
        for (int h = 0; h < H; ++h) {
          AttentionBlock block;
          block.layer = l;
          block.head = h;
          block.q_pos0 = q0;
          block.n_q = nq;
          block.n_keys = n_keys;
          block.probs = rows_host.get() + static_cast<std::size_t>(h) * nq * n_keys;
          block.lse = rows_lse_host.get() + static_cast<std::size_t>(h) * nq;
          observer->on_attention(block);
        }
      }
    }
    cuda::check_launch("prefill attention");
    if (want_summary) {
      cuda::check(cudaMemcpyAsync(colsum_host.get(), colsum.get(), colsum.bytes(), cudaMemcpyDeviceToHost, stream),
                  "column sums copy");
      cuda::check(cudaMemcpyAsync(window_host.get(), window.get(), window.bytes(), cudaMemcpyDeviceToHost, stream),
                  "window copy");
      cuda::check(cudaMemcpyAsync(window_lse_host.get(), window_lse.get(), window_lse.bytes(),
                                  cudaMemcpyDeviceToHost, stream),
                  "window copy");
      if (pool > 0)
        cuda::check(cudaMemcpyAsync(pooled_host.get(), pooled.get(), pooled.bytes(), cudaMemcpyDeviceToHost, stream),
                    "pooled map copy");
      sync();
      for (int h = 0; h < H; ++h) {
        PrefillSummary s;
        s.layer = l;
        s.head = h;
        s.prompt_len = P;
        s.window = W;
        s.colsum = colsum_host.get() + static_cast<std::size_t>(h) * P;
        s.window_rows = window_host.get() + static_cast<std::size_t>(h) * W * P;
        s.window_lse = window_lse_host.get() + static_cast<std::size_t>(h) * W;
        s.pool_block = pool;
        s.pooled = pool > 0 ? pooled_host.get() + static_cast<std::size_t>(h) * nb * nb : nullptr;
        observer->on_prefill_summary(s);
      }
    }
    cuda::split_half(ATT16.get(), ATT16lo.get(), ATT.get(), static_cast<long>(Pz * qd), stream);
    gemm(blas, X.get(), ATT16.get(), ATT16lo.get(), lw.wo.get(), P, dim, qd, 1.0f);

    cuda::rmsnorm_rows(XB.get(), X.get(), lw.ffn_norm.get(), P, dim, c.rms_eps, stream);
    cuda::split_half(XB16.get(), XB16lo.get(), XB.get(), static_cast<long>(Pz * dim), stream);
    gemm(blas, G.get(), XB16.get(), XB16lo.get(), lw.w_gate.get(), P, hid, dim, 0.0f);
    gemm(blas, U.get(), XB16.get(), XB16lo.get(), lw.w_up.get(), P, hid, dim, 0.0f);
    cuda::swiglu(G.get(), U.get(), static_cast<long>(Pz * hid), stream);
    cuda::split_half(G16.get(), G16lo.get(), G.get(), static_cast<long>(Pz * hid), stream);
    gemm(blas, X.get(), G16.get(), G16lo.get(), lw.w_down.get(), P, dim, hid, 1.0f);
    cuda::check_launch("prefill layer");
  }
  pos = P;
  logits_to_host(X.get() + (Pz - 1) * dim);  // synchronises: the prefill buffers may go
  if (observer) observer->on_prefill_end(P);
  if (controller) controller->after_prefill(P, *cache);
  if (observer) observer->on_logits(P - 1, logits_out);
  return logits_out;
}

std::span<const float> CudaBackend::Impl::decode(int token_id, AttentionObserver* observer,
                                                 CacheController* controller) {
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  const int H = c.n_heads, n_kv = c.n_kv_heads, group = c.group();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const bool interleaved = c.rope_style == RopeStyle::Interleaved;
  const bool hooks = observer || controller;
  const bool rope_in_cache = options.rope_in_cache;

  if (observer) observer->on_token(pos, token_id);
  ensure_rows(pos + 1, hooks);  // no head holds more than every position so far
  token_host.get()[0] = token_id;
  cuda::check(cudaMemcpyAsync(token.get(), token_host.get(), sizeof(int32_t), cudaMemcpyHostToDevice, stream),
              "token upload");
  cuda::embed_rows(x.get(), embedding.get(), token.get(), 1, dim, stream);

  for (int l = 0; l < c.n_layers; ++l) {
    const DeviceLayer& lw = layers[l];
    int32_t* m_host = meta_host_at(l);
    int32_t* m_dev = meta_at(l);
    int32_t* slot0_h = m_host;             // [n_kv]
    int32_t* n_rows_h = m_host + n_kv;     // [n_kv]
    int32_t* qslot_h = m_host + 2 * n_kv;  // [H]
    int32_t* rows_h = m_host + 2 * n_kv + H;  // [n_kv, rows_stride]

    cuda::rmsnorm_rows(xb.get(), x.get(), lw.attn_norm.get(), 1, dim, c.rms_eps, stream);
    cuda::matvec_half(q.get(), lw.wq.get(), xb.get(), qd, dim, 0.0f, stream);
    cuda::matvec_half(k.get(), lw.wk.get(), xb.get(), kvd, dim, 0.0f, stream);
    cuda::matvec_half(v.get(), lw.wv.get(), xb.get(), kvd, dim, 0.0f, stream);
    if (lw.bq.size()) cuda::add_bias(q.get(), lw.bq.get(), 1, qd, stream);
    if (lw.bk.size()) cuda::add_bias(k.get(), lw.bk.get(), 1, kvd, stream);
    if (lw.bv.size()) cuda::add_bias(v.get(), lw.bv.get(), 1, kvd, stream);
    if (!rope_in_cache) {
      cuda::rope_rows(q.get(), qd, 1, H, hd, iota.get() + pos, rope_cos.get(), rope_sin.get(), interleaved, stream);
      cuda::rope_rows(k.get(), kvd, 1, n_kv, hd, iota.get() + pos, rope_cos.get(), rope_sin.get(), interleaved, stream);
    }
    // The new key and value go to the end of each KV head's rows.
    for (int g = 0; g < n_kv; ++g) {
      slot0_h[g] = cache->size(l, g);
      cache->push(l, g, pos, 1);
    }
    copy_meta(l, 0, n_kv);
    cuda::kv_append(cache->keys(l), cache->values(l), cache->head_stride(), k.get(), v.get(), kvd, 1, n_kv, hd,
                    m_dev, stream);
    if (controller) controller->before_attention(l, pos, *cache);

    // The rows each KV head attends: all of them (a shared 0..n-1 list) unless some are inactive.
    int max_rows = 0;
    bool all_active = true;
    for (int g = 0; g < n_kv; ++g) {
      max_rows = std::max(max_rows, cache->size(l, g));
      const std::span<uint8_t> act = cache->active(l, g);
      all_active = all_active && std::all_of(act.begin(), act.end(), [](uint8_t a) { return a != 0; });
    }
    const long rows_stride = all_active ? 0 : max_rows;
    for (int g = 0; g < n_kv; ++g) {
      const std::span<const int32_t> held = cache->held(l, g);
      const std::span<uint8_t> act = cache->active(l, g);
      int32_t* kp = hooks ? key_pos.data() + (static_cast<std::size_t>(l) * n_kv + g) * host_rows_cap : nullptr;
      int n = 0;
      for (std::size_t j = 0; j < held.size(); ++j) {
        if (!act[j]) continue;
        if (!all_active) rows_h[g * rows_stride + n] = static_cast<int32_t>(j);
        if (kp) kp[n] = held[j];
        ++n;
      }
      if (n == 0) {
        throw std::logic_error("cache controller left layer " + std::to_string(l) + " KV head " +
                               std::to_string(g) + " with no active key");
      }
      n_rows_h[g] = n;
      layer_rows[static_cast<std::size_t>(l) * n_kv + g] = n;
    }
    layer_max_rows[l] = max_rows;
    for (int h = 0; h < H; ++h) qslot_h[h] = cache->size(l, h / group) - 1;
    copy_meta(l, n_kv, n_kv + H);
    if (!all_active) copy_meta(l, 2L * n_kv + H, n_kv * rows_stride);
    const int32_t* rows_dev = all_active ? iota.get() : m_dev + 2 * n_kv + H;
    if (rope_in_cache) {
      // The query goes to its KV head's last slot; keys are rotated by slot inside the attention.
      cuda::rope_rows(q.get(), hd, H, 1, hd, m_dev + 2 * n_kv, rope_cos.get(), rope_sin.get(), interleaved, stream);
    }
    float* probs_l = probs.get() + static_cast<std::size_t>(l) * H * rows_cap;  // [H, rows_cap]
    float* lse_l = lse.get() + static_cast<std::size_t>(l) * H;                 // [H]
    cuda::attend_decode(att.get(), probs_l, rows_cap, lse_l, q.get(), cache->keys(l),
                        cache->values(l), cache->head_stride(), rows_dev, rows_stride, m_dev + n_kv, max_rows, H,
                        n_kv, hd, scale, rope_in_cache ? rope_cos.get() : nullptr,
                        rope_in_cache ? rope_sin.get() : nullptr, interleaved, att_scratch.get(), stream);
    cuda::check_launch("decode attention");

    if (hooks) {
      // The rows go to the host on the copy stream while the next layers compute. A controller
      // must see them before this layer's next attention (it may evict): then wait here;
      // an observer alone gets every layer's rows after the token.
      cuda::check(cudaEventRecord(attended[l].get(), stream), "decode rows event");
      cuda::check(cudaStreamWaitEvent(copy_stream, attended[l].get(), 0), "decode rows event");
      float* host_l = probs_host.get() + static_cast<std::size_t>(l) * H * host_rows_cap;  // [H, max_rows]
      cuda::check(cudaMemcpy2DAsync(host_l, max_rows * sizeof(float), probs_l, rows_cap * sizeof(float),
                                    max_rows * sizeof(float), H, cudaMemcpyDeviceToHost, copy_stream),
                  "decode rows copy");
      cuda::check(cudaMemcpyAsync(lse_host.get() + static_cast<std::size_t>(l) * H, lse_l, H * sizeof(float),
                                  cudaMemcpyDeviceToHost, copy_stream),
                  "decode rows copy");
      if (controller) {
        cuda::check(cudaStreamSynchronize(copy_stream), "decode rows copy");
        deliver_rows(l, pos, observer, controller);
      }
    }
    cuda::matvec_half(x.get(), lw.wo.get(), att.get(), dim, qd, 1.0f, stream);

    cuda::rmsnorm_rows(xb.get(), x.get(), lw.ffn_norm.get(), 1, dim, c.rms_eps, stream);
    cuda::matvec_half(gate.get(), lw.w_gate.get(), xb.get(), hid, dim, 0.0f, stream);
    cuda::matvec_half(up.get(), lw.w_up.get(), xb.get(), hid, dim, 0.0f, stream);
    cuda::swiglu(gate.get(), up.get(), hid, stream);
    cuda::matvec_half(x.get(), lw.w_down.get(), gate.get(), dim, hid, 1.0f, stream);
  }
  cuda::check_launch("decode layer");
  logits_to_host(x.get());
  if (observer && !controller) {
    cuda::check(cudaStreamSynchronize(copy_stream), "decode rows copy");
    for (int l = 0; l < c.n_layers; ++l) deliver_rows(l, pos, observer, nullptr);
  }
  ++pos;
  if (observer) observer->on_logits(pos - 1, logits_out);
  return logits_out;
}

CudaBackend::CudaBackend(const Model& model, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(model, options)) {}
CudaBackend::~CudaBackend() = default;

void CudaBackend::reset() {
  impl_->cache->clear();
  impl_->pos = 0;
}
std::span<const float> CudaBackend::prefill(std::span<const int> tokens, AttentionObserver* observer,
                                            CacheController* controller) {
  return impl_->prefill(tokens, observer, controller);
}
std::span<const float> CudaBackend::decode(int token, AttentionObserver* observer, CacheController* controller) {
  return impl_->decode(token, observer, controller);
}
int CudaBackend::pos() const { return impl_->pos; }
KvSlots& CudaBackend::slots() { return *impl_->cache; }
std::size_t CudaBackend::kv_bytes() const { return impl_->cache->bytes(); }
std::size_t CudaBackend::peak_kv_bytes() const { return impl_->cache->peak_bytes(); }
std::size_t CudaBackend::weight_bytes() const { return impl_->weight_bytes; }

}  // namespace kvs
