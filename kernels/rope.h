// Rotary position embedding: inverse frequencies (plain, linear-, Llama-3-, YaRN- and
// LongRoPE-scaled), a growing cos/sin table per position, and the rotation in both pairing
// conventions.
#pragma once
#include <span>
#include <utility>
#include <vector>

namespace kvs::ops {

// Which elements of a head form a rotated pair.
//   Interleaved: (x[2i], x[2i+1])        — llama2.c checkpoints and GGUF
//   RotateHalf:  (x[i], x[i + d/2])      — Hugging Face checkpoints
enum class RopePairing { Interleaved, RotateHalf };

// inv_freq[i] = theta^(-2i/head_dim) for i < head_dim/2.
std::vector<float> rope_inv_freq(int head_dim, float theta);

// "linear" scaling: positions are divided by factor (equivalently every frequency is).
void rope_scale_linear(std::span<float> inv_freq, float factor);

// Llama-3.1 scaling: wavelengths shorter than original_max_position / high_freq_factor are kept,
// those longer than original_max_position / low_freq_factor are divided by factor, and the band
// between is interpolated smoothly.
void rope_scale_llama3(std::span<float> inv_freq, float factor, float low_freq_factor,
                       float high_freq_factor, int original_max_position);

// Each frequency divided by its own factor: inv_freq[i] /= factors[i] (LongRoPE's short or long
// factors, [head_dim/2] as inv_freq).
void rope_scale_each(std::span<float> inv_freq, std::span<const float> factors);

// YaRN scaling (as transformers computes it): frequency i keeps its value where a wavelength
// fits more than beta_fast times into original_max_position, is divided by factor where it fits
// fewer than beta_slow times, and is blended linearly between (the blend's bounds rounded outwards
// when truncate). inv_freq[head_dim/2] as rope_inv_freq(head_dim, theta) gives it. The rotation's
// attention factor (YarnScaling::attention_factor) is the table's scale, not applied here.
void rope_scale_yarn(std::span<float> inv_freq, float theta, float factor, float beta_fast, float beta_slow,
                     int original_max_position, bool truncate);

// The cos/sin multiplier YaRN pairs with a factor: 0.1 * mscale * ln(factor) + 1 (1 for factor <= 1).
float yarn_mscale(float factor, float mscale = 1.0f);
// LongRoPE's: sqrt(1 + ln(factor) / ln(original_max_position)) (1 for factor <= 1).
float longrope_mscale(float factor, int original_max_position);

// scale * cos/sin of pos * inv_freq[i] for positions 0..size()-1, extended on demand. scale is 1
// but for YaRN and LongRoPE, whose attention factor scales every rotated query and key (so every
// score by its square), as transformers scales its cos and sin; it applies to the first
// scaled_pairs frequencies (all where negative): a partially rotated head's unrotated dims
// (frequency 0) keep cos 1, unscaled, as transformers passes them through.
class RopeTable {
 public:
  explicit RopeTable(std::vector<float> inv_freq, float scale = 1.0f, int scaled_pairs = -1)
      : inv_freq_(std::move(inv_freq)), scale_(scale), scaled_pairs_(scaled_pairs) {}
  // Makes positions 0..n_pos-1 available (grows geometrically).
  void reserve(int n_pos);
  int half() const { return static_cast<int>(inv_freq_.size()); }
  const float* cos(int pos) const { return cos_.data() + static_cast<long>(pos) * half(); }
  const float* sin(int pos) const { return sin_.data() + static_cast<long>(pos) * half(); }

 private:
  std::vector<float> inv_freq_;  // [half]
  float scale_;
  int scaled_pairs_;
  std::vector<float> cos_;       // [n_pos, half]
  std::vector<float> sin_;       // [n_pos, half]
  int n_pos_ = 0;
};

// Rotates n_heads consecutive heads of x ([n_heads, head_dim]) by one position's angles
// (cos[head_dim/2], sin[head_dim/2]).
void rope_apply(float* x, int n_heads, int head_dim, const float* cos, const float* sin,
                RopePairing pairing);

}  // namespace kvs::ops
