// The CUDA backend in a build without nvcc: never usable, and says so.
#include <stdexcept>

#include "inference/cuda_backend.h"

namespace kvs {

namespace {
constexpr const char* kNoCuda = "this build has no CUDA backend (nvcc was not found when it was configured)";
}

bool cuda_usable(std::string* why) {
  if (why) *why = kNoCuda;
  return false;
}

namespace cuda_backend_detail {
class Forward {};
}  // namespace cuda_backend_detail

CudaBackend::CudaBackend(const Model&, const EngineOptions&) { throw std::runtime_error(kNoCuda); }
CudaBackend::~CudaBackend() = default;
void CudaBackend::reset() {}
void CudaBackend::rewind(int) {}
std::unique_ptr<CudaBackend::Snapshot> CudaBackend::snapshot() { return nullptr; }
void CudaBackend::restore(const Snapshot&, CacheController*) {}
std::span<const float> CudaBackend::prefill(std::span<const int>, AttentionObserver*, CacheController*) { return {}; }
std::span<const float> CudaBackend::decode(int, AttentionObserver*, CacheController*) { return {}; }
std::span<const float> CudaBackend::extend(std::span<const int>, AttentionObserver*, CacheController*) { return {}; }
int CudaBackend::pos() const { return 0; }
std::span<const float> CudaBackend::last_logits() const { return {}; }
KvSlots& CudaBackend::slots() { throw std::runtime_error(kNoCuda); }
std::size_t CudaBackend::kv_bytes() const { return 0; }
std::size_t CudaBackend::peak_kv_bytes() const { return 0; }
std::size_t CudaBackend::weight_bytes() const { return 0; }

}  // namespace kvs
