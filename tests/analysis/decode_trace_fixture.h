// Test helper for trace-reading analyses: writes a small float32 trace with random decode rows
// through TraceWriter and keeps the same rows in memory ([steps, L, H, T], zeros past q_pos).
#pragma once
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "analysis/trace.h"

namespace kvs::test {

struct DecodeTrace {
  std::string path;
  ModelShape shape;
  int prompt_len = 0;
  int n_steps = 0;
  std::vector<float> rows;  // [n_steps, L, H, T]
  std::vector<float> lse;   // [n_steps, L, H]
  std::vector<int> q_pos;   // [n_steps]
  int total_len() const { return prompt_len + n_steps; }
};

// writer_version: the trace's ("" as a program that records none).
inline DecodeTrace write_decode_trace(const std::string& path, int L, int H, int Hkv, int P, int S,
                                      unsigned seed, const std::string& writer_version = "") {
  DecodeTrace t;
  t.path = path;
  t.shape.n_layers = L;
  t.shape.n_heads = H;
  t.shape.n_kv_heads = Hkv;
  t.shape.head_dim = 8;
  t.prompt_len = P;
  t.n_steps = S;
  const int T = P + S;
  TraceMeta meta;
  meta.model = "random";
  meta.shape = t.shape;
  meta.vocab_size = 32;
  meta.prompt_len = P;
  meta.writer_version = writer_version;
  TraceWriter writer(path, meta, S);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  t.rows.assign((size_t)S * L * H * T, 0.0f);
  t.lse.assign((size_t)S * L * H, 0.0f);
  for (int s = 0; s < S; ++s) {
    const int q = P + s, len = q + 1;
    std::vector<float> step((size_t)L * H * len), lse((size_t)L * H);  // [L, H, len], [L, H]
    for (int lh = 0; lh < L * H; ++lh) {
      std::vector<float> z(len);
      float m = -1e30f;
      for (float& v : z) m = std::max(m, v = nd(rng));
      double sum = 0.0;
      for (float v : z) sum += std::exp(v - m);
      for (int j = 0; j < len; ++j) {
        const float p = (float)(std::exp(z[j] - m) / sum);
        step[(size_t)lh * len + j] = p;
        t.rows[((size_t)s * L * H + lh) * T + j] = p;
      }
      lse[lh] = t.lse[(size_t)s * L * H + lh] = m + (float)std::log(sum);
    }
    writer.write_decode_step(s, q, step, lse);
    t.q_pos.push_back(q);
  }
  meta.n_steps = S;
  std::vector<int32_t> ids(T, 3);
  std::vector<std::string> texts(T, "x");
  writer.commit(meta, ids, texts);
  return t;
}

}  // namespace kvs::test
