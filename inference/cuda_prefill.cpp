// CudaBackend's prefill: the prompt through every layer at once. Projections are cuBLAS GEMMs
// (inputs of the stored type, fp32 output and compute) by the activations split into parts of it
// (kSplitParts: two fp16 or three bf16, about 22 or 24 bits of the fp32 activations; one fp32);
// attention is computed a block of query rows at a time (scores and P·V by strided-batched GEMMs,
// one batch per GQA residue, a causal softmax kernel between), so memory stays bounded at any
// prompt length. The rows go to the observers, or their reductions are made on the device
// (column sums, window rows, pooled map) when no observer needs rows.
#include <algorithm>
#include <cmath>
#include <vector>

#include "inference/cuda_backend_impl.h"
#include "kernels/cuda_ops.h"

namespace kvs {

namespace cuda_backend_detail {

template <class T>
RowBuffers<T>::RowBuffers(const ModelConfig& c, int n)
    : ids(n, "token ids"),
      X(static_cast<std::size_t>(n) * c.dim, "batched activations"),
      XB(static_cast<std::size_t>(n) * c.dim, "batched activations"),
      XBp(static_cast<std::size_t>(kSplitParts<T>) * n * c.dim, "batched activations"),
      Q(static_cast<std::size_t>(n) * c.q_dim(), "batched activations"),
      Qp(static_cast<std::size_t>(kSplitParts<T>) * n * c.q_dim(), "batched activations"),
      K(static_cast<std::size_t>(n) * c.kv_dim(), "batched activations"),
      V(static_cast<std::size_t>(n) * c.kv_dim(), "batched activations"),
      ATT(static_cast<std::size_t>(n) * c.q_dim(), "batched activations"),
      ATTp(static_cast<std::size_t>(kSplitParts<T>) * n * c.q_dim(), "batched activations"),
      G(static_cast<std::size_t>(n) * c.hidden_dim, "batched activations"),
      U(static_cast<std::size_t>(n) * c.hidden_dim, "batched activations"),
      Gp(static_cast<std::size_t>(kSplitParts<T>) * n * c.hidden_dim, "batched activations") {}

template <class T>
void Impl<T>::qkv_rows(const DeviceLayer<T>& lw, RowBuffers<T>& b, int n) {
  const int dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), parts = kSplitParts<T>;
  const std::size_t nz = n;
  block_input_rows(b.XB.get(), b.X.get(), lw.attn_norm, n, c, stream);
  cuda::split_store(b.XBp.get(), nz * dim, parts, b.XB.get(), static_cast<long>(nz * dim), stream);
  gemm(blas, b.Q.get(), b.XBp.get(), lw.wq, n, qd, dim, 0.0f);
  gemm(blas, b.K.get(), b.XBp.get(), lw.wk, n, kvd, dim, 0.0f);
  gemm(blas, b.V.get(), b.XBp.get(), lw.wv, n, kvd, dim, 0.0f);
  if (lw.bq) cuda::add_bias(b.Q.get(), lw.bq, n, qd, stream);
  if (lw.bk) cuda::add_bias(b.K.get(), lw.bk, n, kvd, stream);
  if (lw.bv) cuda::add_bias(b.V.get(), lw.bv, n, kvd, stream);
  norm_heads(lw, c, b.Q.get(), b.K.get(), n, stream);
}

template <class T>
void Impl<T>::embed_tokens(std::span<const int> tokens, RowBuffers<T>& b) {
  const std::vector<int32_t> ids(tokens.begin(), tokens.end());  // (pageable: read when the copy returns)
  cuda::check(cudaMemcpyAsync(b.ids.get(), ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
              "token upload");
  cuda::embed_rows(b.X.get(), embedding.get(), b.ids.get(), static_cast<int>(ids.size()), c.dim, stream,
                   c.embed_scale);
}

// Query rows per attention block: the scores (fp32 and their parts of T) of every head within a
// budget of an eighth of the free GPU memory, between 256 MB and 1 GB. Each block's GEMMs read
// every key and value attended so far, so at 32K keys on the 8B shape 256 MB blocks (32 rows)
// read as many bytes of the cache per layer as they wrote scores; 1 GB blocks read a quarter.
template <class T>
long Impl<T>::query_block(long score_floats, bool rows_to_host, int n) const {
  std::size_t free_b = 0, total_b = 0;
  cuda::check(cudaMemGetInfo(&free_b, &total_b), "GPU memory query");
  const long budget = std::clamp(static_cast<long>(free_b / 8), 256L << 20, 1L << 30);
  const long row_bytes = score_floats * static_cast<long>(4 + sizeof(T) * kSplitParts<T>);  // S fp32 + its parts
  long B = std::max(1L, budget / row_bytes);
  if (rows_to_host) B = std::min(B, std::max(1L, (64L << 20) / (score_floats * 4)));
  if (options.prefill_block > 0) B = std::min<long>(B, options.prefill_block);
  return std::min<long>(B, n);
}

template <class T>
void Impl<T>::output_and_ffn_rows(const DeviceLayer<T>& lw, RowBuffers<T>& b, int n) {
  const int dim = c.dim, qd = c.q_dim(), hid = c.hidden_dim, parts = kSplitParts<T>;
  const std::size_t nz = n;
  // A block's product W · in added into X in place, or made in XB and added through the norm
  // after the block where the layer has one (Gemma 3).
  auto add_product = [&](const T* w, const T* in_parts, int cols, const cuda::DeviceBuffer<float>& post) {
    if (!post.size()) return gemm(blas, b.X.get(), in_parts, w, n, dim, cols, 1.0f);
    gemm(blas, b.XB.get(), in_parts, w, n, dim, cols, 0.0f);
    cuda::add_rmsnorm_rows(b.X.get(), b.XB.get(), post.get(), n, dim, c.rms_eps, stream);
  };
  cuda::split_store(b.ATTp.get(), nz * qd, parts, b.ATT.get(), static_cast<long>(nz * qd), stream);
  add_product(lw.wo.get(), b.ATTp.get(), qd, lw.post_attn_norm);
  block_input_rows(b.XB.get(), b.X.get(), lw.ffn_norm, n, c, stream);
  cuda::split_store(b.XBp.get(), nz * dim, parts, b.XB.get(), static_cast<long>(nz * dim), stream);
  gemm(blas, b.G.get(), b.XBp.get(), lw.w_gate, n, hid, dim, 0.0f);
  gemm(blas, b.U.get(), b.XBp.get(), lw.w_up, n, hid, dim, 0.0f);
  if (c.activation == Activation::GeluTanh) cuda::geglu_tanh(b.G.get(), b.U.get(), static_cast<long>(nz * hid), stream);
  else cuda::swiglu(b.G.get(), b.U.get(), static_cast<long>(nz * hid), stream);
  cuda::split_store(b.Gp.get(), nz * hid, parts, b.G.get(), static_cast<long>(nz * hid), stream);
  add_product(lw.w_down.get(), b.Gp.get(), hid, lw.post_ffn_norm);
}

template <class T>
std::span<const float> Impl<T>::prefill(std::span<const int> tokens, AttentionObserver* observer,
                                        CacheController* controller) {
  const int P = static_cast<int>(tokens.size());
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim();
  const int H = c.n_heads, n_kv = c.n_kv_heads, group = c.group();
  const float scale = c.scoring().scale;  // the GEMMs scale the scores; the softmax soft-caps them
  const bool interleaved = c.rope_style == RopeStyle::Interleaved;
  cache->clear();
  pos_ = 0;
  long_rope = c.long_rope(P);
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

  // Query rows per attention block: scores of every head within query_block's budget.
  const long ld = round_up(P, 8);
  const long per_row = static_cast<long>(H) * ld;  // score floats per block row
  const int parts = kSplitParts<T>;
  const long B = query_block(per_row, want_rows, P);

  const std::size_t Pz = P;
  RowBuffers<T> b(c, P);
  cuda::DeviceBuffer<T> K16(Pz * kvd, "prefill activations");  // [P, kv_dim]
  cuda::DeviceBuffer<T> V16(Pz * kvd, "prefill activations");  // [P, kv_dim]
  cuda::DeviceBuffer<float> S(B * per_row, "prefill attention scores");        // [H, nq <= B, ld]
  cuda::DeviceBuffer<T> Sp(parts * B * per_row, "prefill attention scores");  // [parts, H, nq <= B, ld]
  cuda::DeviceBuffer<float> S_lse(B * H, "prefill attention scores");          // [H, nq <= B]
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

  embed_tokens(tokens, b);

  const float one = 1.0f, zero = 0.0f;
  for (int l = 0; l < c.n_layers; ++l) {
    const DeviceLayer<T>& lw = layers[l];
    qkv_rows(lw, b, P);
    // rope_in_cache caches keys before rotation; attention still uses rotated keys, since during
    // prefill every key's slot equals its position.
    auto cache_kv = [&] {
      for (int g = 0; g < n_kv; ++g) cache->push(l, g, 0, P);  // a cleared cache: rows 0..P-1
      cuda::kv_append(cache->keys(l), cache->values(l), cache->head_stride(), b.K.get(), b.V.get(), kvd, P,
                      n_kv, hd, iota.get(), 0, stream);
    };
    if (options.rope_in_cache) cache_kv();
    cuda::rope_rows(b.Q.get(), qd, P, H, hd, iota.get(), rope_cos_of(l), rope_sin_of(l), interleaved, stream);
    cuda::rope_rows(b.K.get(), kvd, P, n_kv, hd, iota.get(), rope_cos_of(l), rope_sin_of(l), interleaved, stream);
    if (!options.rope_in_cache) cache_kv();
    cuda::split_store(b.Qp.get(), Pz * qd, parts, b.Q.get(), static_cast<long>(Pz * qd), stream);
    cuda::to_store(K16.get(), b.K.get(), static_cast<long>(Pz * kvd), stream);  // as the cache holds them
    cuda::to_store(V16.get(), b.V.get(), static_cast<long>(Pz * kvd), stream);

    for (int q0 = 0; q0 < P; q0 += static_cast<int>(B)) {
      const int nq = static_cast<int>(std::min<long>(B, P - q0));
      const int n_keys = q0 + nq;
      const long head_block = static_cast<long>(nq) * ld;  // floats of one head's rows in S
      // Heads g * group + r for g = 0..n_kv-1 form one strided batch per r.
      for (int r = 0; r < group; ++r) {
        // S_h[nq, n_keys] = scale * Q_h[nq, hd] · K_g[n_keys, hd]^T, Q part by part
        for (int p = 0; p < parts; ++p) {
          const T* q_part = b.Qp.get() + p * Pz * qd;  // [P, q_dim]
          blas_check(cuda::blas().gemm_strided_batched_ex(
                         blas, CUBLAS_OP_T, CUBLAS_OP_N, n_keys, nq, hd, &scale, K16.get(), kBlasType<T>, kvd, hd,
                         q_part + static_cast<std::size_t>(q0) * qd + r * hd, kBlasType<T>, qd,
                         static_cast<long long>(group) * hd, p == 0 ? &zero : &one,
                         S.get() + r * head_block, CUDA_R_32F, ld, group * head_block, n_kv, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
                     "prefill scores");
        }
      }
      cuda::softmax_causal(S.get(), S_lse.get(), Sp.get(), H * head_block, parts, H, nq, n_keys, ld, q0,
                           c.window(l), c.attn_softcap, stream);
      for (int r = 0; r < group; ++r) {
        // ATT_h[nq, hd] = P_h[nq, n_keys] · V_g[n_keys, hd], P part by part
        for (int p = 0; p < parts; ++p) {
          const T* p_part = Sp.get() + p * H * head_block;  // [H, nq, ld]
          blas_check(cuda::blas().gemm_strided_batched_ex(
                         blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, nq, n_keys, &one, V16.get(), kBlasType<T>, kvd, hd,
                         p_part + r * head_block, kBlasType<T>, ld, group * head_block,
                         p == 0 ? &zero : &one, b.ATT.get() + static_cast<std::size_t>(q0) * qd + r * hd,
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
        for (int h = 0; h < H; ++h)
          observer->on_attention(AttentionBlock::prefill(l, h, q0, nq,
                                                         rows_host.get() + static_cast<std::size_t>(h) * nq * n_keys,
                                                         rows_lse_host.get() + static_cast<std::size_t>(h) * nq));
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
    output_and_ffn_rows(lw, b, P);
    cuda::check_launch("prefill layer");
  }
  pos_ = P;
  logits_to_host(b.X.get() + (Pz - 1) * dim);  // synchronises: the prefill buffers may go
  if (observer) observer->on_prefill_end(P);
  if (controller) controller->after_prefill(P, *cache);
  if (observer) observer->on_logits(P - 1, logits_out);
  return logits_out;
}

template struct RowBuffers<__half>;
template struct RowBuffers<__nv_bfloat16>;
template void Impl<__half>::qkv_rows(const DeviceLayer<__half>&, RowBuffers<__half>&, int);
template void Impl<__nv_bfloat16>::qkv_rows(const DeviceLayer<__nv_bfloat16>&, RowBuffers<__nv_bfloat16>&, int);
template void Impl<__half>::embed_tokens(std::span<const int>, RowBuffers<__half>&);
template void Impl<__nv_bfloat16>::embed_tokens(std::span<const int>, RowBuffers<__nv_bfloat16>&);
template long Impl<__half>::query_block(long, bool, int) const;
template long Impl<__nv_bfloat16>::query_block(long, bool, int) const;
template void Impl<__half>::output_and_ffn_rows(const DeviceLayer<__half>&, RowBuffers<__half>&, int);
template void Impl<__nv_bfloat16>::output_and_ffn_rows(const DeviceLayer<__nv_bfloat16>&, RowBuffers<__nv_bfloat16>&,
                                                       int);
template std::span<const float> Impl<__half>::prefill(std::span<const int>, AttentionObserver*, CacheController*);
template std::span<const float> Impl<__nv_bfloat16>::prefill(std::span<const int>, AttentionObserver*,
                                                             CacheController*);
template struct RowBuffers<float>;
template void Impl<float>::qkv_rows(const DeviceLayer<float>&, RowBuffers<float>&, int);
template void Impl<float>::embed_tokens(std::span<const int>, RowBuffers<float>&);
template long Impl<float>::query_block(long, bool, int) const;
template void Impl<float>::output_and_ffn_rows(const DeviceLayer<float>&, RowBuffers<float>&, int);
template std::span<const float> Impl<float>::prefill(std::span<const int>, AttentionObserver*, CacheController*);

}  // namespace cuda_backend_detail
}  // namespace kvs
