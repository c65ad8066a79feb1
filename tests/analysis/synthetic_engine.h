// A stand-in for the engine's observer calls in tests: a causal prompt attention map sent as
// prefill blocks, and decode rows over subsets of positions (key_pos), for a tiny model shape.
#pragma once
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "analysis/recorder.h"
#include "inference/hooks.h"
#include "inference/model.h"
#include "trace_test_util.h"

namespace kvs::testing {

inline constexpr int kL = 2, kH = 4, kHkv = 2, kP = 6, kBlock = 4;

inline ModelConfig tiny_config() {
  ModelConfig c;
  c.n_layers = kL;
  c.n_heads = kH;
  c.n_kv_heads = kHkv;
  c.head_dim = 8;
  c.dim = kH * 8;
  c.vocab_size = 32;
  return c;
}

// Full causal prompt attention: maps[l][h] is [P, P] (zeros past the diagonal), lse [P].
struct Prompt {
  std::vector<float> map;  // [L, H, P, P]
  std::vector<float> lse;  // [L, H, P]
  const float* row(int l, int h, int q) const { return map.data() + (((size_t)l * kH + h) * kP + q) * kP; }
};

inline Prompt make_prompt(std::mt19937& rng) {
  Prompt p;
  p.map.assign((size_t)kL * kH * kP * kP, 0.0f);
  p.lse.assign((size_t)kL * kH * kP, 0.0f);
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h)
      for (int q = 0; q < kP; ++q) {
        const auto r = softmax(rng, q + 1, &p.lse[((size_t)l * kH + h) * kP + q]);
        std::copy(r.begin(), r.end(), p.map.begin() + (((size_t)l * kH + h) * kP + q) * kP);
      }
  return p;
}

// Sends the prompt in blocks of kBlock rows per (layer, head), keys 0..q_pos0+n_q-1.
inline void send_prefill(AttentionObserver& o, const Prompt& p) {
  for (int l = 0; l < kL; ++l)
    for (int q0 = 0; q0 < kP; q0 += kBlock)
      for (int h = 0; h < kH; ++h) {
        const int n_q = std::min(kBlock, kP - q0), n_keys = q0 + n_q;
        std::vector<float> probs((size_t)n_q * n_keys, 0.0f);  // [n_q, n_keys]
        std::vector<float> lse(n_q);                           // [n_q]
        for (int r = 0; r < n_q; ++r) {
          std::copy(p.row(l, h, q0 + r), p.row(l, h, q0 + r) + q0 + r + 1, probs.begin() + (size_t)r * n_keys);
          lse[r] = p.lse[((size_t)l * kH + h) * kP + q0 + r];
        }
        o.on_attention(AttentionBlock::prefill(l, h, q0, n_q, probs.data(), lse.data()));
      }
}

// One decode step at q: each (layer, head) attends a subset of 0..q (odd positions dropped for
// odd heads). Returns the dense rows [L, H, q + 1]. Sends only the first `limit` rows; with
// by_layer, each layer's rows in one on_attention_heads call (as the GPU engine does).
inline std::vector<float> send_decode(AttentionObserver& o, std::mt19937& rng, int q, int limit = kL * kH,
                                      bool by_layer = false) {
  std::vector<float> dense((size_t)kL * kH * (q + 1), 0.0f);
  int sent = 0;
  for (int l = 0; l < kL; ++l) {
    std::vector<std::vector<int32_t>> keys(kH);  // [H] each head's attended positions
    std::vector<std::vector<float>> probs(kH);   // [H] and their probabilities
    std::vector<float> lse(kH, 0.0f);
    std::vector<AttentionBlock> blocks;
    for (int h = 0; h < kH; ++h) {
      for (int k = 0; k <= q; ++k)
        if (h % 2 == 0 || k % 2 == 0 || k == q) keys[h].push_back(k);
      probs[h] = softmax(rng, (int)keys[h].size(), &lse[h]);
      for (size_t j = 0; j < keys[h].size(); ++j) dense[((size_t)l * kH + h) * (q + 1) + keys[h][j]] = probs[h][j];
      if (sent++ >= limit) continue;
      AttentionBlock b;
      b.layer = l;
      b.head = h;
      b.q_pos0 = q;
      b.n_q = 1;
      b.n_keys = (int)keys[h].size();
      b.key_pos = keys[h].data();
      b.probs = probs[h].data();
      b.lse = &lse[h];
      b.decode = true;
      if (by_layer) {
        blocks.push_back(b);
      } else {
        o.on_attention(b);
      }
    }
    if (by_layer) o.on_attention_heads(blocks);
  }
  return dense;
}

inline TraceMeta tiny_meta(bool float16 = false) {
  TraceMeta m = small_meta(kL, kH, kHkv, kP);
  if (float16) m.decode_dtype = "float16";
  return m;
}

inline std::vector<int> prompt_ids() { return {1, 5, 9, 13, 17, 21}; }

// Drives a recorder through prefill and `steps` decode steps; returns the dense decode rows.
inline std::vector<std::vector<float>> record_synthetic(TraceRecorder& rec, std::mt19937& rng, const Prompt& p, int steps) {
  const auto prompt = prompt_ids();
  rec.on_begin(tiny_config(), prompt);
  for (int i = 0; i < kP; ++i) rec.on_token(i, prompt[i]);
  send_prefill(rec, p);
  rec.on_prefill_end(kP);
  std::vector<std::vector<float>> rows;
  for (int s = 0; s < steps; ++s) {
    rec.on_token(kP + s, 2 + s);
    rows.push_back(send_decode(rec, rng, kP + s));
  }
  return rows;
}

inline std::string text_of(int id) {
  std::string s = "<";
  s += std::to_string(id);
  return s + ">";
}

}  // namespace kvs::testing
