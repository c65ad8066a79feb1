// CudaBackend's prefill: the prompt through every layer at once. Projections are cuBLAS GEMMs
// (fp16 or bf16 inputs, fp32 output and compute) by the activations split into 16-bit parts
// (kSplitParts: two fp16 or three bf16, about 22 or 24 bits of the fp32 activations);
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
namespace {

// Y[n, rows] (+)= X[n, cols] · W[rows, cols]^T, row-major, with X given as its kSplitParts<T>
// parts [n, cols] each, n * cols apart (cuda::split_store); beta 0 overwrites, 1 accumulates.
template <class T>
void gemm(cublasHandle_t blas, float* y, const T* x_parts, const T* w, int n, int rows, int cols, float beta) {
  const float alpha = 1.0f, one = 1.0f;
  for (int p = 0; p < kSplitParts<T>; ++p) {
    const T* x = x_parts + static_cast<std::size_t>(p) * n * cols;
    blas_check(cuda::blas().gemm_ex(blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, kBlasType<T>, cols, x,
                                    kBlasType<T>, cols, p == 0 ? &beta : &one, y, CUDA_R_32F, rows,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "projection");
  }
}

}  // namespace

template <class T>
std::span<const float> Impl<T>::prefill(std::span<const int> tokens, AttentionObserver* observer,
                                        CacheController* controller) {
  const int P = static_cast<int>(tokens.size());
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  const int H = c.n_heads, n_kv = c.n_kv_heads, group = c.group();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const bool interleaved = c.rope_style == RopeStyle::Interleaved;
  cache->clear();
  pos_ = 0;
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
  const int parts = kSplitParts<T>;
  long B = std::max(1L, (256L << 20) / (per_row * (4 + 2 * parts)));  // S fp32 + its 16-bit parts
  if (want_rows) B = std::min(B, std::max(1L, (64L << 20) / (per_row * 4)));
  B = std::min<long>(B, P);

  const std::size_t Pz = P;
  cuda::DeviceBuffer<int32_t> ids(Pz, "prompt tokens");
  cuda::DeviceBuffer<float> X(Pz * dim, "prefill activations");    // [P, dim] residual stream
  cuda::DeviceBuffer<float> XB(Pz * dim, "prefill activations");   // [P, dim]
  cuda::DeviceBuffer<T> XBp(parts * Pz * dim, "prefill activations");  // [parts, P, dim]
  cuda::DeviceBuffer<float> Q(Pz * qd, "prefill activations");       // [P, q_dim]
  cuda::DeviceBuffer<T> Qp(parts * Pz * qd, "prefill activations");   // [parts, P, q_dim]
  cuda::DeviceBuffer<float> K(Pz * kvd, "prefill activations");    // [P, kv_dim]
  cuda::DeviceBuffer<float> V(Pz * kvd, "prefill activations");    // [P, kv_dim]
  cuda::DeviceBuffer<T> K16(Pz * kvd, "prefill activations");  // [P, kv_dim]
  cuda::DeviceBuffer<T> V16(Pz * kvd, "prefill activations");  // [P, kv_dim]
  cuda::DeviceBuffer<float> ATT(Pz * qd, "prefill activations");    // [P, q_dim]
  cuda::DeviceBuffer<T> ATTp(parts * Pz * qd, "prefill activations");  // [parts, P, q_dim]
  cuda::DeviceBuffer<float> G(Pz * hid, "prefill activations");    // [P, hidden_dim]
  cuda::DeviceBuffer<float> U(Pz * hid, "prefill activations");    // [P, hidden_dim]
  cuda::DeviceBuffer<T> Gp(parts * Pz * hid, "prefill activations");  // [parts, P, hidden_dim]
  cuda::DeviceBuffer<float> S(B * per_row, "prefill attention scores");        // [H, nq <= B, ld]
  cuda::DeviceBuffer<T> Sp(parts * B * per_row, "prefill attention scores");  // [parts, H, nq <= B, ld]
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
    const DeviceLayer<T>& lw = layers[l];
    cuda::rmsnorm_rows(XB.get(), X.get(), lw.attn_norm.get(), P, dim, c.rms_eps, stream);
    cuda::split_store(XBp.get(), Pz * dim, parts, XB.get(), static_cast<long>(Pz * dim), stream);
    gemm(blas, Q.get(), XBp.get(), lw.wq, P, qd, dim, 0.0f);
    gemm(blas, K.get(), XBp.get(), lw.wk, P, kvd, dim, 0.0f);
    gemm(blas, V.get(), XBp.get(), lw.wv, P, kvd, dim, 0.0f);
    if (lw.bq) cuda::add_bias(Q.get(), lw.bq, P, qd, stream);
    if (lw.bk) cuda::add_bias(K.get(), lw.bk, P, kvd, stream);
    if (lw.bv) cuda::add_bias(V.get(), lw.bv, P, kvd, stream);
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
    cuda::split_store(Qp.get(), Pz * qd, parts, Q.get(), static_cast<long>(Pz * qd), stream);
    cuda::to_store(K16.get(), K.get(), static_cast<long>(Pz * kvd), stream);  // as the cache holds them
    cuda::to_store(V16.get(), V.get(), static_cast<long>(Pz * kvd), stream);

    for (int q0 = 0; q0 < P; q0 += static_cast<int>(B)) {
      const int nq = static_cast<int>(std::min<long>(B, P - q0));
      const int n_keys = q0 + nq;
      const long head_block = static_cast<long>(nq) * ld;  // floats of one head's rows in S
      // Heads g * group + r for g = 0..n_kv-1 form one strided batch per r.
      for (int r = 0; r < group; ++r) {
        // S_h[nq, n_keys] = scale * Q_h[nq, hd] · K_g[n_keys, hd]^T, Q part by part
        for (int p = 0; p < parts; ++p) {
          const T* q_part = Qp.get() + p * Pz * qd;  // [P, q_dim]
          blas_check(cuda::blas().gemm_strided_batched_ex(
                         blas, CUBLAS_OP_T, CUBLAS_OP_N, n_keys, nq, hd, &scale, K16.get(), kBlasType<T>, kvd, hd,
                         q_part + static_cast<std::size_t>(q0) * qd + r * hd, kBlasType<T>, qd,
                         static_cast<long long>(group) * hd, p == 0 ? &zero : &one,
                         S.get() + r * head_block, CUDA_R_32F, ld, group * head_block, n_kv, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
                     "prefill scores");
        }
      }
      cuda::softmax_causal(S.get(), S_lse.get(), H, nq, n_keys, ld, q0, c.sliding_window, stream);
      cuda::split_store(Sp.get(), H * head_block, parts, S.get(), H * head_block, stream);
      for (int r = 0; r < group; ++r) {
        // ATT_h[nq, hd] = P_h[nq, n_keys] · V_g[n_keys, hd], P part by part
        for (int p = 0; p < parts; ++p) {
          const T* p_part = Sp.get() + p * H * head_block;  // [H, nq, ld]
          blas_check(cuda::blas().gemm_strided_batched_ex(
                         blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, nq, n_keys, &one, V16.get(), kBlasType<T>, kvd, hd,
                         p_part + r * head_block, kBlasType<T>, ld, group * head_block,
                         p == 0 ? &zero : &one, ATT.get() + static_cast<std::size_t>(q0) * qd + r * hd,
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
    cuda::split_store(ATTp.get(), Pz * qd, parts, ATT.get(), static_cast<long>(Pz * qd), stream);
    gemm(blas, X.get(), ATTp.get(), lw.wo.get(), P, dim, qd, 1.0f);

    cuda::rmsnorm_rows(XB.get(), X.get(), lw.ffn_norm.get(), P, dim, c.rms_eps, stream);
    cuda::split_store(XBp.get(), Pz * dim, parts, XB.get(), static_cast<long>(Pz * dim), stream);
    gemm(blas, G.get(), XBp.get(), lw.w_gate, P, hid, dim, 0.0f);
    gemm(blas, U.get(), XBp.get(), lw.w_up, P, hid, dim, 0.0f);
    cuda::swiglu(G.get(), U.get(), static_cast<long>(Pz * hid), stream);
    cuda::split_store(Gp.get(), Pz * hid, parts, G.get(), static_cast<long>(Pz * hid), stream);
    gemm(blas, X.get(), Gp.get(), lw.w_down.get(), P, dim, hid, 1.0f);
    cuda::check_launch("prefill layer");
  }
  pos_ = P;
  logits_to_host(X.get() + (Pz - 1) * dim);  // synchronises: the prefill buffers may go
  if (observer) observer->on_prefill_end(P);
  if (controller) controller->after_prefill(P, *cache);
  if (observer) observer->on_logits(P - 1, logits_out);
  return logits_out;
}

template std::span<const float> Impl<__half>::prefill(std::span<const int>, AttentionObserver*, CacheController*);
template std::span<const float> Impl<__nv_bfloat16>::prefill(std::span<const int>, AttentionObserver*,
                                                             CacheController*);

}  // namespace cuda_backend_detail
}  // namespace kvs
