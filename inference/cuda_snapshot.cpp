// CudaBackend's prefill snapshot: the prompt's K and V copied within device memory after a
// prefill, and copied back to start another run from that prompt (Engine::snapshot_prefill).
#include <utility>

#include "inference/cuda_backend_impl.h"

namespace kvs {

namespace cuda_backend_detail {

namespace {

template <class T>
struct DeviceSnapshot : CudaBackend::Snapshot {
  int prompt_len = 0;
  cuda::DeviceBuffer<T> k, v;  // [n_layers, n_kv_heads, prompt_len, head_dim]
};

// Every head's first n rows of `from` ([n_kv_heads, from_rows, head_dim] a layer) to `to`
// ([n_kv_heads, to_rows, head_dim]), on the stream.
template <class T>
void copy_rows(T* to, long to_rows, const T* from, long from_rows, int n, int n_kv_heads, int head_dim,
               cudaStream_t stream) {
  const std::size_t row = static_cast<std::size_t>(head_dim) * sizeof(T);
  cuda::check(cudaMemcpy2DAsync(to, to_rows * row, from, from_rows * row, n * row, n_kv_heads,
                                cudaMemcpyDeviceToDevice, stream),
              "prefill snapshot");
}

}  // namespace

template <class T>
std::unique_ptr<CudaBackend::Snapshot> Impl<T>::snapshot() {
  const int P = pos_, G = c.n_kv_heads, hd = c.head_dim;
  const std::size_t layer = static_cast<std::size_t>(G) * P * hd;
  // Room for the copy and, beside it, for the cache to double once as the runs decode past the
  // prompt (CudaKvCache::grow holds old and new rows together): else no copy, so that a run that
  // fits without it is not the one to run out of memory.
  std::size_t free_b = 0, total_b = 0;
  cuda::check(cudaMemGetInfo(&free_b, &total_b), "GPU memory query");
  const std::size_t bytes = 2 * c.n_layers * layer * sizeof(T);  // K and V
  if (free_b < 3 * bytes) return nullptr;
  auto s = std::make_unique<DeviceSnapshot<T>>();
  s->prompt_len = P;
  try {
    s->k = cuda::DeviceBuffer<T>(c.n_layers * layer, "the prefill snapshot");
    s->v = cuda::DeviceBuffer<T>(c.n_layers * layer, "the prefill snapshot");
  } catch (const cuda::OutOfMemory&) {
    return nullptr;  // no room for a second copy: the caller prefills again
  }
  // After a prefill on a cleared cache, entry i of every head sits in row i.
  for (int l = 0; l < c.n_layers; ++l) {
    copy_rows(s->k.get() + l * layer, P, cache->keys(l), cache->rows(), P, G, hd, stream);
    copy_rows(s->v.get() + l * layer, P, cache->values(l), cache->rows(), P, G, hd, stream);
  }
  sync();
  return s;
}

template <class T>
void Impl<T>::restore(const CudaBackend::Snapshot& snapshot, CacheController* controller) {
  const auto& s = dynamic_cast<const DeviceSnapshot<T>&>(snapshot);
  const int P = s.prompt_len, G = c.n_kv_heads, hd = c.head_dim;
  const std::size_t layer = static_cast<std::size_t>(G) * P * hd;
  reset();
  for (int l = 0; l < c.n_layers; ++l)
    for (int g = 0; g < G; ++g) cache->push(l, g, 0, P);  // rows 0..P-1, as the prefill's pushes
  for (int l = 0; l < c.n_layers; ++l) {
    copy_rows(cache->keys(l), cache->rows(), s.k.get() + l * layer, P, P, G, hd, stream);
    copy_rows(cache->values(l), cache->rows(), s.v.get() + l * layer, P, P, G, hd, stream);
  }
  pos_ = P;
  sync();
  if (controller) controller->after_prefill(P, *cache);
}

template std::unique_ptr<CudaBackend::Snapshot> Impl<__half>::snapshot();
template std::unique_ptr<CudaBackend::Snapshot> Impl<__nv_bfloat16>::snapshot();
template std::unique_ptr<CudaBackend::Snapshot> Impl<float>::snapshot();
template void Impl<__half>::restore(const CudaBackend::Snapshot&, CacheController*);
template void Impl<__nv_bfloat16>::restore(const CudaBackend::Snapshot&, CacheController*);
template void Impl<float>::restore(const CudaBackend::Snapshot&, CacheController*);

}  // namespace cuda_backend_detail
}  // namespace kvs
