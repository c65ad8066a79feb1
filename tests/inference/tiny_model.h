// Test support: small random-weight Llama models built in code (Qwen2's biases, Qwen3's QK-norm,
// Gemma's local layers, post-block norms, GeGLU and scaled embeddings, Gemma 2's soft caps, OLMo 2's
// norms after the blocks only and QK-norm across heads, SmolLM3's NoPE layers, EXAONE 4's mix where
// the config asks),
// the HF q/k row permutation, and an independent naive forward pass (double precision, no KV
// cache, no kernels/ code) that gives every attention row and every position's logits.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "inference/model.h"

namespace kvs::tiny {

// n_heads 4, n_kv_heads 2 (GQA, group 2), head_dim 8.
inline ModelConfig tiny_config() {
  ModelConfig c;
  c.name = "tiny-random";
  c.dim = 32;
  c.hidden_dim = 48;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.vocab_size = 40;
  c.seq_len = 64;
  return c;
}

// tiny_config() as Gemma 3 lays a model out: QK-norm, GeGLU, embeddings scaled by sqrt(dim), the
// post-block norms (random_model gives a gemma3 config them), layers 0, 1 and 3 local with a window
// of 4 and their own RoPE base, layer 2 global, rotate-half pairs.
inline ModelConfig gemma3_config() {
  ModelConfig c = tiny_config();
  c.arch = "gemma3";
  c.n_layers = 4;
  c.qk_norm = true;
  c.activation = Activation::GeluTanh;
  c.embed_scale = std::sqrt(static_cast<float>(c.dim));
  c.sliding_window = 4;
  c.local_layers = {1, 1, 0, 1};
  c.rope_theta = 1000000.0f;
  c.rope_local_theta = 100.0f;
  c.rope_style = RopeStyle::RotateHalf;
  return c;
}

// tiny_config() as Gemma 2 lays a model out: GeGLU, embeddings scaled by sqrt(dim), the post-block
// norms, layers 0 and 2 local with a window of 4 (one RoPE base for all), scores soft-capped at 2
// and logits at 1.5 (low enough that both caps change every row and logit of these weights).
inline ModelConfig gemma2_config() {
  ModelConfig c = tiny_config();
  c.arch = "gemma2";
  c.n_layers = 4;
  c.activation = Activation::GeluTanh;
  c.embed_scale = std::sqrt(static_cast<float>(c.dim));
  c.sliding_window = 4;
  c.local_layers = {1, 0, 1, 0};
  c.rope_local_theta = c.rope_theta;
  c.rope_style = RopeStyle::RotateHalf;
  c.attn_softcap = 2.0f;
  c.final_softcap = 1.5f;
  return c;
}

// tiny_config() as OLMo 2 lays a model out: no norm before either block, the post-block norms, q
// and k RMS-normalised across all of a token's heads (q_norm [q_dim], k_norm [kv_dim]) before
// RoPE, rotate-half pairs, a separate classifier.
inline ModelConfig olmo2_config() {
  ModelConfig c = tiny_config();
  c.arch = "olmo2";
  c.qk_norm = true;
  c.rope_style = RopeStyle::RotateHalf;
  c.tied_classifier = false;
  return c;
}

// tiny_config() as SmolLM3 lays a model out: four layers, the last without RoPE (a NoPE layer),
// rotate-half pairs.
inline ModelConfig smollm3_config() {
  ModelConfig c = tiny_config();
  c.arch = "smollm3";
  c.n_layers = 4;
  c.nope_layers = {0, 0, 0, 1};
  c.rope_style = RopeStyle::RotateHalf;
  return c;
}

// tiny_config() as EXAONE 4 lays a model out: OLMo 2's norms after the blocks only with per-head
// QK-norm; layers 0-2 local (a window of 4) and rotated as the global layers would be (linear
// scaling by 2), layer 3 global and without RoPE.
inline ModelConfig exaone4_config() {
  ModelConfig c = tiny_config();
  c.arch = "exaone4";
  c.n_layers = 4;
  c.qk_norm = true;
  c.sliding_window = 4;
  c.local_layers = {1, 1, 1, 0};
  c.nope_layers = {0, 0, 0, 1};
  c.local_rope_as_global = true;
  c.rope_scaling.type = "linear";
  c.rope_scaling.factor = 2.0f;
  c.rope_style = RopeStyle::RotateHalf;
  c.tied_classifier = false;
  return c;
}

// c with LongRoPE scaling (head_dim 8: four factors a set, the long ones larger) over an original
// context of `original` positions, cos and sin scaled by attention_factor.
inline ModelConfig with_longrope(ModelConfig c, int original, float attention_factor) {
  RopeScaling& r = c.rope_scaling;
  r.type = "longrope";
  r.original_max_position = original;
  r.short_factor = {1.0f, 1.5f, 2.0f, 3.0f};
  r.long_factor = {1.0f, 4.0f, 9.0f, 16.0f};
  r.attention_factor = attention_factor;
  return c;
}

inline WeightVector random_vec(std::mt19937_64& rng, std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  WeightVector v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Uniform weights scaled by 1/sqrt(fan_in); q/k larger so attention is far from uniform.
inline Model random_model(const ModelConfig& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Model m;
  m.config = c;
  m.format = "test";
  const std::size_t dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  const float a = 1.0f / std::sqrt(static_cast<float>(dim));
  const float ah = 1.0f / std::sqrt(static_cast<float>(hid));
  // W[rows, cols] uniform in [lo, hi), packed as a model holds it.
  auto matrix = [&rng](std::size_t rows, std::size_t cols, float lo, float hi) {
    return PackedMatrix::pack(random_vec(rng, rows * cols, lo, hi), static_cast<int>(rows), static_cast<int>(cols));
  };
  m.weights.token_embedding = matrix(c.vocab_size, dim, -1.0f, 1.0f);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights w;
    const bool olmo2 = c.arch == "olmo2" || c.arch == "olmo3", post_norms_only = olmo2 || c.arch == "exaone4";
    if (!post_norms_only) w.attn_norm = random_vec(rng, dim, 0.8f, 1.2f);
    w.wq = matrix(qd, dim, -3 * a, 3 * a);
    w.wk = matrix(kvd, dim, -3 * a, 3 * a);
    w.wv = matrix(kvd, dim, -a, a);
    w.wo = matrix(dim, qd, -a, a);
    if (c.qkv_bias) {
      w.bq = random_vec(rng, qd, -0.5f, 0.5f);
      w.bk = random_vec(rng, kvd, -0.5f, 0.5f);
      w.bv = random_vec(rng, kvd, -0.5f, 0.5f);
    }
    if (c.qk_norm) {
      w.q_norm = random_vec(rng, olmo2 ? qd : c.head_dim, 0.5f, 2.0f);
      w.k_norm = random_vec(rng, olmo2 ? kvd : c.head_dim, 0.5f, 2.0f);
    }
    if (c.arch == "gemma2" || c.arch == "gemma3" || post_norms_only) {
      w.post_attn_norm = random_vec(rng, dim, 0.5f, 1.5f);
      w.post_ffn_norm = random_vec(rng, dim, 0.5f, 1.5f);
    }
    if (!post_norms_only) w.ffn_norm = random_vec(rng, dim, 0.8f, 1.2f);
    w.w_gate = matrix(hid, dim, -a, a);
    w.w_up = matrix(hid, dim, -a, a);
    w.w_down = matrix(dim, hid, -ah, ah);
    m.weights.layers.push_back(std::move(w));
  }
  m.weights.final_norm = random_vec(rng, dim, 0.8f, 1.2f);
  if (!c.tied_classifier) m.weights.classifier = matrix(c.vocab_size, dim, -a, a);
  return m;
}

// The Hugging Face conversion of q/k projections: inside each head, interleaved row 2i + c
// becomes row c * head_dim/2 + i. Applied to an Interleaved model it gives the RotateHalf model
// that computes the same function.
inline WeightVector permute_rows(const WeightVector& w, int n_heads, int head_dim, int cols) {
  WeightVector out(w.size());
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < half; ++i) {
      for (int c = 0; c < 2; ++c) {
        const std::size_t src = static_cast<std::size_t>(h * head_dim + 2 * i + c) * cols;
        const std::size_t dst = static_cast<std::size_t>(h * head_dim + c * half + i) * cols;
        std::copy_n(w.begin() + src, cols, out.begin() + dst);
      }
    }
  }
  return out;
}

inline WeightVector permute_bias(const WeightVector& b, int n_heads, int head_dim) {
  return b.empty() ? b : permute_rows(b, n_heads, head_dim, 1);
}

inline Model to_rotate_half(const Model& m) {
  Model r = m;
  const ModelConfig& c = m.config;
  r.config.rope_style = RopeStyle::RotateHalf;
  for (LayerWeights& w : r.weights.layers) {
    w.wq = PackedMatrix::pack(permute_rows(w.wq.unpacked(), c.n_heads, c.head_dim, c.dim), c.q_dim(), c.dim);
    w.wk = PackedMatrix::pack(permute_rows(w.wk.unpacked(), c.n_kv_heads, c.head_dim, c.dim), c.kv_dim(), c.dim);
    w.bq = permute_bias(w.bq, c.n_heads, c.head_dim);
    w.bk = permute_bias(w.bk, c.n_kv_heads, c.head_dim);
    w.q_norm = permute_bias(w.q_norm, static_cast<int>(w.q_norm.size()) / c.head_dim, c.head_dim);
    w.k_norm = permute_bias(w.k_norm, static_cast<int>(w.k_norm.size()) / c.head_dim, c.head_dim);
  }
  return r;
}

struct Reference {
  int T = 0;
  std::vector<double> attn;    // [L, H, T, T] row i over keys 0..T-1 (0 where not attended)
  std::vector<double> keys;    // [L, T, kv_dim] keys after RoPE at their positions
  std::vector<double> queries; // [L, T, q_dim] queries after RoPE at their positions
  std::vector<double> logits;  // [T, vocab]
  double a(const ModelConfig& c, int l, int h, int i, int j) const {
    return attn[((static_cast<std::size_t>(l) * c.n_heads + h) * T + i) * T + j];
  }
};

// attends(layer, kv_head, q_pos, k_pos): whether the query at q_pos reads key k_pos (k_pos <=
// q_pos). rope_by_slot: keys are rotated by their index among the attended keys and the query by
// the last index (positions inside the cache) instead of by their positions. cache (when set):
// what the cache keeps of a key or value component (a 16-bit cache's rounding), applied to each
// value and to each key as it is cached: after rotation, or before it with rope_by_slot.
using AttendsFn = std::function<bool(int, int, int, int)>;
using CacheFn = std::function<double(double)>;

inline Reference reference_forward(const Model& m, const std::vector<int>& tokens,
                                   const AttendsFn& attends = nullptr, bool rope_by_slot = false,
                                   const CacheFn& cache = nullptr) {
  const ModelConfig& c = m.config;
  const int T = static_cast<int>(tokens.size());
  const int dim = c.dim, hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), hid = c.hidden_dim;
  Reference ref;
  ref.T = T;
  ref.attn.assign(static_cast<std::size_t>(c.n_layers) * c.n_heads * T * T, 0.0);
  ref.keys.assign(static_cast<std::size_t>(c.n_layers) * T * kvd, 0.0);
  ref.queries.assign(static_cast<std::size_t>(c.n_layers) * T * qd, 0.0);
  ref.logits.assign(static_cast<std::size_t>(T) * c.vocab_size, 0.0);

  auto linear = [](const WeightVector& w, const WeightVector& b, const std::vector<double>& x, int rows) {
    const int cols = static_cast<int>(x.size());
    std::vector<double> y(rows);
    for (int r = 0; r < rows; ++r) {
      double s = b.empty() ? 0.0 : b[r];
      for (int k = 0; k < cols; ++k) s += static_cast<double>(w[static_cast<std::size_t>(r) * cols + k]) * x[k];
      y[r] = s;
    }
    return y;
  };
  // x RMS-normalised and scaled by w; x itself where w is empty (OLMo 2's missing pre-norms).
  auto rmsnorm = [&](const std::vector<double>& x, const WeightVector& w) {
    if (w.empty()) return x;
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / x.size() + c.rms_eps);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * w[i];
    return y;
  };
  // Gemma 2's soft cap: cap * tanh(v / cap), or v where cap is 0.
  auto capped = [](double v, double cap) { return cap > 0 ? cap * std::tanh(v / cap) : v; };
  // Each slice of x as wide as w normalised on its own, scaled by w: every head ([head_dim]) or
  // the whole row (OLMo 2).
  auto norm_heads = [&](std::vector<double>& x, const WeightVector& w) {
    for (std::size_t h = 0; h < x.size(); h += w.size()) {
      const std::vector<double> head(x.begin() + h, x.begin() + h + w.size());
      const std::vector<double> y = rmsnorm(head, w);
      std::copy(y.begin(), y.end(), x.begin() + h);
    }
  };
  // Rotates one head vector of layer l by position p: a local layer's own base, unscaled; a NoPE
  // layer's not at all.
  auto rotate = [&](int l, const double* in, double* out, double p) {
    const int half = hd / 2;
    if (c.nope(l)) return static_cast<void>(std::copy(in, in + hd, out));
    const bool local = c.local(l) && !c.local_rope_as_global;
    for (int i = 0; i < half; ++i) {
      const double scaled = c.rope_scaling.type == "linear" && !local ? p / c.rope_scaling.factor : p;
      const double theta = local ? c.rope_local_theta : c.rope_theta;
      const double angle = scaled * std::pow(theta, -2.0 * i / hd);
      const int i0 = c.rope_style == RopeStyle::Interleaved ? 2 * i : i;
      const int i1 = c.rope_style == RopeStyle::Interleaved ? 2 * i + 1 : i + half;
      out[i0] = in[i0] * std::cos(angle) - in[i1] * std::sin(angle);
      out[i1] = in[i0] * std::sin(angle) + in[i1] * std::cos(angle);
    }
  };

  std::vector<std::vector<double>> x(T);  // [T][dim] residual stream
  for (int t = 0; t < T; ++t) {
    std::vector<float> row(dim);
    m.weights.token_embedding.row(tokens[t], row.data());
    x[t].assign(row.begin(), row.end());
    for (double& e : x[t]) e *= c.embed_scale;
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = m.weights.layers[l];
    // The layer's matrices row-major, unpacked once.
    const WeightVector wq = w.wq.unpacked(), wk = w.wk.unpacked(), wv = w.wv.unpacked(), wo = w.wo.unpacked(),
                       w_gate = w.w_gate.unpacked(), w_up = w.w_up.unpacked(), w_down = w.w_down.unpacked();
    std::vector<std::vector<double>> q(T), k(T), v(T);  // unrotated [T][q_dim|kv_dim]
    for (int t = 0; t < T; ++t) {
      const std::vector<double> xn = rmsnorm(x[t], w.attn_norm);
      q[t] = linear(wq, w.bq, xn, qd);
      k[t] = linear(wk, w.bk, xn, kvd);
      v[t] = linear(wv, w.bv, xn, kvd);
      if (c.qk_norm) {  // each head (or the whole row) RMS-normalised by its own sum of squares
        norm_heads(q[t], w.q_norm);
        norm_heads(k[t], w.k_norm);
      }
      if (cache) {
        for (double& e : v[t]) e = cache(e);
        if (rope_by_slot)
          for (double& e : k[t]) e = cache(e);
      }
      for (int h = 0; h < c.n_heads; ++h) {
        rotate(l, &q[t][h * hd], &ref.queries[(static_cast<std::size_t>(l) * T + t) * qd + h * hd], t);
      }
      for (int g = 0; g < c.n_kv_heads; ++g) {
        rotate(l, &k[t][g * hd], &ref.keys[(static_cast<std::size_t>(l) * T + t) * kvd + g * hd], t);
      }
    }
    std::vector<std::vector<double>> out(T, std::vector<double>(qd, 0.0));  // [T][q_dim]
    for (int h = 0; h < c.n_heads; ++h) {
      const int g = h / c.group();
      for (int i = 0; i < T; ++i) {
        std::vector<int> keys;  // attended positions, ascending
        for (int j = 0; j <= i; ++j) {
          if (c.window(l) > 0 && j <= i - c.window(l)) continue;  // before a sliding window
          if (!attends || attends(l, g, i, j)) keys.push_back(j);
        }
        const int n = static_cast<int>(keys.size());
        std::vector<double> qr(hd), kr(hd), s(n);
        rotate(l, &q[i][h * hd], qr.data(), rope_by_slot ? n - 1 : i);
        double mx = -1e300;
        for (int jj = 0; jj < n; ++jj) {
          rotate(l, &k[keys[jj]][g * hd], kr.data(), rope_by_slot ? jj : keys[jj]);
          if (cache && !rope_by_slot)
            for (double& e : kr) e = cache(e);
          double d = 0;
          for (int e = 0; e < hd; ++e) d += qr[e] * kr[e];
          s[jj] = capped(d / std::sqrt(static_cast<double>(hd)), c.attn_softcap);
          mx = std::max(mx, s[jj]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int jj = 0; jj < n; ++jj) {
          const double p = s[jj] / sum;
          ref.attn[((static_cast<std::size_t>(l) * c.n_heads + h) * T + i) * T + keys[jj]] = p;
          for (int e = 0; e < hd; ++e) out[i][h * hd + e] += p * v[keys[jj]][g * hd + e];
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      std::vector<double> o = linear(wo, {}, out[t], dim);
      if (!w.post_attn_norm.empty()) o = rmsnorm(o, w.post_attn_norm);
      for (int e = 0; e < dim; ++e) x[t][e] += o[e];
      const std::vector<double> xn = rmsnorm(x[t], w.ffn_norm);
      std::vector<double> gate = linear(w_gate, {}, xn, hid);
      const std::vector<double> up = linear(w_up, {}, xn, hid);
      for (int e = 0; e < hid; ++e) {
        const double a = gate[e];
        const double act = c.activation == Activation::GeluTanh
                               ? 0.5 * a * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a)))
                               : a / (1.0 + std::exp(-a));
        gate[e] = act * up[e];
      }
      std::vector<double> d = linear(w_down, {}, gate, dim);
      if (!w.post_ffn_norm.empty()) d = rmsnorm(d, w.post_ffn_norm);
      for (int e = 0; e < dim; ++e) x[t][e] += d[e];
    }
  }
  const WeightVector classifier = m.classifier().unpacked();  // [vocab, dim]
  for (int t = 0; t < T; ++t) {
    const std::vector<double> lg = linear(classifier, {}, rmsnorm(x[t], m.weights.final_norm), c.vocab_size);
    std::transform(lg.begin(), lg.end(), ref.logits.begin() + static_cast<std::size_t>(t) * c.vocab_size,
                   [&](double v) { return capped(v, c.final_softcap); });
  }
  return ref;
}

}  // namespace kvs::tiny
