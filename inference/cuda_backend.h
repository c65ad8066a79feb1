// The forward pass on an NVIDIA GPU, behind Engine (EngineOptions::device = Device::Cuda): fp16,
// bf16 or fp32 weights and KV cache (EngineOptions::gpu_dtype), fp32 accumulation and softmax,
// cuBLAS for the projections and the kernels of kernels/*.cu for the rest. Observers and
// controllers see what the CPU engine shows them; only what they ask for crosses PCIe (decode
// rows, and for prefill either the rows or the per-head reductions computed on the device).
// Without a CUDA build, cuda_absent.cpp stands in.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "inference/engine.h"

namespace kvs {

// Whether this build and machine can run the CUDA backend; when not, *why says why in a phrase.
bool cuda_usable(std::string* why = nullptr);

namespace cuda_backend_detail {
class Forward;  // the backend for one storage type (cuda_backend_impl.h)
}

class CudaBackend {
 public:
  // Uploads the model's weights in resolve_gpu_dtype(model, options.gpu_dtype). Throws
  // cuda::OutOfMemory (bytes asked and free) or std::runtime_error ("CUDA: ...") when the GPU
  // cannot host it.
  CudaBackend(const Model& model, const EngineOptions& options);
  ~CudaBackend();
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  void reset();
  void rewind(int n);  // as Engine::rewind (n already checked)
  // The prompt's K and V, copied on the device by snapshot() (Engine::snapshot_prefill).
  struct Snapshot {
    virtual ~Snapshot() = default;
  };
  // After a prefill no controller compressed (checked by Engine): a copy of every entry's K and V
  // in device memory, or nullptr unless three times its size is free (the copy, and the cache
  // doubling beside it as runs decode).
  std::unique_ptr<Snapshot> snapshot();
  // Puts the cache back as `s` copied it (pos() its prompt's length), then calls the controller's
  // after_prefill.
  void restore(const Snapshot& s, CacheController* controller);
  // As Engine::prefill / Engine::decode (inputs already checked by Engine).
  std::span<const float> prefill(std::span<const int> tokens, AttentionObserver* observer,
                                 CacheController* controller);
  std::span<const float> decode(int token, AttentionObserver* observer, CacheController* controller);
  // As Engine::extend, batched (a pass over the chunk's rows); not for rope_in_cache.
  std::span<const float> extend(std::span<const int> tokens, AttentionObserver* observer,
                                CacheController* controller);

  int pos() const;
  std::span<const float> last_logits() const;  // [vocab] those the last prefill, decode or extend returned
  KvSlots& slots();
  std::size_t kv_bytes() const;       // K+V bytes held now
  std::size_t peak_kv_bytes() const;
  std::size_t weight_bytes() const;   // device bytes of the weights

 private:
  std::unique_ptr<cuda_backend_detail::Forward> impl_;
};

}  // namespace kvs
