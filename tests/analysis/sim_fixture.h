// Test helpers for policy / simulator tests: small in-memory recordings (random softmax rows
// with consistent prefill evidence) and access to a run's kept sets.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "analysis/policy.h"
#include "analysis/simulator.h"

namespace kvs::test {

inline ModelShape shape_of(int L, int H, int Hkv, int d = 8) {
  ModelShape s;
  s.n_layers = L;
  s.n_heads = H;
  s.n_kv_heads = Hkv;
  s.head_dim = d;
  return s;
}

// Softmax of random logits over [0, n) into out[0..n), zeros after; returns the lse.
inline float random_row(std::mt19937& rng, int n, float* out, int len) {
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> z(n);
  float m = -1e30f;
  for (int j = 0; j < n; ++j) m = std::max(m, z[j] = nd(rng));
  double s = 0.0;
  for (int j = 0; j < n; ++j) s += std::exp(z[j] - m);
  for (int j = 0; j < len; ++j) out[j] = j < n ? (float)(std::exp(z[j] - m) / s) : 0.0f;
  return m + (float)std::log(s);
}

// A random recording: P prompt tokens, S decode steps (q_s = P + s), window W, full evidence.
inline SimInput random_input(const ModelShape& shape, int P, int S, int W, uint32_t seed,
                             bool key_scores = true) {
  std::mt19937 rng(seed);
  SimInput in;
  in.shape = shape;
  in.prompt_len = P;
  in.n_steps = S;
  in.total_len = P + S;
  const int L = shape.n_layers, H = shape.n_heads, T = P + S;
  in.rows.assign((size_t)S * L * H * T, 0.0f);
  in.lse.assign((size_t)S * L * H, 0.0f);
  for (int s = 0; s < S; ++s)
    for (int lh = 0; lh < L * H; ++lh)
      in.lse[(size_t)s * L * H + lh] = random_row(rng, P + s + 1, in.rows.data() + ((size_t)s * L * H + lh) * T, T);
  PrefillEvidence& ev = in.prefill;
  ev.shape = shape;
  ev.prompt_len = P;
  ev.window = std::min(W, P);
  ev.colsum.assign((size_t)L * H * P, 0.0f);
  ev.window_rows.assign((size_t)L * H * ev.window * P, 0.0f);
  ev.window_lse.assign((size_t)L * H * ev.window, 0.0f);
  std::vector<float> row(P);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < P; ++i) {
        const float lse = random_row(rng, i + 1, row.data(), P);
        for (int j = 0; j < P; ++j) ev.colsum[((size_t)l * H + h) * P + j] += row[j];
        const int w = i - (P - ev.window);
        if (w < 0) continue;
        std::copy(row.begin(), row.end(), ev.window_rows.begin() + (((size_t)l * H + h) * ev.window + w) * P);
        ev.window_lse[((size_t)l * H + h) * ev.window + w] = lse;
      }
  if (key_scores) {
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    ev.key_scores.resize((size_t)L * shape.n_kv_heads * P);
    for (float& v : ev.key_scores) v = u(rng);
  }
  return in;
}

inline std::unique_ptr<Policy> policy(const std::string& text, int budget, const ModelShape& shape) {
  return make_policy(parse_policy_spec(text, budget), shape);
}

inline RunData run_one(const SimInput& in, Policy& p, SimulateOptions opt = {}) {
  Policy* ptr = &p;
  return std::move(simulate(in, std::span<Policy* const>(&ptr, 1), opt).front());
}

// Positions whose kept value equals `value` at (step, layer, kv_head).
inline std::vector<int> kept_at(const RunData& r, const SimInput& in, int s, int l, int g, uint8_t value = 1) {
  const int L = in.shape.n_layers, Hkv = in.shape.n_kv_heads, T = in.total_len;
  const uint8_t* k = r.kept.data() + (((size_t)s * L + l) * Hkv + g) * T;
  std::vector<int> out;
  for (int t = 0; t < T; ++t)
    if (k[t] == value) out.push_back(t);
  return out;
}

inline std::vector<int> range(int a, int b) {
  std::vector<int> v;
  for (int i = a; i < b; ++i) v.push_back(i);
  return v;
}

inline const NamedArray* metric(const RunData& r, const std::string& name) {
  for (const auto& m : r.metrics)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace kvs::test
