// RoPE frequencies, scaling rules and the pair rotation.
#include "kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kvs::ops {

std::vector<float> rope_inv_freq(int head_dim, float theta) {
  std::vector<float> inv_freq(head_dim / 2);  // [head_dim/2]
  for (int i = 0; i < head_dim / 2; ++i) {
    inv_freq[i] = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(head_dim));
  }
  return inv_freq;
}

void rope_scale_linear(std::span<float> inv_freq, float factor) {
  for (float& f : inv_freq) f /= factor;
}

void rope_scale_llama3(std::span<float> inv_freq, float factor, float low_freq_factor,
                       float high_freq_factor, int original_max_position) {
  const float old_len = static_cast<float>(original_max_position);
  const float low_freq_wavelen = old_len / low_freq_factor;
  const float high_freq_wavelen = old_len / high_freq_factor;
  for (float& f : inv_freq) {
    const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
    if (wavelen < high_freq_wavelen) continue;
    if (wavelen > low_freq_wavelen) {
      f /= factor;
    } else {
      const float smooth = (old_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      f = (1.0f - smooth) * f / factor + smooth * f;
    }
  }
}

void RopeTable::reserve(int n_pos) {
  if (n_pos <= n_pos_) return;
  const int grown = std::max(n_pos, std::max(64, 2 * n_pos_));
  const int h = half();
  cos_.resize(static_cast<std::size_t>(grown) * h);
  sin_.resize(static_cast<std::size_t>(grown) * h);
  for (int p = n_pos_; p < grown; ++p) {
    for (int i = 0; i < h; ++i) {
      const float angle = static_cast<float>(p) * inv_freq_[i];
      cos_[static_cast<std::size_t>(p) * h + i] = std::cos(angle);
      sin_[static_cast<std::size_t>(p) * h + i] = std::sin(angle);
    }
  }
  n_pos_ = grown;
}

void rope_apply(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                RopePairing pairing) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<long>(h) * head_dim;
    if (pairing == RopePairing::Interleaved) {
      for (int i = 0; i < half; ++i) {
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * cos[i] - b * sin[i];
        v[2 * i + 1] = a * sin[i] + b * cos[i];
      }
    } else {
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        const float a = v[i], b = v[i + half];
        v[i] = a * cos[i] - b * sin[i];
        v[i + half] = a * sin[i] + b * cos[i];
      }
    }
  }
}

}  // namespace kvs::ops
