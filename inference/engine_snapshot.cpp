// Engine::snapshot_prefill / restore_prefill: the cache a prefill left, copied (on the GPU by
// the backend, in device memory) and put back, so that several runs start from one prompt.
#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "inference/cuda_backend.h"
#include "inference/engine.h"
#include "inference/engine_state.h"

namespace kvs {

struct PrefillSnapshot {
  const Engine* engine = nullptr;  // the engine it was taken from, the only one it restores
  int prompt_len = 0;
  std::vector<float> logits;                         // [vocab]
  std::vector<std::byte> kv;                         // CPU: [n_layers, n_kv_heads, 2 (K, V), prompt_len, head_dim]
                                                     // elements of the cache's type
  std::unique_ptr<CudaBackend::Snapshot> device;     // CUDA
};

std::shared_ptr<const PrefillSnapshot> Engine::snapshot_prefill() const {
  const ModelConfig& c = model_.config;
  const int P = pos();
  KvSlots& kv = cuda_ ? cuda_->slots() : state_->store;
  // A prefill on a cleared cache holds positions 0..P-1, all active, entry i in row i of each head.
  bool whole = P > 0;
  for (int l = 0; l < c.n_layers && whole; ++l)
    for (int g = 0; g < c.n_kv_heads && whole; ++g) {
      const std::span<const int32_t> held = kv.held(l, g);
      const std::span<const uint8_t> active = kv.active(l, g);
      whole = static_cast<int>(held.size()) == P && held.back() == P - 1 &&
              !std::memchr(active.data(), 0, active.size()) && (cuda_ || state_->store.rows_in_order(l, g));
    }
  if (!whole) throw std::logic_error("Engine::snapshot_prefill: the cache is not what a prefill left");
  auto snap = std::make_shared<PrefillSnapshot>();
  snap->engine = this;
  snap->prompt_len = P;
  try {
    if (cuda_) {
      const std::span<const float> logits = cuda_->last_logits();
      snap->logits.assign(logits.begin(), logits.end());
      snap->device = cuda_->snapshot();
      if (!snap->device) return nullptr;
    } else {
      snap->logits = state_->logits;
      const KvStore& store = state_->store;
      const std::size_t head = static_cast<std::size_t>(P) * c.head_dim * KvStore::element_bytes(store.type());  // bytes of K (or V) a head
      snap->kv.resize(static_cast<std::size_t>(c.n_layers) * c.n_kv_heads * 2 * head);
      std::byte* out = snap->kv.data();
      for (int l = 0; l < c.n_layers; ++l)
        for (int g = 0; g < c.n_kv_heads; ++g, out += 2 * head) {  // entry i in row i
          std::memcpy(out, store.keys(l, g).data, head);
          std::memcpy(out + head, store.values(l, g).data, head);
        }
    }
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return snap;
}

std::span<const float> Engine::restore_prefill(const PrefillSnapshot& snap) {
  if (snap.engine != this) throw std::logic_error("Engine::restore_prefill: a snapshot of another engine");
  State& s = *state_;
  if (cuda_) {
    cuda_->restore(*snap.device, s.controller);
    return snap.logits;
  }
  const ModelConfig& c = model_.config;
  const int P = snap.prompt_len;
  const std::size_t head = static_cast<std::size_t>(P) * c.head_dim * KvStore::element_bytes(s.store.type());
  reset();
  const std::byte* in = snap.kv.data();
  for (int l = 0; l < c.n_layers; ++l)
    for (int g = 0; g < c.n_kv_heads; ++g, in += 2 * head) s.store.append_stored(l, g, 0, P, in, in + head);
  s.pos = P;
  s.logits = snap.logits;
  if (s.controller) s.controller->after_prefill(P, s.store);
  return s.logits;
}

}  // namespace kvs
