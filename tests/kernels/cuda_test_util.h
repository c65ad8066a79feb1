// Helpers of the device-twin tests (cuda_*_test.cpp): skip without a GPU, upload/download
// vectors, random data, half rounding on the host, and a mixed relative/absolute comparison.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "inference/cuda_device.h"

// Skips the current test (GTEST_SKIP returns from it) when no usable GPU is present.
#define KVS_REQUIRE_GPU()                                         \
  do {                                                            \
    std::string kvs_why_;                                         \
    if (!kvs::cuda::gpu_present(&kvs_why_)) {                     \
      GTEST_SKIP() << "no usable GPU: " << kvs_why_;              \
    }                                                             \
  } while (0)

namespace kvs::cuda::test {

template <class T>
DeviceBuffer<T> upload(const std::vector<T>& v) {
  DeviceBuffer<T> b(v.size(), "test upload");
  check(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return b;
}

template <class T>
std::vector<T> download(const DeviceBuffer<T>& b) {
  std::vector<T> v(b.size());
  check(cudaMemcpy(v.data(), b.get(), b.size() * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return v;
}

// After the launches of a test: the launch error, then the execution error.
inline void sync(const char* what) {
  check(cudaGetLastError(), what);
  check(cudaDeviceSynchronize(), what);
}

inline std::vector<float> random_vec(std::size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline std::vector<__half> to_half(const std::vector<float>& v) {
  std::vector<__half> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = __float2half(v[i]);
  return h;
}

inline std::vector<float> to_float(const std::vector<__half>& h) {
  std::vector<float> v(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) v[i] = __half2float(h[i]);
  return v;
}

// v rounded through half and back: what the device sees of data it stores as half.
inline std::vector<float> round_half(const std::vector<float>& v) { return to_float(to_half(v)); }

inline uint16_t half_bits(__half h) {
  uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}

// |a - b| <= atol + rtol * |b| (b the reference).
inline bool near(double a, double b, double rtol, double atol) {
  return std::fabs(a - b) <= atol + rtol * std::fabs(b);
}

// Every got[i] near want[i]; the failure names the first mismatch and how many there are.
template <class A, class B>
::testing::AssertionResult all_close(const A& got, const B& want, double rtol, double atol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  }
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!near(got[i], want[i], rtol, atol)) {
      if (bad++ == 0) first = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " differ; first at " << first
                                       << ": " << got[first] << " vs " << want[first];
}

// Bitwise-equal halves.
inline ::testing::AssertionResult same_halves(const std::vector<__half>& got,
                                              const std::vector<__half>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (half_bits(got[i]) != half_bits(want[i])) {
      return ::testing::AssertionFailure() << "first difference at " << i << ": bits 0x" << std::hex
                                           << half_bits(got[i]) << " vs 0x" << half_bits(want[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kvs::cuda::test
