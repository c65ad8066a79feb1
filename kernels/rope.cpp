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

void rope_scale_each(std::span<float> inv_freq, std::span<const float> factors) {
  for (std::size_t i = 0; i < inv_freq.size(); ++i) inv_freq[i] /= factors[i];
}

void rope_scale_yarn(std::span<float> inv_freq, float theta, float factor, float beta_fast, float beta_slow,
                     int original_max_position, bool truncate) {
  const int half = static_cast<int>(inv_freq.size());
  const double dim = 2.0 * half;
  // The (fractional) index of the frequency that turns `rotations` times over the original context.
  const auto index_of = [&](double rotations) {
    return dim * std::log(original_max_position / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
  };
  double low = index_of(beta_fast), high = index_of(beta_slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // as transformers: no division by zero
  for (int i = 0; i < half; ++i) {
    // 1 keeps the frequency (extrapolation), 0 divides it by factor (interpolation).
    const float keep = 1.0f - static_cast<float>(std::clamp((i - low) / (high - low), 0.0, 1.0));
    const float f = inv_freq[i];
    inv_freq[i] = f / factor * (1.0f - keep) + f * keep;
  }
}

float yarn_mscale(float factor, float mscale) {
  return factor <= 1.0f ? 1.0f : 0.1f * mscale * std::log(factor) + 1.0f;
}

float longrope_mscale(float factor, int original_max_position) {
  return factor <= 1.0f ? 1.0f
                        : std::sqrt(1.0f + std::log(factor) / std::log(static_cast<float>(original_max_position)));
}

void RopeTable::reserve(int n_pos) {
  if (n_pos <= n_pos_) return;
  const int grown = std::max(n_pos, std::max(64, 2 * n_pos_));
  const int h = half();
  cos_.resize(static_cast<std::size_t>(grown) * h);
  sin_.resize(static_cast<std::size_t>(grown) * h);
  const int scaled = scaled_pairs_ < 0 ? h : std::min(scaled_pairs_, h);
  for (int p = n_pos_; p < grown; ++p) {
    for (int i = 0; i < h; ++i) {
      const float angle = static_cast<float>(p) * inv_freq_[i];
      const float scale = i < scaled ? scale_ : 1.0f;
      cos_[static_cast<std::size_t>(p) * h + i] = scale * std::cos(angle);
      sin_[static_cast<std::size_t>(p) * h + i] = scale * std::sin(angle);
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
