// The state of a CudaBackend (an Impl<T> for its storage type T, __half, __nv_bfloat16 or float) and the
// helpers its parts share: the setup, weights and decode step (cuda_backend.cpp), the prefill
// (cuda_prefill.cpp) and the batched extend (cuda_extend.cpp). Internal to the backend.
#pragma once
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "inference/cuda_backend.h"
#include "inference/cuda_blas.h"
#include "inference/cuda_device.h"
#include "inference/cuda_kv_cache.h"
#include "inference/model.h"
#include "kernels/cuda_ops.h"

namespace kvs {
namespace cuda_backend_detail {

inline void blas_check(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string("cuBLAS: ") + what + ": " + cuda::blas().status_string(st));
}

// cuBLAS's name of the storage type.
template <class T>
constexpr cudaDataType_t kBlasType = std::is_same_v<T, __half>   ? CUDA_R_16F
                                     : std::is_same_v<T, float> ? CUDA_R_32F
                                                                : CUDA_R_16BF;

// Parts of T an fp32 activation is split into for the prefill GEMMs (cuda::split_store): two fp16
// carry about 22 bits, two bf16 only 16, three bf16 24; fp32 is its own one part.
template <class T>
constexpr int kSplitParts = std::is_same_v<T, __half> ? 2 : std::is_same_v<T, float> ? 1 : 3;

template <class T>
struct DeviceLayer {
  cuda::DeviceBuffer<float> attn_norm, ffn_norm;  // [dim] each; empty without (OLMo 2)
  // [q_dim + 2 kv_dim]: bq, bk, bv (zeros for one the model lacks); empty without biases
  cuda::DeviceBuffer<float> bqkv;
  cuda::DeviceBuffer<float> q_norm, k_norm;       // [head_dim] each (Qwen3, Gemma 3), [q_dim] and [kv_dim]
                                                  // (OLMo 2), or empty without QK-norm
  cuda::DeviceBuffer<float> post_attn_norm, post_ffn_norm;  // [dim] each; empty without (Gemma, OLMo 2)
  // The products that read the same input are stacked, so that decode reads each stack in one
  // launch (a 1024-row wk alone filled under one block per SM).
  cuda::DeviceBuffer<T> wqkv;                     // [q_dim + 2 kv_dim, dim]: wq, wk, wv
  cuda::DeviceBuffer<T> wo;                       // [dim, q_dim]
  cuda::DeviceBuffer<T> w_gate_up;                // [2 hidden_dim, dim]: w_gate, w_up
  cuda::DeviceBuffer<T> w_down;                   // [dim, hidden_dim]
  const T* wq = nullptr;                          // [q_dim, dim] in wqkv
  const T* wk = nullptr;                          // [kv_dim, dim] in wqkv
  const T* wv = nullptr;                          // [kv_dim, dim] in wqkv
  const T* w_gate = nullptr;                      // [hidden_dim, dim] in w_gate_up
  const T* w_up = nullptr;                        // [hidden_dim, dim] in w_gate_up
  const float* bq = nullptr;                      // [q_dim] in bqkv, or null: no bias
  const float* bk = nullptr;                      // [kv_dim] in bqkv, or null
  const float* bv = nullptr;                      // [kv_dim] in bqkv, or null
};

inline long round_up(long n, long m) { return (n + m - 1) / m * m; }

// The QK-norm of prefill and extend rows on the device (twin of the CPU engine's norm_heads):
// q [n, q_dim] and k [n, kv_dim] RMS-normalised in place in slices as wide as their weights, every
// head on its own (Qwen3, Gemma 3; decode's rides in rope_append) or each row whole (OLMo 2);
// nothing without the weights.
template <class T>
inline void norm_heads(const DeviceLayer<T>& lw, const ModelConfig& c, float* q, float* k, int n,
                       cudaStream_t stream) {
  const auto norm = [&](float* x, const cuda::DeviceBuffer<float>& w, int row_width) {
    const int width = static_cast<int>(w.size());
    cuda::rmsnorm_rows(x, x, w.get(), n * (row_width / width), width, c.rms_eps, stream);
  };
  if (lw.q_norm.size()) norm(q, lw.q_norm, c.q_dim());
  if (lw.k_norm.size()) norm(k, lw.k_norm, c.kv_dim());
}

// Whether the layer's QK-norm spans a token's heads together (OLMo 2), which rope_append's
// per-head norm cannot do: decode then norms q and k before it.
template <class T>
inline bool norms_whole_rows(const DeviceLayer<T>& lw, const ModelConfig& c) {
  return lw.q_norm.size() > static_cast<std::size_t>(c.head_dim) ||
         lw.k_norm.size() > static_cast<std::size_t>(c.head_dim);
}

// xb [n, dim] <- the residual rows x [n, dim] as a block reads them: RMS-normalised by w [dim], or
// copied where the layer has no norm before the block (OLMo 2).
inline void block_input_rows(float* xb, const float* x, const cuda::DeviceBuffer<float>& w, int n,
                             const ModelConfig& c, cudaStream_t stream) {
  if (w.size()) return cuda::rmsnorm_rows(xb, x, w.get(), n, c.dim, c.rms_eps, stream);
  cuda::check(cudaMemcpyAsync(xb, x, static_cast<std::size_t>(n) * c.dim * sizeof(float), cudaMemcpyDeviceToDevice,
                              stream),
              "block input copy");
}

// Y[n, rows] (+)= X[n, cols] · W[rows, cols]^T, row-major, with X given as its kSplitParts<T>
// parts [n, cols] each, n * cols apart (cuda::split_store); beta 0 overwrites, 1 accumulates.
template <class T>
inline void gemm(cublasHandle_t blas, float* y, const T* x_parts, const T* w, int n, int rows, int cols, float beta) {
  const float alpha = 1.0f, one = 1.0f;
  for (int p = 0; p < kSplitParts<T>; ++p) {
    const T* x = x_parts + static_cast<std::size_t>(p) * n * cols;
    blas_check(cuda::blas().gemm_ex(blas, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, cols, &alpha, w, kBlasType<T>, cols, x,
                                    kBlasType<T>, cols, p == 0 ? &beta : &one, y, CUDA_R_32F, rows,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "projection");
  }
}

// The stream and the cuBLAS handle, released even when the constructor throws later on.
struct StreamDeleter {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct BlasDeleter {
  void operator()(cublasHandle_t h) const { cuda::blas().destroy(h); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
using StreamHandle = std::unique_ptr<CUstream_st, StreamDeleter>;
using BlasHandle = std::unique_ptr<cublasContext, BlasDeleter>;
using EventHandle = std::unique_ptr<CUevent_st, EventDeleter>;

// The activations of a batched pass over n rows (prefill's prompt, extend's chunk); the buffers of T
// hold the kSplitParts<T> parts the GEMMs read (cuda::split_store).
template <class T>
struct RowBuffers {
  RowBuffers(const ModelConfig& c, int n);
  cuda::DeviceBuffer<int32_t> ids;  // [n] token ids
  cuda::DeviceBuffer<float> X;      // [n, dim] residual stream
  cuda::DeviceBuffer<float> XB;     // [n, dim]
  cuda::DeviceBuffer<T> XBp;        // [parts, n, dim]
  cuda::DeviceBuffer<float> Q;      // [n, q_dim]
  cuda::DeviceBuffer<T> Qp;         // [parts, n, q_dim]
  cuda::DeviceBuffer<float> K;      // [n, kv_dim]
  cuda::DeviceBuffer<float> V;      // [n, kv_dim]
  cuda::DeviceBuffer<float> ATT;    // [n, q_dim]
  cuda::DeviceBuffer<T> ATTp;       // [parts, n, q_dim]
  cuda::DeviceBuffer<float> G;      // [n, hidden_dim]
  cuda::DeviceBuffer<float> U;      // [n, hidden_dim]
  cuda::DeviceBuffer<T> Gp;         // [parts, n, hidden_dim]
};

// What CudaBackend asks of its implementation, whichever type it stores.
class Forward {
 public:
  virtual ~Forward() = default;
  virtual void reset() = 0;
  virtual void rewind(int n) = 0;
  virtual std::unique_ptr<CudaBackend::Snapshot> snapshot() = 0;
  virtual void restore(const CudaBackend::Snapshot& s, CacheController* controller) = 0;
  virtual std::span<const float> prefill(std::span<const int> tokens, AttentionObserver* observer,
                                         CacheController* controller) = 0;
  virtual std::span<const float> decode(int token, AttentionObserver* observer,
                                        CacheController* controller) = 0;
  virtual std::span<const float> extend(std::span<const int> tokens, AttentionObserver* observer,
                                        CacheController* controller) = 0;
  virtual int pos() const = 0;
  virtual std::span<const float> last_logits() const = 0;
  virtual KvSlots& slots() = 0;
  virtual std::size_t kv_bytes() const = 0;
  virtual std::size_t peak_kv_bytes() const = 0;
  virtual std::size_t weight_bytes() const = 0;
};

// The backend storing weights and cache as T. Members are defined in cuda_backend.cpp (prefill
// in cuda_prefill.cpp) and instantiated there for __half, __nv_bfloat16 and float.
template <class T>
struct Impl final : Forward {
  Impl(const Model& m, const EngineOptions& o);
  ~Impl() override;

  void reset() override {
    cache->clear();
    pos_ = 0;
  }
  void rewind(int n) override {
    cache->truncate(n);
    pos_ = n;
  }
  std::unique_ptr<CudaBackend::Snapshot> snapshot() override;
  void restore(const CudaBackend::Snapshot& s, CacheController* controller) override;
  std::span<const float> prefill(std::span<const int> tokens, AttentionObserver* observer,
                                 CacheController* controller) override;
  std::span<const float> decode(int token, AttentionObserver* observer, CacheController* controller) override;
  std::span<const float> extend(std::span<const int> tokens, AttentionObserver* observer,
                                CacheController* controller) override;
  int pos() const override { return pos_; }
  std::span<const float> last_logits() const override { return logits_out; }
  KvSlots& slots() override { return *cache; }
  std::size_t kv_bytes() const override { return cache->bytes(); }
  std::size_t peak_kv_bytes() const override { return cache->peak_bytes(); }
  std::size_t weight_bytes() const override { return weight_bytes_; }

  const Model& model;
  const ModelConfig& c;
  EngineOptions options;
  StreamHandle stream_handle, copy_stream_handle;
  BlasHandle blas_handle;
  cudaStream_t stream = nullptr;       // stream_handle's: all compute
  cudaStream_t copy_stream = nullptr;  // copy_stream_handle's: decode rows to the host
  cublasHandle_t blas = nullptr;       // blas_handle's
  // [n_layers] recorded when a layer's decode rows are ready
  std::vector<EventHandle> attended;
  // [n_layers] recorded on copy_stream when a layer's decode rows are on the host
  std::vector<EventHandle> copied;
  std::size_t weight_bytes_ = 0;

  // Weights.
  cuda::DeviceBuffer<T> embedding;        // [vocab, dim]
  cuda::DeviceBuffer<T> classifier;       // [vocab, dim]; empty when tied to the embedding
  cuda::DeviceBuffer<float> final_norm;   // [dim]
  std::vector<DeviceLayer<T>> layers;     // [n_layers]
  // The RoPE tables by RopeTableKind, [seq_len, head_dim/2] each; empty for a kind the model has
  // no layers of.
  std::array<cuda::DeviceBuffer<float>, kRopeTableKinds> rope_cos, rope_sin;
  bool long_rope = false;  // the forward pass under way rotates with LongRoPE's long factors
  const float* rope_cos_of(int l) const { return rope_cos[static_cast<int>(c.rope_table_of(l, long_rope))].get(); }
  const float* rope_sin_of(int l) const { return rope_sin[static_cast<int>(c.rope_table_of(l, long_rope))].get(); }
  cuda::DeviceBuffer<int32_t> iota;              // [seq_len] 0, 1, 2, ...

  std::unique_ptr<CudaKvCache<T>> cache;
  int pos_ = 0;  // positions processed

  // Decode activations.
  cuda::DeviceBuffer<float> x;             // [dim]
  cuda::DeviceBuffer<float> qkv;           // [q_dim + 2 kv_dim]: q, k, v of one product
                                           // ([n_heads + 2 n_kv_heads, head_dim])
  cuda::DeviceBuffer<float> att;           // [q_dim]
  cuda::DeviceBuffer<float> ffn;           // [hidden_dim]: silu(gate) * up
  cuda::DeviceBuffer<float> block_out;     // [dim] a block's output before its post norm; empty without
  float* q = nullptr;                      // [q_dim] in qkv
  cuda::DeviceBuffer<float> logits;        // [vocab]
  // Decode attention rows of every layer, grown with the context (rows_cap >= every head's
  // held count); copied to pinned memory on copy_stream only when a hook listens.
  int rows_cap = 0;
  int host_rows_cap = 0;
  int key_pos_cap = 0;
  cuda::DeviceBuffer<float> probs;         // [n_layers, n_heads, rows_cap]
  cuda::DeviceBuffer<float> lse;           // [n_layers, n_heads]
  cuda::DeviceBuffer<float> att_scratch;   // attend_decode's scratch at seq_len rows
  // Per-layer step metadata: slot0 [n_kv], n_rows [n_kv], qslot [n_heads] and, when the layer
  // attends through row lists, each KV head's ops::RowListEdit [n_kv, kRowListEditInts] and their
  // payloads packed after them (a head's at most (rope_in_cache ? 2 : 1) * seq_len ints: the edit of
  // its list, or the list whole and, with rope_in_cache, its slots), at layer * meta_stride;
  // written on the host (pinned) and copied before use.
  long meta_stride = 0;
  cuda::DeviceBuffer<int32_t> meta;        // [n_layers, meta_stride]
  cuda::PinnedBuffer<int32_t> meta_host;   // [n_layers, meta_stride]
  cuda::PinnedBuffer<int32_t> token_host;  // [1]
  cuda::DeviceBuffer<int32_t> token;       // [1]
  cuda::PinnedBuffer<float> logits_host;   // [vocab]
  cuda::PinnedBuffer<float> probs_host;    // [n_layers, n_heads, host_rows_cap], layer l packed as
                                           // [n_heads, layer_max_rows[l]]
  cuda::PinnedBuffer<float> lse_host;      // [n_layers, n_heads]
  std::vector<int32_t> key_pos;            // [n_layers, n_kv, key_pos_cap] attended positions when
                                           // some held keys are skipped
  std::vector<const int32_t*> layer_key_pos;  // [n_layers, n_kv] the attended positions: in key_pos,
                                              // or the cache's held list when every key is attended
  std::vector<int32_t> layer_rows;         // [n_layers, n_kv] attended rows per KV head
  std::vector<int> layer_max_rows;         // [n_layers]
  struct ListPlan {
    int ints = 0;         // the edits' and payloads' ints to upload; 0: the shared 0..n-1 list
    int max_entries = 0;  // the most entries a head's list or the copy it edits has
  };
  std::vector<ListPlan> layer_lists;       // [n_layers] this decode step's row lists
  std::vector<uint8_t> head_whole;         // [n_kv] plan_attention: the KV head attends every key it holds
  std::vector<uint8_t> rows_to_host;       // [n_layers] this decode step: the layer's rows go to the host
  std::vector<uint8_t> controller_reads;   // [n_layers] this decode step: the controller reads them
  // Key rankings (KeyRanking) a controller asks for: computed on the device where every KV head of
  // the layer attends the same keys below `below`, from the rows the host then need not have;
  // otherwise from the rows on the host (rank_keys).
  std::vector<KeyRanking> rankings;        // [n_layers] this decode step's requests
  std::vector<int> device_ranked;          // [n_layers] keys ranked on the device, -1: on the host
  cuda::DeviceBuffer<uint32_t> rank_scratch;  // [seq_len] order keys of the head-maxed logits
  cuda::DeviceBuffer<int32_t> ranked;         // [seq_len] ranked key indices, ascending
  cuda::PinnedBuffer<int32_t> ranked_host;    // [seq_len]
  // Group rows (CacheController::group_rows) a controller asks for: reduced on the device from the
  // layer's rows, which then stay there (n_kv rows cross PCIe, not n_heads). One layer's at a
  // time: the controller has them before the next layer's are made.
  std::vector<std::optional<ops::GroupReduce>> reductions;  // [n_layers] this decode step's requests
  int group_cap = 0;
  cuda::DeviceBuffer<float> group_sums;    // [n_heads] each row's ops::lane_sum
  cuda::DeviceBuffer<float> group_dev;     // [n_kv, group_cap]
  cuda::PinnedBuffer<float> group_host;    // [n_kv, group_cap], packed as [n_kv, layer_max_rows[l]]
  std::vector<GroupRow> group_rows;        // [n_kv]
  std::vector<AttentionBlock> blocks;      // [n_heads]
  std::vector<float> logits_out;           // [vocab]

  // Batched passes (cuda_prefill.cpp): Q, K, V of the rows from X (attention norm, products,
  // biases; before RoPE), and the rest of the layer once ATT holds the attention output (output
  // product into X, FFN norm, gate/up, SwiGLU, down product into X).
  void qkv_rows(const DeviceLayer<T>& lw, RowBuffers<T>& b, int n);
  void output_and_ffn_rows(const DeviceLayer<T>& lw, RowBuffers<T>& b, int n);
  // b.X = the embedding rows of tokens (uploaded to b.ids first).
  void embed_tokens(std::span<const int> tokens, RowBuffers<T>& b);
  // Query rows per attention block of a batched pass over n rows whose scores take score_floats
  // floats a row: within an eighth of the free GPU memory (256 MB to 1 GB) with their parts of T
  // (64 MB when the rows go to the host), at most EngineOptions::prefill_block when set.
  long query_block(long score_floats, bool rows_to_host, int n) const;
  void upload_weights();
  void upload(float* dst, const WeightVector& src, const char* what);
  // The matrices row-major (unpacked from their panels), rounded to T and stacked in one buffer.
  cuda::DeviceBuffer<T> upload_store(std::initializer_list<const PackedMatrix*> parts, const char* what);
  void sync() { cuda::check(cudaStreamSynchronize(stream), "stream"); }
  int32_t* meta_at(int layer) const { return meta.get() + layer * meta_stride; }
  int32_t* meta_host_at(int layer) const { return meta_host.get() + layer * meta_stride; }
  void copy_meta(int layer, long offset, long n) {
    cuda::check(cudaMemcpyAsync(meta_at(layer) + offset, meta_host_at(layer) + offset,
                                n * sizeof(int32_t), cudaMemcpyHostToDevice, stream),
                "upload of step metadata");
  }
  // The layer's row-list edits and payloads, when plan_attention staged them.
  void copy_lists(int layer) {
    if (layer_lists[layer].ints > 0) copy_meta(layer, 2L * c.n_kv_heads + c.n_heads, layer_lists[layer].ints);
  }
  void logits_to_host(const float* x_last);  // enqueue_logits + finish_logits
  void enqueue_logits(const float* x_last);  // final norm, classifier, copy to logits_host
  void finish_logits();                      // waits for the stream; logits_out
  void push_token(int layer);
  void plan_attention(int layer, bool to_host);
  // Decode: x[dim] += post(W[dim, cols] · in[cols]), W one of a layer's products into the residual.
  void add_product(const T* w, const float* in, int cols, const cuda::DeviceBuffer<float>& post);
  // Keys below `below` that every KV head of the layer attends, the same ones: their count, or -1
  // where the heads attend different keys (after plan_attention of the layer).
  int shared_keys_below(int layer, int below) const;
  // Queues on copy_stream the device ranking of layer l's rows (already written on `stream`) and
  // the copy of its result; device_ranked[l] says how many keys it ranks.
  void rank_on_device(int layer, int n_keys);
  void ensure_rows(int needed, bool to_host, bool grouped);
  void reduce_on_device(int layer);
  void deliver_rows(int layer, int q_pos, AttentionObserver* observer, CacheController* controller,
                    bool controller_rows);

};

}  // namespace cuda_backend_detail
}  // namespace kvs
