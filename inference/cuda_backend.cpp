// CudaBackend: the Llama-family forward pass on the GPU — setup, weight upload and the decode
// step (the prefill is in cuda_prefill.cpp). Weights and the KV cache are fp16, bf16 or fp32 on
// the device (Impl<T>); activations, accumulation and softmax fp32. Decode projections are a matvec
// kernel (stored weights read once, fp32 inputs); decode attention reads each KV head's active
// rows. Hooks get exactly what the CPU engine gives them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "inference/attended_rows.h"
#include "inference/cuda_backend_impl.h"
#include "inference/key_ranking.h"
#include "inference/kv_positions.h"
#include "kernels/cuda_ops.h"
#include "kernels/rope.h"

namespace kvs {

bool cuda_usable(std::string* why) { return cuda::gpu_present(why); }

namespace cuda_backend_detail {

template <class T>
Impl<T>::Impl(const Model& m, const EngineOptions& o) : model(m), c(m.config), options(o) {
  std::string why;
  if (!cuda::gpu_present(&why)) throw std::runtime_error("CUDA: no usable GPU (" + why + ")");
  if (c.head_dim % 8 != 0 || c.head_dim > 256) {  // the decode attention kernel's row tiles
    throw InputError("CUDA: head_dim " + std::to_string(c.head_dim) +
                     " is not supported on the GPU (a multiple of 8 up to 256); use --device cpu");
  }
  cuda::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream creation");
  stream_handle.reset(stream);
  cuda::check(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking), "stream creation");
  copy_stream_handle.reset(copy_stream);
  for (int l = 0; l < m.config.n_layers; ++l) {
    cudaEvent_t e = nullptr;
    cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event creation");
    attended.emplace_back(e);
    cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event creation");
    copied.emplace_back(e);
  }
  blas_check(cuda::blas().create(&blas), "handle creation");
  blas_handle.reset(blas);
  blas_check(cuda::blas().set_stream(blas, stream), "stream binding");
  upload_weights();
  // The cache's rows grow with the sequence; the tables below are sized for the whole context,
  // on the device before on the host, so that a context too long fails as out of GPU memory.
  cache = std::make_unique<CudaKvCache<T>>(c.n_layers, c.n_kv_heads, c.head_dim, c.seq_len, options.rope_in_cache,
                                           stream);

  const int half = c.head_dim / 2, L = c.n_layers, n_kv = c.n_kv_heads, H = c.n_heads;
  iota = cuda::DeviceBuffer<int32_t>(c.seq_len, "position table");
  for (int k = 0; k < kRopeTableKinds; ++k) {  // each table the layers read, every position, on the device
    if (!c.has_rope_table(static_cast<RopeTableKind>(k))) continue;
    // The device's tables first: one too large for the GPU is refused before the host builds it.
    const std::size_t floats = static_cast<std::size_t>(c.seq_len) * half;  // [seq_len, head_dim/2]
    rope_cos[k] = cuda::DeviceBuffer<float>(floats, "RoPE cos table");
    rope_sin[k] = cuda::DeviceBuffer<float>(floats, "RoPE sin table");
    ops::RopeTable table = rope_table(m, static_cast<RopeTableKind>(k));
    table.reserve(c.seq_len);
    cuda::check(cudaMemcpy(rope_cos[k].get(), table.cos(0), floats * sizeof(float), cudaMemcpyHostToDevice),
                "RoPE upload");
    cuda::check(cudaMemcpy(rope_sin[k].get(), table.sin(0), floats * sizeof(float), cudaMemcpyHostToDevice),
                "RoPE upload");
  }
  std::vector<int32_t> counting(c.seq_len);
  std::iota(counting.begin(), counting.end(), 0);
  cuda::check(cudaMemcpy(iota.get(), counting.data(), iota.bytes(), cudaMemcpyHostToDevice), "position upload");

  x = cuda::DeviceBuffer<float>(c.dim, "activations");
  qkv = cuda::DeviceBuffer<float>(c.q_dim() + 2 * c.kv_dim(), "activations");
  q = qkv.get();
  att = cuda::DeviceBuffer<float>(c.q_dim(), "activations");
  ffn = cuda::DeviceBuffer<float>(c.hidden_dim, "activations");
  // add_product's staging, for a model with norms after its blocks (every layer alike)
  if (!layers.empty() && (layers[0].post_attn_norm.size() || layers[0].post_ffn_norm.size()))
    block_out = cuda::DeviceBuffer<float>(c.dim, "activations");
  logits = cuda::DeviceBuffer<float>(c.vocab_size, "logits");
  lse = cuda::DeviceBuffer<float>(static_cast<std::size_t>(L) * H, "attention rows");
  att_scratch = cuda::DeviceBuffer<float>(cuda::attend_decode_scratch_floats(H, c.seq_len, c.head_dim),
                                          "attention scratch");
  // (a list given whole is followed, with rope_in_cache, by each listed row's slot)
  meta_stride = round_up(2L * n_kv + H + ops::kRowListEditInts * n_kv +
                             (options.rope_in_cache ? 2L : 1L) * n_kv * c.seq_len, 32);
  meta = cuda::DeviceBuffer<int32_t>(static_cast<std::size_t>(L) * meta_stride, "step metadata");
  meta_host = cuda::PinnedBuffer<int32_t>(static_cast<std::size_t>(L) * meta_stride, "step metadata");
  token_host = cuda::PinnedBuffer<int32_t>(1, "token");
  token = cuda::DeviceBuffer<int32_t>(1, "token");
  logits_host = cuda::PinnedBuffer<float>(c.vocab_size, "logits");
  lse_host = cuda::PinnedBuffer<float>(static_cast<std::size_t>(L) * H, "attention rows");
  layer_rows.resize(static_cast<std::size_t>(L) * n_kv);
  layer_key_pos.resize(static_cast<std::size_t>(L) * n_kv);
  layer_max_rows.resize(L);
  layer_lists.resize(L);
  device_ranked.resize(L);
  head_whole.resize(n_kv);
  blocks.resize(H);
  logits_out.resize(c.vocab_size);
  // The tables above were copied from pageable memory on the legacy stream, which `stream` does
  // not wait for.
  cuda::check(cudaDeviceSynchronize(), "table upload");
}

template <class T>
Impl<T>::~Impl() {
  cudaStreamSynchronize(stream);
  cudaStreamSynchronize(copy_stream);
}

// Grows the decode row buffers to `needed` rows per head: the device ones always, the host ones
// when a hook will read them, the attended positions' lists also when a controller's group rows
// are made (grouped), and the group rows' buffers then. Waits for both streams first where a
// buffer in use may be replaced.
template <class T>
void Impl<T>::ensure_rows(int needed, bool to_host, bool grouped) {
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
    host_rows_cap = rows_cap;
  }
  if ((to_host || grouped) && key_pos_cap < rows_cap) {
    key_pos.resize(static_cast<std::size_t>(c.n_layers) * c.n_kv_heads * rows_cap);
    key_pos_cap = rows_cap;
  }
  if (grouped && group_cap < rows_cap) {
    cuda::check(cudaStreamSynchronize(copy_stream), "copy stream");
    const std::size_t size = static_cast<std::size_t>(c.n_kv_heads) * rows_cap;
    group_sums = cuda::DeviceBuffer<float>(c.n_heads, "group rows");
    group_dev = cuda::DeviceBuffer<float>(size, "group rows");
    group_host = cuda::PinnedBuffer<float>(size, "group rows");
    group_cap = rows_cap;
  }
}

// Hands layer `layer`'s decode rows (already on the host) to the observer, then gives the
// controller the key ranking it asked for (ranked on the device, or here from the rows) and the
// group rows it asked for (reduced on the device), and calls its after_attention, with the rows
// when controller_rows (else they need not be on the host).
template <class T>
void Impl<T>::deliver_rows(int layer, int q_pos, AttentionObserver* observer, CacheController* controller,
                           bool controller_rows) {
  const int H = c.n_heads, n_kv = c.n_kv_heads, group = c.group();
  const int max_rows = layer_max_rows[layer];
  const float* probs_l = probs_host.get() + static_cast<std::size_t>(layer) * H * host_rows_cap;  // [H, max_rows]
  const bool rank_here = controller && rankings[layer].k > 0 && device_ranked[layer] < 0;
  for (int h = 0; h < H && (observer || controller_rows || rank_here); ++h) {
    const std::size_t lg = static_cast<std::size_t>(layer) * n_kv + h / group;
    blocks[h] = AttentionBlock::decode_row(layer, h, q_pos, layer_rows[lg], layer_key_pos[lg],
                                           probs_l + static_cast<std::size_t>(h) * max_rows,
                                           lse_host.get() + static_cast<std::size_t>(layer) * H + h);
  }
  if (observer) observer->on_attention_heads(blocks);
  if (controller && rankings[layer].k > 0) {
    std::vector<int32_t> positions;  // [ranked] ascending
    if (rank_here) {
      positions = rank_keys(blocks, rankings[layer]);
    } else {
      const std::span<const int32_t> held = cache->held(layer, 0);  // every head's, below `below`
      positions.resize(device_ranked[layer]);
      for (int i = 0; i < device_ranked[layer]; ++i) positions[i] = held[ranked_host.get()[i]];
    }
    controller->on_key_ranking(layer, q_pos, positions);
  }
  if (controller && reductions[layer]) {
    group_rows.resize(n_kv);
    for (int g = 0; g < n_kv; ++g) {
      const std::size_t lg = static_cast<std::size_t>(layer) * n_kv + g;
      const float* values = group_host.get() + static_cast<std::size_t>(g) * max_rows;  // [layer_rows[lg]]
      group_rows[g] = {g, layer_rows[lg], layer_key_pos[lg], values};
    }
    controller->on_group_rows(layer, q_pos, group_rows);
  }
  if (controller)
    controller->after_attention(layer, q_pos, controller_rows ? std::span<const AttentionBlock>(blocks)
                                                              : std::span<const AttentionBlock>(), *cache);
}

template <class T>
void Impl<T>::upload(float* dst, const WeightVector& src, const char* what) {
  cuda::check(cudaMemcpy(dst, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice), what);
}

template <class T>
cuda::DeviceBuffer<T> Impl<T>::upload_store(std::initializer_list<const PackedMatrix*> parts,
                                            const char* what) {
  std::size_t total = 0, largest = 0;
  for (const PackedMatrix* p : parts) {
    total += p->size();
    largest = std::max(largest, p->size());
  }
  cuda::DeviceBuffer<T> out(total, what);
  constexpr std::size_t kChunk = std::size_t{16} << 20;  // floats staged per copy
  cuda::DeviceBuffer<float> staging(std::min(kChunk, largest), "weight upload staging");
  std::vector<float> rows;  // [rows per copy, cols] unpacked from the panels on the host
  T* dst = out.get();
  for (const PackedMatrix* p : parts) {
    const int per_copy = static_cast<int>(std::min<std::size_t>(p->rows, std::max<std::size_t>(1, kChunk / p->cols)));
    for (int r = 0; r < p->rows; r += per_copy) {
      const int nr = std::min(per_copy, p->rows - r);
      const std::size_t n = static_cast<std::size_t>(nr) * p->cols;
      rows.resize(n);
      // Rows unpacked on the OpenMP threads: a strided gather from the panels (and a widening of
      // quantized or 16-bit ones) that one thread would take seconds over for a billion weights.
#pragma omp parallel for schedule(static) if (n >= (std::size_t{1} << 18))
      for (int i = 0; i < nr; ++i) p->row(r + i, rows.data() + static_cast<std::size_t>(i) * p->cols);
      cuda::check(cudaMemcpy(staging.get(), rows.data(), n * sizeof(float), cudaMemcpyHostToDevice), what);
      cuda::to_store(dst + static_cast<std::size_t>(r) * p->cols, staging.get(), static_cast<long>(n), nullptr);
      cuda::check(cudaDeviceSynchronize(), what);
    }
    dst += p->size();
  }
  weight_bytes_ += out.bytes();
  return out;
}

template <class T>
void Impl<T>::upload_weights() {
  const ModelWeights& w = model.weights;
  auto floats = [&](const WeightVector& src, const char* what) {
    cuda::DeviceBuffer<float> out(src.size(), what);
    if (!src.empty()) upload(out.get(), src, what);
    weight_bytes_ += out.bytes();
    return out;
  };
  embedding = upload_store({&w.token_embedding}, "the token embedding");
  if (!c.tied_classifier) classifier = upload_store({&w.classifier}, "the classifier");
  final_norm = floats(w.final_norm, "the final norm");
  layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    DeviceLayer<T>& d = layers[l];
    if (!lw.attn_norm.empty()) d.attn_norm = floats(lw.attn_norm, "a norm weight");
    if (!lw.ffn_norm.empty()) d.ffn_norm = floats(lw.ffn_norm, "a norm weight");
    if (!lw.bq.empty() || !lw.bk.empty() || !lw.bv.empty()) {
      WeightVector bqkv(c.q_dim() + 2L * c.kv_dim(), 0.0f);  // [q_dim + 2 kv_dim]
      std::copy(lw.bq.begin(), lw.bq.end(), bqkv.begin());
      std::copy(lw.bk.begin(), lw.bk.end(), bqkv.begin() + c.q_dim());
      std::copy(lw.bv.begin(), lw.bv.end(), bqkv.begin() + c.q_dim() + c.kv_dim());
      d.bqkv = floats(bqkv, "a bias");
      if (!lw.bq.empty()) d.bq = d.bqkv.get();
      if (!lw.bk.empty()) d.bk = d.bqkv.get() + c.q_dim();
      if (!lw.bv.empty()) d.bv = d.bqkv.get() + c.q_dim() + c.kv_dim();
    }
    if (!lw.q_norm.empty()) d.q_norm = floats(lw.q_norm, "a norm weight");
    if (!lw.k_norm.empty()) d.k_norm = floats(lw.k_norm, "a norm weight");
    if (!lw.post_attn_norm.empty()) d.post_attn_norm = floats(lw.post_attn_norm, "a norm weight");
    if (!lw.post_ffn_norm.empty()) d.post_ffn_norm = floats(lw.post_ffn_norm, "a norm weight");
    d.wqkv = upload_store({&lw.wq, &lw.wk, &lw.wv}, "an attention weight");
    d.wq = d.wqkv.get();
    d.wk = d.wq + lw.wq.size();
    d.wv = d.wk + lw.wk.size();
    d.wo = upload_store({&lw.wo}, "an attention weight");
    d.w_gate_up = upload_store({&lw.w_gate, &lw.w_up}, "an FFN weight");
    d.w_gate = d.w_gate_up.get();
    d.w_up = d.w_gate + lw.w_gate.size();
    d.w_down = upload_store({&lw.w_down}, "an FFN weight");
  }
}

// Final norm of the last position's residual x_last [dim], the classifier, and the copy back.
template <class T>
void Impl<T>::logits_to_host(const float* x_last) {
  enqueue_logits(x_last);
  finish_logits();
}

template <class T>
void Impl<T>::enqueue_logits(const float* x_last) {
  cuda::matvec(logits.get(), c.tied_classifier ? embedding.get() : classifier.get(), x_last, c.vocab_size,
               c.dim, 0.0f, stream, {final_norm.get(), c.rms_eps});
  cuda::softcap(logits.get(), c.vocab_size, c.final_softcap, stream);
  cuda::check(cudaMemcpyAsync(logits_host.get(), logits.get(), logits.bytes(), cudaMemcpyDeviceToHost, stream),
              "logits copy");
}

template <class T>
void Impl<T>::finish_logits() {
  sync();
  std::copy_n(logits_host.get(), c.vocab_size, logits_out.begin());
}

// Records this step's entry after each KV head's entries of layer l, and the device row it goes
// to (slot0 of the layer's metadata: a row an evicted entry freed, or the next fresh one).
template <class T>
void Impl<T>::push_token(int l) {
  int32_t* slot0_h = meta_host_at(l);  // [n_kv]
  for (int g = 0; g < c.n_kv_heads; ++g) {
    cache->push(l, g, pos_, 1);
    slot0_h[g] = cache->rows(l, g).back();
  }
}

// The product added in place (beta 1), or, where the layer has a norm after the block (Gemma 3),
// made in block_out and added through that norm.
template <class T>
void Impl<T>::add_product(const T* w, const float* in, int cols, const cuda::DeviceBuffer<float>& post) {
  if (!post.size()) return cuda::matvec(x.get(), w, in, c.dim, cols, 1.0f, stream);
  cuda::matvec(block_out.get(), w, in, c.dim, cols, 0.0f, stream);
  cuda::add_rmsnorm_rows(x.get(), block_out.get(), post.get(), 1, c.dim, c.rms_eps, stream);
}

// The device rows each KV head of layer l attends: all of them (the shared 0..n-1 list) when every
// head's held entries are active, in row order and, with a sliding window, not before its first
// position; otherwise each head's list, staged for the cache's device copy: a head attending every
// entry it holds stages its held rows (the edit of its copy since the last step, when that is
// shorter), any other the rows of its attended entries (with rope_in_cache, then each one's slot:
// its index among the held entries), or the previous head's payload when both attend the same.
// Also their count, the query's slot, and (when the rows go to the host) the positions of the
// attended keys.
template <class T>
void Impl<T>::plan_attention(int l, bool to_host) {
  const int H = c.n_heads, n_kv = c.n_kv_heads, group = c.group();
  int32_t* m_host = meta_host_at(l);
  int32_t* n_rows_h = m_host + n_kv;                                          // [n_kv]
  int32_t* qslot_h = m_host + 2 * n_kv;                                       // [H]
  auto* edits_h = reinterpret_cast<ops::RowListEdit*>(m_host + 2 * n_kv + H);  // [n_kv]
  int32_t* payload_h = m_host + 2 * n_kv + H + ops::kRowListEditInts * n_kv;  // the heads' payloads, packed
  const int first_pos = c.window(l) > 0 ? pos_ - c.window(l) + 1 : 0;
  int max_rows = 0;
  bool all_active = true;
  for (int g = 0; g < n_kv; ++g) {
    max_rows = std::max(max_rows, cache->size(l, g));
    const std::span<uint8_t> act = cache->active(l, g);
    // (a memchr: at 32K keys the host must not fall behind the GPU's step)
    head_whole[g] = std::memchr(act.data(), 0, act.size()) == nullptr &&
                    (cache->size(l, g) == 0 || cache->held(l, g)[0] >= first_pos);
    all_active = all_active && head_whole[g] && cache->rows_in_order(l, g);
  }
  int payload = 0, max_entries = 0;
  for (int g = 0; g < n_kv; ++g) {
    const std::size_t lg = static_cast<std::size_t>(l) * n_kv + g;
    const std::span<const int32_t> held = cache->held(l, g);
    int n = static_cast<int>(held.size());
    if (head_whole[g]) {
      // Every held key attended: the hooks read the held list itself, which nothing changes before
      // they have the rows (a controller evicts after it gets them; the next push is the next step).
      layer_key_pos[lg] = held.data();
      if (!all_active) {
        payload += cache->stage_held_rows(l, g, payload, edits_h[g], payload_h);
        max_entries = std::max({max_entries, n, static_cast<int>(edits_h[g].n_src)});
      }
    } else if (g > 0 && !head_whole[g - 1] && cache->same_entries(l, g - 1, g)) {
      // The previous head's list and key positions (a controller that skips the same keys in every
      // head): its payload again, not uploaded twice.
      n = layer_rows[lg - 1];
      cache->stage_other_rows(l, g, n, edits_h[g - 1].offset, edits_h[g]);
      layer_key_pos[lg] = layer_key_pos[lg - 1];
    } else {  // the active keys from the window's first position on
      const std::span<const uint8_t> act = cache->active(l, g);
      const std::size_t j0 = window_start(held, first_pos);
      // (each list has room for a head's every entry: the payload a seq_len, key_pos key_pos_cap)
      int32_t* rows = payload_h + payload;  // [n]
      int32_t* kp = to_host ? key_pos.data() + lg * key_pos_cap : nullptr;
      n = list_attended(held, cache->rows(l, g), act, j0, rows, kp);
      int32_t* slots = options.rope_in_cache ? rows + n : nullptr;  // [n], after the rows are listed
      if (slots) list_attended_slots(act, j0, slots);
      cache->stage_other_rows(l, g, n, payload, edits_h[g]);
      payload += slots ? 2 * n : n;
      max_entries = std::max(max_entries, n);
      layer_key_pos[lg] = kp;
    }
    if (n == 0) {
      throw std::logic_error("cache controller left layer " + std::to_string(l) + " KV head " +
                             std::to_string(g) + " with no active key");
    }
    n_rows_h[g] = n;
    layer_rows[lg] = n;
  }
  layer_max_rows[l] = max_rows;
  layer_lists[l] = all_active ? ListPlan{} : ListPlan{ops::kRowListEditInts * n_kv + payload, max_entries};
  for (int h = 0; h < H; ++h) qslot_h[h] = cache->size(l, h / group) - 1;
}

template <class T>
int Impl<T>::shared_keys_below(int l, int below) const {
  const std::span<const int32_t> first = cache->held(l, 0);
  const long n = std::lower_bound(first.begin(), first.end(), below) - first.begin();
  for (int g = 0; g < c.n_kv_heads; ++g) {
    const std::span<const int32_t> held = cache->held(l, g);
    if (!head_whole[g] || static_cast<long>(held.size()) < n ||
        (static_cast<long>(held.size()) > n && held[n] < below) || !same_positions(first.first(n), held.first(n)))
      return -1;
  }
  return static_cast<int>(n);
}

template <class T>
void Impl<T>::rank_on_device(int l, int n_keys) {
  if (ranked.size() == 0) {
    rank_scratch = cuda::DeviceBuffer<uint32_t>(c.seq_len, "key ranking");
    ranked = cuda::DeviceBuffer<int32_t>(c.seq_len, "key ranking");
    ranked_host = cuda::PinnedBuffer<int32_t>(c.seq_len, "key ranking");
  }
  const int H = c.n_heads, count = std::min(rankings[l].k, n_keys);
  device_ranked[l] = count;
  if (count == 0) return;
  const float* probs_l = probs.get() + static_cast<std::size_t>(l) * H * rows_cap;  // [H, rows_cap]
  cuda::rank_keys(ranked.get(), probs_l, rows_cap, lse.get() + static_cast<std::size_t>(l) * H, H, n_keys,
                  rankings[l].k, rank_scratch.get(), copy_stream);
  cuda::check(cudaMemcpyAsync(ranked_host.get(), ranked.get(), count * sizeof(int32_t), cudaMemcpyDeviceToHost,
                              copy_stream),
              "key ranking copy");
}

template <class T>
void Impl<T>::reduce_on_device(int l) {
  const int H = c.n_heads, n_kv = c.n_kv_heads, max_rows = layer_max_rows[l];
  const float* probs_l = probs.get() + static_cast<std::size_t>(l) * H * rows_cap;  // [H, rows_cap]
  cuda::reduce_group_rows(group_dev.get(), group_cap, probs_l, rows_cap, meta_at(l) + n_kv, n_kv, c.group(), max_rows,
                          *reductions[l], group_sums.get(), copy_stream);
  cuda::check(cudaMemcpy2DAsync(group_host.get(), max_rows * sizeof(float), group_dev.get(),
                                group_cap * sizeof(float), max_rows * sizeof(float), n_kv, cudaMemcpyDeviceToHost,
                                copy_stream),
              "group rows copy");
}

template <class T>
std::span<const float> Impl<T>::decode(int token_id, AttentionObserver* observer,
                                                 CacheController* controller) {
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  const int H = c.n_heads, n_kv = c.n_kv_heads;
  const bool interleaved = c.rope_style == RopeStyle::Interleaved;
  const bool rope_in_cache = options.rope_in_cache;
  long_rope = c.long_rope(pos_ + 1);
  // Which layers' rows go to the host: those the observer or the controller reads.
  // A ranking the device cannot make (its heads attend different keys) is made on the host.
  const bool observer_rows = observer && observer->needs_decode_rows();
  controller_reads.assign(c.n_layers, 0);
  rows_to_host.assign(c.n_layers, observer_rows);
  rankings.assign(c.n_layers, {});
  reductions.assign(c.n_layers, std::nullopt);
  std::fill(device_ranked.begin(), device_ranked.end(), -1);
  bool any_rows = observer_rows, grouped = false;
  for (int l = 0; l < c.n_layers && controller; ++l) {
    controller_reads[l] = controller->needs_decode_rows(l);
    rows_to_host[l] = rows_to_host[l] || controller_reads[l];
    rankings[l] = controller->key_ranking(l);
    reductions[l] = controller->group_rows(l);
    any_rows = any_rows || rows_to_host[l] || rankings[l].k > 0;
    grouped = grouped || reductions[l].has_value();
  }

  if (observer) observer->on_token(pos_, token_id);
  ensure_rows(pos_ + 1, any_rows, grouped);  // no head holds more than every position so far
  token_host.get()[0] = token_id;
  cuda::check(cudaMemcpyAsync(token.get(), token_host.get(), sizeof(int32_t), cudaMemcpyHostToDevice, stream),
              "token upload");
  cuda::embed_rows(x.get(), embedding.get(), token.get(), 1, dim, stream, c.embed_scale);

  // Step metadata per layer: slot0 (where the new key goes), the rows each KV head attends, the
  // query's slot. A controller may change what is held between layers, so with one the metadata
  // is made and copied layer by layer; without one, layer 0's first, then, while the GPU computes
  // layer 0 (at 32K keys the host scans ~8 MB of active flags a step), the other layers' in one
  // copy.
  const bool per_layer_meta = controller != nullptr;
  auto plan_layers = [&](int l0, int l1) {  // layers [l0, l1)
    for (int l = l0; l < l1; ++l) {
      push_token(l);
      plan_attention(l, rows_to_host[l]);
    }
    cuda::check(cudaMemcpy2DAsync(meta_at(l0), meta_stride * sizeof(int32_t), meta_host_at(l0),
                                  meta_stride * sizeof(int32_t), (2 * n_kv + H) * sizeof(int32_t), l1 - l0,
                                  cudaMemcpyHostToDevice, stream),
                "upload of step metadata");
    for (int l = l0; l < l1; ++l) copy_lists(l);
  };
  if (!per_layer_meta) plan_layers(0, 1);

  for (int l = 0; l < c.n_layers; ++l) {
    const DeviceLayer<T>& lw = layers[l];
    int32_t* m_dev = meta_at(l);
    if (!per_layer_meta && l == 1) plan_layers(1, c.n_layers);

    // Seven launches a layer: the attention norm, the q/k/v product and its biases in one; the
    // QK-norm (Qwen3), RoPE and the append of the new key and value to the end of each KV head's
    // rows in one; the attention (two); the output product with the residual; the FFN norm,
    // gate/up product and SwiGLU in one; the down product with the residual. A model with norms
    // after its blocks (Gemma 2 and 3, OLMo 2) adds one launch to each residual add; a QK-norm
    // across a token's heads (OLMo 2), two before the RoPE.
    cuda::matvec(q, lw.wqkv.get(), x.get(), qd + 2 * kvd, dim, 0.0f, stream, {lw.attn_norm.get(), c.rms_eps},
                 lw.bqkv.size() ? lw.bqkv.get() : nullptr);  // q, k, v
    if (per_layer_meta) {
      push_token(l);
      copy_meta(l, 0, n_kv);
    }
    const bool whole_rows = norms_whole_rows(lw, c);
    if (whole_rows) norm_heads(lw, c, q, q + qd, 1, stream);
    cuda::rope_append(cache->keys(l), cache->values(l), cache->head_stride(), q, H, n_kv, hd, iota.get() + pos_,
                      rope_in_cache ? nullptr : rope_cos_of(l), rope_in_cache ? nullptr : rope_sin_of(l),
                      interleaved, m_dev, stream,
                      whole_rows ? cuda::HeadNorms{}
                                 : cuda::HeadNorms{lw.q_norm.size() ? lw.q_norm.get() : nullptr,
                                                   lw.k_norm.size() ? lw.k_norm.get() : nullptr, c.rms_eps});
    if (per_layer_meta) {
      controller->before_attention(l, pos_, *cache);
      plan_attention(l, rows_to_host[l] || rankings[l].k > 0 || reductions[l].has_value());
      copy_meta(l, n_kv, n_kv + H);
      copy_lists(l);
    }
    int rank_keys_n = -1;  // keys the device ranks at this layer
    if (rankings[l].k > 0) {
      rank_keys_n = shared_keys_below(l, rankings[l].below);
      if (rank_keys_n < 0) rows_to_host[l] = 1;
    }
    const int max_rows = layer_max_rows[l];
    // The rows each KV head attends: the shared 0..n-1 list (stride 0), or the cache's lists once
    // the edits staged for them have run.
    const int32_t* rows_dev = iota.get();
    long rows_stride = 0;
    if (layer_lists[l].ints > 0) {
      const int32_t* edits = m_dev + 2 * n_kv + H;  // [n_kv, kRowListEditInts], then the payloads
      rows_dev = cache->apply_row_lists(l, reinterpret_cast<const ops::RowListEdit*>(edits),
                                        edits + ops::kRowListEditInts * n_kv, layer_lists[l].max_entries);
      rows_stride = cache->list_stride();
    }
    if (rope_in_cache) {
      // The query goes to its KV head's last slot; keys are rotated by slot inside the attention.
      cuda::rope_rows(q, hd, H, 1, hd, m_dev + 2 * n_kv, rope_cos_of(l), rope_sin_of(l), interleaved, stream);
    }
    float* probs_l = probs.get() + static_cast<std::size_t>(l) * H * rows_cap;  // [H, rows_cap]
    float* lse_l = lse.get() + static_cast<std::size_t>(l) * H;                 // [H]
    // The rows are written only where a hook reads them or the device ranks or reduces them (at
    // 32K keys on the 8B shape, 134 MB a step written and 268 MB normalized otherwise).
    const bool on_device = rank_keys_n >= 0 || reductions[l].has_value();
    cuda::attend_decode(att.get(), rows_to_host[l] || on_device ? probs_l : nullptr, rows_cap, lse_l, q,
                        cache->keys(l), cache->values(l), cache->head_stride(), rows_dev, rows_stride, m_dev + n_kv,
                        max_rows, H, n_kv, hd, c.scoring(), rope_in_cache ? rope_cos_of(l) : nullptr,
                        rope_in_cache ? rope_sin_of(l) : nullptr,
                        rope_in_cache && rows_stride > 0 ? cache->list_slots(l) : nullptr, interleaved,
                        att_scratch.get(), stream);
    cuda::check_launch("decode attention");

    const bool to_copy_stream = rows_to_host[l] || on_device;
    if (to_copy_stream) {
      // The rows (or their ranking, or group rows) go to the host on the copy stream while the next layers
      // compute. A controller must see them before the next layer's attention (it may evict, or
      // mark keys of the next layer): it gets them below, once this layer's FFN is queued; an
      // observer alone gets every layer's rows after the token.
      cuda::check(cudaEventRecord(attended[l].get(), stream), "decode rows event");
      cuda::check(cudaStreamWaitEvent(copy_stream, attended[l].get(), 0), "decode rows event");
    }
    if (rows_to_host[l]) {
      float* host_l = probs_host.get() + static_cast<std::size_t>(l) * H * host_rows_cap;  // [H, max_rows]
      cuda::check(cudaMemcpy2DAsync(host_l, max_rows * sizeof(float), probs_l, rows_cap * sizeof(float),
                                    max_rows * sizeof(float), H, cudaMemcpyDeviceToHost, copy_stream),
                  "decode rows copy");
      cuda::check(cudaMemcpyAsync(lse_host.get() + static_cast<std::size_t>(l) * H, lse_l, H * sizeof(float),
                                  cudaMemcpyDeviceToHost, copy_stream),
                  "decode rows copy");
    }
    if (rank_keys_n >= 0) rank_on_device(l, rank_keys_n);
    if (reductions[l]) reduce_on_device(l);
    if (to_copy_stream) cuda::check(cudaEventRecord(copied[l].get(), copy_stream), "decode rows event");
    add_product(lw.wo.get(), att.get(), qd, lw.post_attn_norm);

    cuda::matvec_swiglu(ffn.get(), lw.w_gate_up.get(), x.get(), hid, dim, {lw.ffn_norm.get(), c.rms_eps}, stream,
                        c.activation == Activation::GeluTanh);
    add_product(lw.w_down.get(), ffn.get(), hid, lw.post_ffn_norm);
    if (controller) {
      // The GPU computes this layer's output and FFN while the controller decides: what it evicts
      // is this layer's cache, which they do not read (the rows it frees are written by the next
      // step's appends, queued after them). Without rows to read, the host does not wait for the
      // GPU.
      if (to_copy_stream) cuda::check(cudaStreamSynchronize(copy_stream), "decode rows copy");
      deliver_rows(l, pos_, observer_rows ? observer : nullptr, controller, controller_reads[l]);
    }
  }
  cuda::check_launch("decode layer");
  enqueue_logits(x.get());
  if (observer_rows && !controller) {
    // Each layer's rows as soon as they are on the host, while the GPU computes the next layers:
    // the observer's own work on them is hidden behind the step.
    for (int l = 0; l < c.n_layers; ++l) {
      cuda::check(cudaEventSynchronize(copied[l].get()), "decode rows copy");
      deliver_rows(l, pos_, observer, nullptr, false);
    }
  }
  finish_logits();
  ++pos_;
  if (observer) observer->on_logits(pos_ - 1, logits_out);
  return logits_out;
}

template struct Impl<__half>;
template struct Impl<__nv_bfloat16>;
template struct Impl<float>;

}  // namespace cuda_backend_detail

namespace {

std::unique_ptr<cuda_backend_detail::Forward> make_forward(const Model& model, const EngineOptions& options) {
  switch (resolve_gpu_dtype(model, options.gpu_dtype)) {
    case GpuDtype::Bf16: return std::make_unique<cuda_backend_detail::Impl<__nv_bfloat16>>(model, options);
    case GpuDtype::Fp32:
      try {
        return std::make_unique<cuda_backend_detail::Impl<float>>(model, options);
      } catch (const cuda::OutOfMemory& e) {  // the one choice that doubles what the weights take
        throw cuda::OutOfMemory(std::string(e.what()) + "; weights stored in fp32 (--gpu-dtype fp16 takes half)");
      }
    default: return std::make_unique<cuda_backend_detail::Impl<__half>>(model, options);
  }
}

}  // namespace

CudaBackend::CudaBackend(const Model& model, const EngineOptions& options) : impl_(make_forward(model, options)) {}
CudaBackend::~CudaBackend() = default;

void CudaBackend::reset() { impl_->reset(); }
void CudaBackend::rewind(int n) { impl_->rewind(n); }
std::unique_ptr<CudaBackend::Snapshot> CudaBackend::snapshot() { return impl_->snapshot(); }
void CudaBackend::restore(const Snapshot& s, CacheController* controller) { impl_->restore(s, controller); }
std::span<const float> CudaBackend::prefill(std::span<const int> tokens, AttentionObserver* observer,
                                            CacheController* controller) {
  return impl_->prefill(tokens, observer, controller);
}
std::span<const float> CudaBackend::decode(int token, AttentionObserver* observer, CacheController* controller) {
  return impl_->decode(token, observer, controller);
}
std::span<const float> CudaBackend::extend(std::span<const int> tokens, AttentionObserver* observer,
                                           CacheController* controller) {
  return impl_->extend(tokens, observer, controller);
}
int CudaBackend::pos() const { return impl_->pos(); }
std::span<const float> CudaBackend::last_logits() const { return impl_->last_logits(); }
KvSlots& CudaBackend::slots() { return impl_->slots(); }
std::size_t CudaBackend::kv_bytes() const { return impl_->kv_bytes(); }
std::size_t CudaBackend::peak_kv_bytes() const { return impl_->peak_kv_bytes(); }
std::size_t CudaBackend::weight_bytes() const { return impl_->weight_bytes(); }

}  // namespace kvs
