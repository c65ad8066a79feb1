// Benchmark support for bench_cuda: the GPU it runs on (one line), its copy bandwidth (the limit
// decode is measured against), each decode kernel timed alone on a model shape's sizes (--ops),
// and the switch for the decode kernels' overlapped launches. Without a CUDA build the probes
// measure nothing (0 bandwidth, no lines).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/random_model.h"
#include "inference/cuda_backend.h"
#include "inference/model.h"

#ifdef KVSCOPE_CUDA
#include <cuda_runtime_api.h>

#include "inference/cuda_device.h"
#include "kernels/cuda_ops.h"
#endif

namespace kvs::bench {

// The median of v (the mean of the middle two for an even count); 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#ifdef KVSCOPE_CUDA
// Best of `reps` device-to-device copies of `bytes`, counting bytes read and written (2 x bytes
// per copy), in bytes/s. Timed with events on a stream of its own after one warm-up copy.
inline double copy_bandwidth(std::size_t bytes, int reps) {
  namespace cu = kvs::cuda;
  cu::DeviceBuffer<char> src(bytes, "the bandwidth probe"), dst(bytes, "the bandwidth probe");
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cu::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "probe stream");
  cu::check(cudaEventCreate(&start), "probe event");
  cu::check(cudaEventCreate(&stop), "probe event");
  double best = 0.0;
  try {
    cu::check(cudaMemsetAsync(src.get(), 1, bytes, stream), "probe fill");
    cu::check(cudaMemsetAsync(dst.get(), 0, bytes, stream), "probe fill");
    cu::check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream), "probe copy");
    for (int r = 0; r < reps; ++r) {
      cu::check(cudaEventRecord(start, stream), "probe event");
      cu::check(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream), "probe copy");
      cu::check(cudaEventRecord(stop, stream), "probe event");
      cu::check(cudaEventSynchronize(stop), "probe copy");
      float ms = 0.0f;
      cu::check(cudaEventElapsedTime(&ms, start, stop), "probe timing");
      if (ms > 0.0f) best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3));
    }
  } catch (...) {
    cudaEventDestroy(stop);
    cudaEventDestroy(start);
    cudaStreamDestroy(stream);
    throw;
  }
  cudaEventDestroy(stop);
  cudaEventDestroy(start);
  cudaStreamDestroy(stream);
  return best;
}

// Fills b with reproducible values uniform in [-scale, scale), a 1M-element pattern repeated:
// kernels timed on zeros can run faster than on real data (less switching power, higher clocks).
template <class U>
inline void random_fill(kvs::cuda::DeviceBuffer<U>& b, float scale, uint64_t seed) {
  const std::size_t n = std::min<std::size_t>(b.size(), std::size_t{1} << 20);
  std::vector<U> pattern(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = scale * hash_uniform(seed, i);
    if constexpr (std::is_same_v<U, float>) {
      pattern[i] = v;
    } else if constexpr (std::is_same_v<U, __half>) {
      pattern[i] = __float2half(v);
    } else {
      pattern[i] = __float2bfloat16(v);
    }
  }
  for (std::size_t at = 0; at < b.size(); at += n) {
    kvs::cuda::check(cudaMemcpy(b.get() + at, pattern.data(), std::min(n, b.size() - at) * sizeof(U),
                                cudaMemcpyHostToDevice),
                     "ops fill");
  }
}

// --ops: each decode kernel alone on the shape's sizes (device buffers of its own, random data,
// 20 timed launches after 3), as bytes it must read / time against the copy bandwidth, so that a
// decode step below its limit can be traced to the op that falls short. Store: the storage type
// (__half, __nv_bfloat16 or float).
template <class Store>
inline void print_op_table(const kvs::ModelConfig& c, const std::vector<int>& contexts, double bandwidth) {
  namespace cu = kvs::cuda;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  cu::check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "ops stream");
  cu::check(cudaEventCreate(&start), "ops event");
  cu::check(cudaEventCreate(&stop), "ops event");
  auto time_ms = [&](auto&& launch) {  // median of 20 after 3 warm-ups
    for (int r = 0; r < 3; ++r) launch();
    std::vector<double> ms;
    for (int r = 0; r < 20; ++r) {
      cu::check(cudaEventRecord(start, stream), "ops event");
      launch();
      cu::check(cudaEventRecord(stop, stream), "ops event");
      cu::check(cudaEventSynchronize(stop), "ops launch");
      float t = 0.0f;
      cu::check(cudaEventElapsedTime(&t, start, stop), "ops timing");
      ms.push_back(t);
    }
    return median(ms);
  };
  std::printf("\n| decode op (alone) | bytes read | time | GB/s | fraction of copy bandwidth |\n|---|---|---|---|---|\n");
  auto row = [&](const std::string& name, double bytes, double ms) {
    std::printf("| %s | %.1f MB | %.1f us | %.0f | %.2f |\n", name.c_str(), bytes / 1e6, ms * 1e3,
                bytes / (ms * 1e-3) / 1e9, bytes / (ms * 1e-3) / bandwidth);
  };
  const int d = c.dim, h = c.hidden_dim, qkv = c.q_dim() + 2 * c.kv_dim();
  // As decode issues them: the norms before q/k/v, gate/up and the classifier ride in those
  // products, and SwiGLU in gate/up's.
  enum class Fused { None, Norm, NormSwiglu };
  struct Product {
    const char* name;
    int rows, cols;
    Fused fused;
  };
  const Product products[] = {{"matvec q,k,v stacked + norm", qkv, d, Fused::Norm},
                              {"matvec o", d, c.q_dim(), Fused::None},
                              {"matvec gate,up stacked + norm + SwiGLU", 2 * h, d, Fused::NormSwiglu},
                              {"matvec down", d, h, Fused::None},
                              {"matvec classifier + norm", c.vocab_size, d, Fused::Norm}};
  for (const Product& p : products) {
    cu::DeviceBuffer<Store> w(static_cast<std::size_t>(p.rows) * p.cols, "ops weights");
    cu::DeviceBuffer<float> x(p.cols, "ops input"), g(p.cols, "ops norm"), y(p.rows, "ops output");
    random_fill(w, 0.02f, 41);
    random_fill(x, 1.0f, 42);
    random_fill(g, 1.0f, 43);
    const cu::Norm norm{p.fused == Fused::None ? nullptr : g.get(), 1e-5f};
    const double ms = time_ms([&] {
      if (p.fused == Fused::NormSwiglu) {
        cu::matvec_swiglu(y.get(), w.get(), x.get(), p.rows / 2, p.cols, norm, stream);
      } else {
        cu::matvec(y.get(), w.get(), x.get(), p.rows, p.cols, 0.0f, stream, norm);
      }
    });
    row(std::string(p.name) + " " + std::to_string(p.rows) + "x" + std::to_string(p.cols),
        static_cast<double>(sizeof(Store)) * p.rows * p.cols, ms);
  }
  const int H = c.n_heads, n_kv = c.n_kv_heads, hd = c.head_dim;
  for (int T : contexts) {
    const std::size_t kv = static_cast<std::size_t>(n_kv) * T * hd;
    cu::DeviceBuffer<Store> k(kv, "ops keys"), v(kv, "ops values");
    cu::DeviceBuffer<float> q(static_cast<std::size_t>(H) * hd, "ops query"), out(static_cast<std::size_t>(H) * hd, "ops out");
    cu::DeviceBuffer<float> probs(static_cast<std::size_t>(H) * T, "ops rows"), lse(H, "ops lse");
    cu::DeviceBuffer<float> scratch(cu::attend_decode_scratch_floats(H, T, hd), "ops scratch");
    std::vector<int32_t> counting(T), n_rows(n_kv, T);
    std::iota(counting.begin(), counting.end(), 0);
    cu::DeviceBuffer<int32_t> rows(T, "ops rows"), n_dev(n_kv, "ops rows");
    cu::check(cudaMemcpy(rows.get(), counting.data(), rows.bytes(), cudaMemcpyHostToDevice), "ops upload");
    cu::check(cudaMemcpy(n_dev.get(), n_rows.data(), n_dev.bytes(), cudaMemcpyHostToDevice), "ops upload");
    random_fill(k, 1.0f, 44);
    random_fill(v, 1.0f, 45);
    random_fill(q, 1.0f, 46);
    const long head_stride = static_cast<long>(T) * hd;
    const double ms = time_ms([&] {
      cu::attend_decode(out.get(), probs.get(), T, lse.get(), q.get(), k.get(), v.get(), head_stride, rows.get(), 0,
                        n_dev.get(), T, H, n_kv, hd, 1.0f, nullptr, nullptr, nullptr, false, scratch.get(), stream);
    });
    row("attention of one layer, " + std::to_string(T) + " keys (K+V)", 2.0 * sizeof(Store) * kv, ms);
  }
  cudaEventDestroy(stop);
  cudaEventDestroy(start);
  cudaStreamDestroy(stream);
}

inline void print_ops(const kvs::ModelConfig& c, const std::vector<int>& contexts, double bandwidth,
                      kvs::GpuDtype d) {
  if (d == kvs::GpuDtype::Bf16) {
    print_op_table<__nv_bfloat16>(c, contexts, bandwidth);
  } else if (d == kvs::GpuDtype::Fp32) {
    print_op_table<float>(c, contexts, bandwidth);
  } else {
    print_op_table<__half>(c, contexts, bandwidth);
  }
}

// One line: the GPU's name, memory, SMs, CUDA versions.
inline void print_gpu() {
  cudaDeviceProp p{};
  int device = 0;
  kvs::cuda::check(cudaGetDevice(&device), "device query");
  kvs::cuda::check(cudaGetDeviceProperties(&p, device), "device query");
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("GPU: %s, %.1f GiB, %d SMs; CUDA runtime %d.%d, driver supports %d.%d\n", p.name,
              static_cast<double>(p.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), p.multiProcessorCount,
              runtime / 1000, runtime % 1000 / 10, driver / 1000, driver % 1000 / 10);
}
// The decode kernels' overlap with the kernel before them (kernels/cuda_launch.cuh).
inline void set_overlap(bool on) { kvs::cuda::set_launch_overlap(on); }
#else
inline double copy_bandwidth(std::size_t, int) { return 0.0; }
inline void set_overlap(bool) {}
inline void print_gpu() {}
inline void print_ops(const kvs::ModelConfig&, const std::vector<int>&, double, kvs::GpuDtype) {}
#endif

}  // namespace kvs::bench
