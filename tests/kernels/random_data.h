// Test support for the kernel tests: reproducible uniform random floats.
#pragma once
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace kvs::test {

// n floats uniform in [lo, hi), the same for the same seed on every machine's libstdc++.
inline std::vector<float> random_vec(std::size_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace kvs::test
