// Benchmark support: Llama-shaped models with reproducible random weights, built in memory fast
// enough for 100M-parameter shapes (a per-index hash, filled in parallel).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "inference/model.h"

namespace kvs::bench {

// splitmix64 of (seed, index) -> uniform in [-1, 1): reproducible and order-free.
inline float hash_uniform(uint64_t seed, std::size_t i) {
  uint64_t z = (seed << 40) + i + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1.0p-23f - 1.0f;
}

// v[n] uniform in [-scale, scale) (fast, parallel, reproducible).
inline void random_weights(float* v, std::size_t n, uint64_t seed, float scale) {
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * hash_uniform(seed, i);
}

// A model of shape `c` (unit norms; a classifier of its own unless c.tied_classifier); matrices
// scaled by `scale` (~1/sqrt(dim)), the down projection by `down_scale`, the embedding by
// `embed_scale`.
inline Model random_model(const ModelConfig& c, float scale, float down_scale, float embed_scale = 1.0f) {
  Model m;
  m.config = c;
  m.format = "llama2c";
  m.weight_type = "F32";
  const std::size_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim();
  uint64_t seed = 1;
  PackQueue packs;  // the matrices in one allocation, as a loader leaves them
  auto matrix = [&seed, &packs](PackedMatrix& dst, std::size_t rows, std::size_t cols, float s) {
    packs.add(dst, static_cast<int>(rows), static_cast<int>(cols),
              [n = rows * cols, seed = seed++, s](float* w) { random_weights(w, n, seed, s); });
  };
  m.weights.layers.resize(c.n_layers);
  matrix(m.weights.token_embedding, c.vocab_size, d, embed_scale);
  if (!c.tied_classifier) matrix(m.weights.classifier, c.vocab_size, d, scale);
  for (LayerWeights& w : m.weights.layers) {
    w.attn_norm.assign(d, 1.0f);
    w.ffn_norm.assign(d, 1.0f);
    matrix(w.wq, q, d, scale);
    matrix(w.wk, kv, d, scale);
    matrix(w.wv, kv, d, scale);
    matrix(w.wo, d, q, scale);
    matrix(w.w_gate, h, d, scale);
    matrix(w.w_up, h, d, scale);
    matrix(w.w_down, d, h, down_scale);
  }
  m.weights.final_norm.assign(d, 1.0f);
  packs.pack("random model");
  return m;
}

// The shape issue 2's decode target is measured on, stories110M: dim 768, 12 layers, 12 heads,
// hidden 2048, vocab 32000, seq_len 1024.
inline Model stories110m_shaped() {
  ModelConfig c;
  c.name = "random stories110M-shaped";
  c.dim = 768;
  c.hidden_dim = 2048;
  c.n_layers = 12;
  c.n_heads = 12;
  c.n_kv_heads = 12;
  c.head_dim = 64;
  c.vocab_size = 32000;
  c.seq_len = 1024;
  return random_model(c, 0.036f, 0.022f);  // ~1/sqrt(dim)
}

}  // namespace kvs::bench
