// Helpers of the device-twin tests (cuda_*_test.cpp): skip without a GPU, upload/download
// vectors, random data, fp16/bf16 rounding on the host, the storage types (fp16, bf16, fp32) for
// typed tests, and a mixed relative/absolute comparison.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "inference/cuda_device.h"
#include "tests/kernels/random_data.h"

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

using kvs::test::random_vec;

// The backend's storage types on the host: fp32 rounded to T (nearest even; fp32 as it is) and back.
template <class T>
T from_float(float f) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half(f);
  } else if constexpr (std::is_same_v<T, float>) {
    return f;
  } else {
    return __float2bfloat16_rn(f);
  }
}

template <class T>
float widen(T h) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(h);
  } else if constexpr (std::is_same_v<T, float>) {
    return h;
  } else {
    return __bfloat162float(h);
  }
}

// Parts of T the backend splits an fp32 activation into for its GEMMs (cuda::split_store): two
// fp16, three bf16, one fp32.
template <class T>
constexpr int kSplitParts = std::is_same_v<T, __half> ? 2 : std::is_same_v<T, float> ? 1 : 3;

template <class T>
std::vector<T> to_store(const std::vector<float>& v) {
  std::vector<T> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = from_float<T>(v[i]);
  return h;
}

template <class T>
std::vector<float> to_float(const std::vector<T>& h) {
  std::vector<float> v(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) v[i] = widen(h[i]);
  return v;
}

// v rounded through T and back: what the device sees of data it stores as T.
template <class T>
std::vector<float> round_store(const std::vector<float>& v) { return to_float(to_store<T>(v)); }

// The bits of a stored value: 16 of fp16 or bf16, 32 of fp32.
template <class T>
using Bits = std::conditional_t<sizeof(T) == 2, uint16_t, uint32_t>;

template <class T>
Bits<T> bits(T h) {
  static_assert(sizeof(T) == sizeof(Bits<T>));
  Bits<T> b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}

// The storage types, for typed tests: TYPED_TEST_SUITE(Suite, StoreTypes, StoreNames) names the
// instances fp16, bf16 and fp32.
using StoreTypes = ::testing::Types<__half, __nv_bfloat16, float>;
struct StoreNames {
  template <class T>
  static std::string GetName(int) {
    return std::is_same_v<T, __half> ? "fp16" : std::is_same_v<T, float> ? "fp32" : "bf16";
  }
};

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

// Bitwise-equal stored values.
template <class T>
::testing::AssertionResult same_bits(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (bits(got[i]) != bits(want[i])) {
      return ::testing::AssertionFailure() << "first difference at " << i << ": bits 0x" << std::hex
                                           << bits(got[i]) << " vs 0x" << bits(want[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kvs::cuda::test
