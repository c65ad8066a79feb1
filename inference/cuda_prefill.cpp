// CudaBackend's prefill: the prompt through every layer at once. Projections are cuBLAS GEMMs
// (fp16 inputs, fp32 output and compute) by the activations split into high and low halves;
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

using cuda_backend_detail::blas_check;
using cuda_backend_detail::DeviceLayer;
using cuda_backend_detail::round_up;

namespace {

// Y[n, rows] (+)= X[n, cols] · W[rows, cols]^T, row-major, with X given as its high and low
// halves [n, cols] each (cuda::split_half); beta 0 overwrites, 1 accumulates.
void gemm(cublasHandle_t blas, float* y, const __half* x_hi, const __half* x_lo, const __half* w,
          int n, int rows, int cols, float beta) {
  const float alpha = 1.0f, one = 1.0f;
  for (const __half* x : {x_hi, x_lo}) {
    blas_check(cuda::blas().gemm_ex(blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, CUDA_R_16F, cols, x,
                                    CUDA_R_16F, cols, x == x_hi ? &beta : &one, y, CUDA_R_32F, rows,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "projection");
  }
}

}  // namespace

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
    gemm(blas, Q.get(), XB16.get(), XB16lo.get(), lw.wq, P, qd, dim, 0.0f);
    gemm(blas, K.get(), XB16.get(), XB16lo.get(), lw.wk, P, kvd, dim, 0.0f);
    gemm(blas, V.get(), XB16.get(), XB16lo.get(), lw.wv, P, kvd, dim, 0.0f);
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
          blas_check(cuda::blas().gemm_strided_batched_ex(
                         blas, CUBLAS_OP_T, CUBLAS_OP_N, n_keys, nq, hd, &scale, K16.get(), CUDA_R_16F, kvd, hd,
                         q_half + static_cast<std::size_t>(q0) * qd + r * hd, CUDA_R_16F, qd,
                         static_cast<long long>(group) * hd, q_half == Q16.get() ? &zero : &one,
                         S.get() + r * head_block, CUDA_R_32F, ld, group * head_block, n_kv, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
                     "prefill scores");
        }
      }
      cuda::softmax_causal(S.get(), S_lse.get(), H, nq, n_keys, ld, q0, c.sliding_window, stream);
      cuda::split_half(S16.get(), S16lo.get(), S.get(), H * head_block, stream);
      for (int r = 0; r < group; ++r) {
        // ATT_h[nq, hd] = P_h[nq, n_keys] · V_g[n_keys, hd], P as its high then low half
        for (const __half* p_half : {S16.get(), S16lo.get()}) {
          blas_check(cuda::blas().gemm_strided_batched_ex(
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
    cuda::split_half(ATT16.get(), ATT16lo.get(), ATT.get(), static_cast<long>(Pz * qd), stream);
    gemm(blas, X.get(), ATT16.get(), ATT16lo.get(), lw.wo.get(), P, dim, qd, 1.0f);

    cuda::rmsnorm_rows(XB.get(), X.get(), lw.ffn_norm.get(), P, dim, c.rms_eps, stream);
    cuda::split_half(XB16.get(), XB16lo.get(), XB.get(), static_cast<long>(Pz * dim), stream);
    gemm(blas, G.get(), XB16.get(), XB16lo.get(), lw.w_gate, P, hid, dim, 0.0f);
    gemm(blas, U.get(), XB16.get(), XB16lo.get(), lw.w_up, P, hid, dim, 0.0f);
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

}  // namespace kvs
