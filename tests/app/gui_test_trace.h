// A small synthetic trace for the app's tests: 3 layers, 4 query heads, 2 KV heads, 40 prompt +
// 16 decode tokens, an attention sink on position 0, the full prefill map, and three simulated
// runs (streamingllm, streamingllm without sinks, h2o at budget 12).
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "analysis/policy.h"
#include "analysis/simulator.h"
#include "analysis/trace.h"

namespace kvs {

inline void write_gui_test_trace(const std::string& path) {
  const int L = 3, H = 4, G = 2, P = 40, S = 16, T = P + S;
  TraceMeta m;
  m.model = "synthetic";
  m.shape = {L, H, G, 8};
  m.prompt_len = P;
  m.n_steps = S;
  m.vocab_size = 64;
  m.prompt = "synthetic";
  // Row of query q for (l, h): a sink on key 0, a recent bump, and a head-dependent ripple.
  auto row = [&](int l, int h, int q, float* out) {
    double sum = 0;
    for (int k = 0; k <= q; ++k) {
      out[k] = (k == 0 ? 4.0f + 2.0f * l : 0.2f) + (q - k < 3 ? 1.5f : 0.0f) +
               0.3f * (1.0f + std::sin(0.7f * k + 1.3f * h + 0.5f * q));
      sum += out[k];
    }
    for (int k = 0; k <= q; ++k) out[k] = (float)(out[k] / sum);
  };
  PrefillEvidence ev;
  ev.shape = m.shape;
  ev.prompt_len = P;
  ev.window = 8;
  ev.colsum.assign((size_t)L * H * P, 0.0f);
  ev.window_rows.assign((size_t)L * H * ev.window * P, 0.0f);
  ev.window_lse.assign((size_t)L * H * ev.window, 0.0f);
  std::vector<float> full((size_t)L * H * P * P, 0.0f);  // [L, H, P, P]
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < P; ++q) {
        float* r = &full[(((size_t)l * H + h) * P + q) * P];
        row(l, h, q, r);
        for (int k = 0; k < P; ++k) ev.colsum[((size_t)l * H + h) * P + k] += r[k];
        if (q >= P - ev.window) std::copy(r, r + P, &ev.window_rows[(((size_t)l * H + h) * ev.window + q - (P - ev.window)) * P]);
      }
  {
    TraceWriter w(path, m, S);
    std::vector<float> rows((size_t)L * H * T), lse((size_t)L * H, 1.0f);  // [L, H, T], [L, H]
    for (int s = 0; s < S; ++s) {
      std::fill(rows.begin(), rows.end(), 0.0f);
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) row(l, h, P + s, &rows[((size_t)l * H + h) * T]);
      w.write_decode_step(s, P + s, rows, lse);
    }
    w.write_prefill(ev, full);
    std::vector<int32_t> ids(T);
    std::vector<std::string> texts(T);
    for (int i = 0; i < T; ++i) ids[i] = i % 64, texts[i] = " tok" + std::to_string(i);
    w.commit(m, ids, texts);
  }
  TraceReader reader(path);
  std::vector<std::unique_ptr<Policy>> owned;
  std::vector<Policy*> policies;
  for (const char* spec : {"streamingllm", "streamingllm:sinks=0", "h2o"}) {
    owned.push_back(make_policy(parse_policy_spec(spec, 12), m.shape));
    policies.push_back(owned.back().get());
  }
  const std::vector<RunData> runs = simulate(reader, policies, SimulateOptions{});
  append_runs(path, runs);
}

}  // namespace kvs
