// CudaBackend's extend: a chunk of tokens through every layer at once over the cache (a text fed
// after a prompt, say a second pass over it), as the CPU engine's Engine::extend_batched does it.
// Projections are the prefill's GEMMs; per layer the chunk's keys and values are appended, the
// controller's before_attention runs once, and each KV head's active rows (the chunk's among them)
// are gathered into one block of keys and values, which the chunk's queries attend over a block
// of query rows at a time: scores by a strided-batched GEMM over the KV head's query heads, the
// softmax of each query's range of keys (positions up to its own, within the sliding window),
// then P·V. Observers get each query's row as a decode row over the keys it read, layer by layer.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "inference/cuda_backend_impl.h"
#include "kernels/attention_gathered.h"
#include "kernels/cuda_ops.h"

namespace kvs {
namespace cuda_backend_detail {

template <class T>
std::span<const float> Impl<T>::extend(std::span<const int> tokens, AttentionObserver* observer,
                                       CacheController* controller) {
  const int n = static_cast<int>(tokens.size()), pos0 = pos_;
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim();
  const int H = c.n_heads, n_kv = c.n_kv_heads, group = c.group(), L = c.n_layers;
  const int parts = kSplitParts<T>;
  const float scale = c.scoring().scale;  // the GEMMs scale the scores; the softmax soft-caps them
  const bool interleaved = c.rope_style == RopeStyle::Interleaved;
  const std::size_t nz = n;
  long_rope = c.long_rope(pos0 + n);
  if (observer) {
    for (int i = 0; i < n; ++i) observer->on_token(pos0 + i, tokens[i]);
  }

  // A KV head attends at most what it holds now plus the chunk (a controller only takes away).
  int most_rows = 0;
  for (int l = 0; l < L; ++l)
    for (int g = 0; g < n_kv; ++g) most_rows = std::max(most_rows, cache->size(l, g) + n);
  const long ld_max = round_up(most_rows, 8);
  // Query rows per attention block: a KV head's scores within prefill's budget.
  const long per_row = static_cast<long>(group) * ld_max;  // score floats per block row
  const long B = query_block(per_row, observer != nullptr, n);

  RowBuffers<T> b(c, n);
  cuda::DeviceBuffer<T> KG(static_cast<std::size_t>(most_rows) * hd, "extend keys");    // [m, head_dim] gathered
  cuda::DeviceBuffer<T> VG(static_cast<std::size_t>(most_rows) * hd, "extend values");  // [m, head_dim] gathered
  cuda::DeviceBuffer<int32_t> rows_dev(most_rows, "extend rows");                        // [m] cache rows gathered
  cuda::DeviceBuffer<int32_t> range_dev(2 * nz, "extend key ranges");                   // [2, n] begin, end
  cuda::DeviceBuffer<int32_t> new_rows(n_kv * nz, "extend cache rows");                  // [n_kv, n]
  cuda::DeviceBuffer<float> S(B * per_row, "extend attention scores");                  // [group, nq <= B, ld]
  cuda::DeviceBuffer<T> Sp(parts * B * per_row, "extend attention scores");            // [parts, group, nq, ld]
  cuda::DeviceBuffer<float> S_lse(B * group, "extend attention scores");               // [group, nq]
  cuda::PinnedBuffer<float> rows_host, lse_host;
  if (observer) {
    rows_host = cuda::PinnedBuffer<float>(B * per_row, "extend attention rows");  // [group, nq, ld]
    lse_host = cuda::PinnedBuffer<float>(B * group, "extend attention rows");     // [group, nq]
  }
  // A layer's lists for the device, staged in pinned memory so that their copies queue without
  // waiting for the stream (a copy from pageable memory waits for it): the chunk's cache rows
  // [n_kv, n], then per KV head its attended rows [most_rows] and each query's range of them,
  // begin [n] and end [n]. Two layers' worth: the host fills one while the other's copies may
  // still be queued.
  const std::size_t head_stage = static_cast<std::size_t>(most_rows) + 2 * nz;
  const std::size_t stage_ints = n_kv * nz + n_kv * head_stage;
  cuda::PinnedBuffer<int32_t> stage(2 * stage_ints, "extend lists");  // [2, stage_ints]
  EventHandle staged[2];  // recorded after the copies from each half
  for (EventHandle& e : staged) {
    cudaEvent_t ev = nullptr;
    cuda::check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "event creation");
    e.reset(ev);
  }
  std::vector<int32_t> key_pos;  // [m] the positions of a KV head's attended rows
  // Destroyed before the buffers above: when a hook or a list throws, the copies and kernels still
  // queued on them finish first.
  struct FinishQueued {
    cudaStream_t stream;
    ~FinishQueued() { cudaStreamSynchronize(stream); }
  } finish_queued{stream};

  embed_tokens(tokens, b);
  const float one = 1.0f, zero = 0.0f;
  for (int l = 0; l < L; ++l) {
    const DeviceLayer<T>& lw = layers[l];
    qkv_rows(lw, b, n);
    cuda::rope_rows(b.Q.get(), qd, n, H, hd, iota.get() + pos0, rope_cos_of(l), rope_sin_of(l), interleaved, stream);
    cuda::rope_rows(b.K.get(), kvd, n, n_kv, hd, iota.get() + pos0, rope_cos_of(l), rope_sin_of(l), interleaved,
                    stream);
    const int window = c.window(l);
    int32_t* st = stage.get() + (l % 2) * stage_ints;  // [stage_ints] this layer's lists
    if (l >= 2) cuda::check(cudaEventSynchronize(staged[l % 2].get()), "extend lists");  // layer l - 2's copied
    for (int g = 0; g < n_kv; ++g) {  // the rows the chunk's entries go to (freed ones first)
      cache->push(l, g, pos0, n);
      const std::span<const int32_t> held_rows = cache->rows(l, g);
      std::copy(held_rows.end() - n, held_rows.end(), st + g * nz);
    }
    cuda::check(cudaMemcpyAsync(new_rows.get(), st, n_kv * nz * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
                "extend cache rows");
    cuda::kv_append(cache->keys(l), cache->values(l), cache->head_stride(), b.K.get(), b.V.get(), kvd, n, n_kv, hd,
                    new_rows.get(), n, stream);
    if (controller) controller->before_attention(l, pos0, *cache);
    cuda::split_store(b.Qp.get(), nz * qd, parts, b.Q.get(), static_cast<long>(nz * qd), stream);

    for (int g = 0; g < n_kv; ++g) {
      // The active rows from the chunk's first window position on, and each query's part of them.
      const std::span<const int32_t> held = cache->held(l, g);
      const std::span<const int32_t> held_rows = cache->rows(l, g);
      const std::span<uint8_t> act = cache->active(l, g);
      const int first_pos = window > 0 ? pos0 - window + 1 : 0;
      int32_t* rows = st + n_kv * nz + g * head_stage;  // [most_rows]
      int32_t* begin = rows + most_rows;                 // [n]
      int32_t* end = begin + nz;                         // [n]
      key_pos.clear();
      for (std::size_t j = 0; j < held.size(); ++j) {
        if (!act[j] || held[j] < first_pos) continue;
        rows[key_pos.size()] = held_rows[j];
        key_pos.push_back(held[j]);
      }
      const int m = static_cast<int>(key_pos.size());
      if (m == 0) {
        throw std::logic_error("cache controller left layer " + std::to_string(l) + " KV head " + std::to_string(g) +
                               " with no active key");
      }
      for (int i = 0; i < n; ++i) {
        ops::gathered_row_keys(key_pos.data(), m, pos0 + i, window, &begin[i], &end[i]);
        if (end[i] <= begin[i]) {
          throw std::logic_error("layer " + std::to_string(l) + " KV head " + std::to_string(g) +
                                 ": the query at position " + std::to_string(pos0 + i) + " has no key to attend");
        }
      }
      cuda::check(cudaMemcpyAsync(rows_dev.get(), rows, m * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
                  "extend rows");
      cuda::check(cudaMemcpyAsync(range_dev.get(), begin, 2 * nz * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
                  "extend key ranges");
      cuda::gather_rows(KG.get(), cache->keys(l) + g * cache->head_stride(), rows_dev.get(), m, hd, stream);
      cuda::gather_rows(VG.get(), cache->values(l) + g * cache->head_stride(), rows_dev.get(), m, hd, stream);

      const long ld = round_up(m, 8);
      for (int i0 = 0; i0 < n; i0 += static_cast<int>(B)) {
        const int nq = static_cast<int>(std::min<long>(B, n - i0));
        const long head_block = static_cast<long>(nq) * ld;  // floats of one head's rows in S
        // S_r[nq, m] = scale * Q_h[nq, hd] · KG[m, hd]^T for h = g * group + r, Q part by part
        // (one strided batch over r; KG is every head's, stride 0)
        for (int p = 0; p < parts; ++p) {
          const T* q_part = b.Qp.get() + p * nz * qd + static_cast<std::size_t>(i0) * qd + g * group * hd;
          blas_check(cuda::blas().gemm_strided_batched_ex(
                         blas, CUBLAS_OP_T, CUBLAS_OP_N, m, nq, hd, &scale, KG.get(), kBlasType<T>, hd, 0, q_part,
                         kBlasType<T>, qd, hd, p == 0 ? &zero : &one, S.get(), CUDA_R_32F, ld, head_block, group,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "extend scores");
        }
        cuda::softmax_ranges(S.get(), S_lse.get(), Sp.get(), group * head_block, parts, group, nq, m, ld,
                             range_dev.get() + i0, range_dev.get() + nz + i0, c.attn_softcap, stream);
        // ATT_h[nq, hd] = P_r[nq, m] · VG[m, hd], P part by part
        for (int p = 0; p < parts; ++p) {
          blas_check(cuda::blas().gemm_strided_batched_ex(
                         blas, CUBLAS_OP_N, CUBLAS_OP_N, hd, nq, m, &one, VG.get(), kBlasType<T>, hd, 0,
                         Sp.get() + p * group * head_block, kBlasType<T>, ld, head_block, p == 0 ? &zero : &one,
                         b.ATT.get() + static_cast<std::size_t>(i0) * qd + g * group * hd, CUDA_R_32F, qd, hd, group,
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "extend attention output");
        }
        if (!observer) continue;
        cuda::check(cudaMemcpyAsync(rows_host.get(), S.get(), group * head_block * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream),
                    "extend rows copy");
        cuda::check(cudaMemcpyAsync(lse_host.get(), S_lse.get(), static_cast<std::size_t>(group) * nq * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream),
                    "extend rows copy");
        sync();
        for (int r = 0; r < group; ++r) {
          for (int i = 0; i < nq; ++i) {  // each query's row over the keys it read, as a decode row
            const int first = begin[i0 + i], last = end[i0 + i];
            const std::size_t row = static_cast<std::size_t>(r) * head_block + static_cast<std::size_t>(i) * ld;
            observer->on_attention(AttentionBlock::decode_row(l, g * group + r, pos0 + i0 + i, last - first,
                                                              key_pos.data() + first, rows_host.get() + row + first,
                                                              lse_host.get() + static_cast<std::size_t>(r) * nq + i));
          }
        }
      }
    }
    cuda::check(cudaEventRecord(staged[l % 2].get(), stream), "extend lists");
    cuda::check_launch("extend attention");
    output_and_ffn_rows(lw, b, n);
    cuda::check_launch("extend layer");
  }
  pos_ = pos0 + n;
  logits_to_host(b.X.get() + (nz - 1) * dim);  // synchronises: the buffers may go
  if (observer) observer->on_logits(pos_ - 1, logits_out);
  return logits_out;
}

template std::span<const float> Impl<__half>::extend(std::span<const int>, AttentionObserver*, CacheController*);
template std::span<const float> Impl<__nv_bfloat16>::extend(std::span<const int>, AttentionObserver*,
                                                            CacheController*);
template std::span<const float> Impl<float>::extend(std::span<const int>, AttentionObserver*, CacheController*);

}  // namespace cuda_backend_detail
}  // namespace kvs
