// Test helper: a model kept as stored (quantized or 16-bit panels) against its fp32 twin: the same
// prefill logits bit for bit, and the same greedy tokens and logits through decode, to rounding
// (decode's products may fuse a multiply-add where the fp32 ones do not: quant_panel_dot); or,
// where a multiplier was folded into the stored weights' factors (weights within a rounding or two
// of the twin's), the same tokens and all logits within a looser tolerance.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "inference/engine.h"

namespace kvs::testing {

inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline int argmax(std::span<const float> v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The largest difference between a and b, over the largest |b|.
inline float relative_difference(std::span<const float> a, std::span<const float> b) {
  float largest = 0.0f, worst = 0.0f;
  for (std::size_t i = 0; i < b.size(); ++i) {
    largest = std::max(largest, std::abs(b[i]));
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst / largest;
}

// `tol`: decode's logits (and prefill's, where not `prefill_bits`) relative to the largest.
inline void expect_same_decoding(const Model& stored, const Model& fp32, const std::vector<int>& prompt, int steps,
                                 float tol = 1e-5f, bool prefill_bits = true) {
  Engine se(stored), fe(fp32);
  std::span<const float> sl = se.prefill(prompt), fl = fe.prefill(prompt);
  if (prefill_bits) ASSERT_TRUE(same_bits(sl, fl)) << "prefill logits";
  else ASSERT_LE(relative_difference(sl, fl), tol) << "prefill logits";
  for (int step = 0; step < steps; ++step) {
    const int token = argmax(fl);
    ASSERT_EQ(argmax(sl), token) << "decode step " << step;
    sl = se.decode(token);
    fl = fe.decode(token);
    ASSERT_LE(relative_difference(sl, fl), tol) << "decode step " << step;
  }
}

}  // namespace kvs::testing
