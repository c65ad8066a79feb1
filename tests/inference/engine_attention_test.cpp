// Captured attention of the engine: rows are distributions, causal, delivered in a fixed order,
// and agree with an independent naive forward (tiny_model.h) for prefill and decode rows.
#include <gtest/gtest.h>

#include <cmath>

#include "capture.h"
#include "inference/engine.h"
#include "inference/kv_store.h"
#include "tiny_model.h"

namespace kvs {
namespace {

using tiny::Capture;
using tiny::CapturedRow;

const std::vector<int> kPrompt = {1, 7, 3, 22, 15, 9, 31, 4, 18, 26, 5};  // P = 11
const std::vector<int> kDecoded = {12, 30, 2, 39};

struct EngineRun {
  Capture cap;
  std::vector<float> last_logits;
};

void run(const Model& m, EngineOptions opt, EngineRun& r) {
  Engine e(m, opt);
  e.set_observer(&r.cap);
  e.prefill(kPrompt);
  std::span<const float> lg;
  for (int t : kDecoded) lg = e.decode(t);
  r.last_logits.assign(lg.begin(), lg.end());
}

void expect_rows_match(const Model& m, const Capture& cap, const tiny::Reference& ref) {
  const ModelConfig& c = m.config;
  const int P = static_cast<int>(kPrompt.size());
  int n_prefill = 0, n_decode = 0;
  for (const CapturedRow& r : cap.rows) {
    double sum = 0;
    for (float p : r.probs) sum += p;
    EXPECT_NEAR(sum, 1.0, 1e-5) << "layer " << r.layer << " head " << r.head << " q " << r.q_pos;
    for (std::size_t j = 0; j < r.keys.size(); ++j) {
      const int k = r.keys[j];
      if (k > r.q_pos) {
        EXPECT_EQ(r.probs[j], 0.0f) << "past the causal limit: q " << r.q_pos << " key " << k;
      } else {
        EXPECT_NEAR(r.probs[j], ref.a(c, r.layer, r.head, r.q_pos, k), 1e-5)
            << "layer " << r.layer << " head " << r.head << " q " << r.q_pos << " key " << k;
      }
    }
    EXPECT_TRUE(std::isfinite(r.lse));
    if (r.decode) {
      ++n_decode;
      ASSERT_EQ(static_cast<int>(r.keys.size()), r.q_pos + 1);  // full cache: keys 0..q_pos
      for (int j = 0; j <= r.q_pos; ++j) EXPECT_EQ(r.keys[j], j);
    } else {
      ++n_prefill;
      EXPECT_LT(r.q_pos, P);
    }
  }
  EXPECT_EQ(n_prefill, c.n_layers * c.n_heads * P);
  EXPECT_EQ(n_decode, c.n_layers * c.n_heads * static_cast<int>(kDecoded.size()));
}

std::vector<int> all_tokens() {
  std::vector<int> t = kPrompt;
  t.insert(t.end(), kDecoded.begin(), kDecoded.end());
  return t;
}

TEST(EngineAttention, RowsAreCausalDistributionsMatchingNaiveForward) {
  const Model m = tiny::random_model(tiny::tiny_config(), 11);
  EngineOptions opt;
  opt.prefill_block = 4;  // 11 prompt rows -> blocks of 4, 4, 3
  EngineRun r;
  run(m, opt, r);
  const tiny::Reference ref = tiny::reference_forward(m, all_tokens());
  expect_rows_match(m, r.cap, ref);
  const int T = ref.T;
  for (int i = 0; i < m.config.vocab_size; ++i) {
    EXPECT_NEAR(r.last_logits[i], ref.logits[static_cast<std::size_t>(T - 1) * m.config.vocab_size + i], 1e-4);
  }
}

TEST(EngineAttention, RowsRecomputedFromCachedKeysAndNaiveQueries) {
  // The engine's K cache equals the naive forward's rotated keys; scores q.k/sqrt(d) recomputed
  // from those cached keys and the naive queries give every captured row and its lse.
  const Model m = tiny::random_model(tiny::tiny_config(), 5);
  Engine e(m);
  Capture cap;
  e.set_observer(&cap);
  e.prefill(kPrompt);
  for (int t : kDecoded) e.decode(t);
  const tiny::Reference ref = tiny::reference_forward(m, all_tokens());
  auto& store = dynamic_cast<KvStore&>(e.slots());
  const ModelConfig& c = m.config;
  const int T = ref.T, hd = c.head_dim;
  for (int l = 0; l < c.n_layers; ++l) {
    for (int g = 0; g < c.n_kv_heads; ++g) {
      ASSERT_EQ(store.size(l, g), T);
      for (int t = 0; t < T; ++t) {
        for (int d = 0; d < hd; ++d) {
          const double want = ref.keys[(static_cast<std::size_t>(l) * T + t) * c.kv_dim() + g * hd + d];
          EXPECT_NEAR(static_cast<const float*>(store.keys(l, g).data)[static_cast<std::size_t>(t) * hd + d], want, 1e-4 * (1 + std::abs(want)));
        }
      }
    }
  }
  float max_p = 0.0f;
  for (const CapturedRow& r : cap.rows) {
    const int g = r.head / c.group();
    const double* q = &ref.queries[(static_cast<std::size_t>(r.layer) * T + r.q_pos) * c.q_dim() + r.head * hd];
    std::vector<double> logit(r.keys.size());  // [n_keys]
    double mx = -1e300;
    for (std::size_t j = 0; j < r.keys.size() && r.keys[j] <= r.q_pos; ++j) {
      const float* k = static_cast<const float*>(store.keys(r.layer, g).data) + static_cast<std::size_t>(r.keys[j]) * hd;
      double d = 0;
      for (int e2 = 0; e2 < hd; ++e2) d += q[e2] * k[e2];
      logit[j] = d / std::sqrt(static_cast<double>(hd));
      mx = std::max(mx, logit[j]);
    }
    double sum = 0;
    for (std::size_t j = 0; j < r.keys.size() && r.keys[j] <= r.q_pos; ++j) sum += std::exp(logit[j] - mx);
    const double lse = mx + std::log(sum);
    EXPECT_NEAR(r.lse, lse, 1e-4);
    for (std::size_t j = 0; j < r.keys.size(); ++j) {
      const double want = r.keys[j] <= r.q_pos ? std::exp(logit[j] - lse) : 0.0;
      EXPECT_NEAR(r.probs[j], want, 1e-5) << "layer " << r.layer << " head " << r.head << " q " << r.q_pos;
      max_p = std::max(max_p, r.probs[j]);
    }
  }
  EXPECT_GT(max_p, 0.5f);  // the random model attends sharply somewhere: rows are not all uniform
}

// A model run over the prompt (prefill blocks of 4) and the decoded steps: every row sums to 1 and
// agrees with the naive forward pass (which reads a layer's window as the engine does), a decode
// row reads the keys from its window's start (c.window(layer) keys; without a window, every key),
// and the last logits agree.
void expect_windowed_rows_match(const Model& m) {
  const ModelConfig& c = m.config;
  EngineOptions opt;
  opt.prefill_block = 4;
  EngineRun r;
  run(m, opt, r);
  const tiny::Reference ref = tiny::reference_forward(m, all_tokens());
  int n_decode = 0;
  for (const CapturedRow& row : r.cap.rows) {
    double sum = 0;
    for (std::size_t j = 0; j < row.keys.size(); ++j) {
      sum += row.probs[j];
      EXPECT_NEAR(row.probs[j], ref.a(c, row.layer, row.head, row.q_pos, row.keys[j]), 1e-5)
          << "layer " << row.layer << " head " << row.head << " q " << row.q_pos << " key " << row.keys[j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    if (!row.decode) continue;
    ++n_decode;
    const int want = c.window(row.layer) > 0 ? c.window(row.layer) : row.q_pos + 1;
    ASSERT_EQ(static_cast<int>(row.keys.size()), want) << "layer " << row.layer;  // q - want + 1 .. q
    EXPECT_EQ(row.keys.front(), row.q_pos + 1 - want);
  }
  EXPECT_EQ(n_decode, c.n_layers * c.n_heads * static_cast<int>(kDecoded.size()));
  const std::size_t last = static_cast<std::size_t>(ref.T - 1) * c.vocab_size;
  for (int i = 0; i < c.vocab_size; ++i) EXPECT_NEAR(r.last_logits[i], ref.logits[last + i], 1e-4);
}

// Sliding-window attention (Mistral-7B-v0.1's sliding_window): every query reads only the keys
// k > q - W, in prefill (rows zero before the window) and decode (the window's keys only).
TEST(EngineAttention, SlidingWindowRowsMatchNaiveForwardOverTheWindow) {
  ModelConfig c = tiny::tiny_config();
  c.sliding_window = 5;
  expect_windowed_rows_match(tiny::random_model(c, 17));
}

// Gemma 3: local layers read only their window's keys and rotate with their own base, the global
// layer reads every key; post-block norms, GeGLU and scaled embeddings.
TEST(EngineAttention, Gemma3LocalAndGlobalLayersMatchNaiveForward) {
  expect_windowed_rows_match(tiny::random_model(tiny::gemma3_config(), 29));
}

// Gemma 2: every other layer local (one RoPE base for all), scores and logits soft-capped; the
// same model uncapped gives other rows and logits, so the caps are what the naive forward checks.
TEST(EngineAttention, Gemma2SoftCappedScoresAndLogitsMatchNaiveForward) {
  const Model m = tiny::random_model(tiny::gemma2_config(), 31);
  expect_windowed_rows_match(m);
  Model uncapped = m;
  uncapped.config.attn_softcap = uncapped.config.final_softcap = 0.0f;
  const tiny::Reference a = tiny::reference_forward(m, all_tokens());
  const tiny::Reference b = tiny::reference_forward(uncapped, all_tokens());
  double rows = 0, logits = 0;
  for (std::size_t i = 0; i < a.attn.size(); ++i) rows = std::max(rows, std::abs(a.attn[i] - b.attn[i]));
  for (std::size_t i = 0; i < a.logits.size(); ++i) logits = std::max(logits, std::abs(a.logits[i] - b.logits[i]));
  EXPECT_GT(rows, 0.05);
  EXPECT_GT(logits, 0.5);
}

// OLMo 2: the blocks read the residual unnormalised, their outputs are normalised before the add,
// and q and k are RMS-normalised across all of a token's heads; the same weights normalised head by
// head give other rows, so the width of the QK-norm is what the naive forward checks.
TEST(EngineAttention, Olmo2NormsAfterBlocksAndAcrossHeadsMatchNaiveForward) {
  const Model m = tiny::random_model(tiny::olmo2_config(), 35);
  expect_windowed_rows_match(m);
  Model per_head = m;
  for (LayerWeights& w : per_head.weights.layers) {
    w.q_norm.resize(m.config.head_dim);
    w.k_norm.resize(m.config.head_dim);
  }
  const tiny::Reference a = tiny::reference_forward(m, all_tokens());
  const tiny::Reference b = tiny::reference_forward(per_head, all_tokens());
  double rows = 0;
  for (std::size_t i = 0; i < a.attn.size(); ++i) rows = std::max(rows, std::abs(a.attn[i] - b.attn[i]));
  EXPECT_GT(rows, 0.05);
}

// SmolLM3: the NoPE layer rotates neither queries nor keys, the others do.
TEST(EngineAttention, SmolLM3NoPELayerMatchesNaiveForward) {
  expect_windowed_rows_match(tiny::random_model(tiny::smollm3_config(), 37));
}

// EXAONE 4: local layers within their window rotated with the global layers' scaled table, the
// global layer unrotated (NoPE), norms after the blocks only, per-head QK-norm.
TEST(EngineAttention, Exaone4LocalRotatedAndGlobalNoPELayersMatchNaiveForward) {
  expect_windowed_rows_match(tiny::random_model(tiny::exaone4_config(), 38));
}

TEST(EngineAttention, BlocksArriveInLayerHeadBlockOrder) {
  const Model m = tiny::random_model(tiny::tiny_config(), 3);
  EngineOptions opt;
  opt.prefill_block = 4;
  EngineRun r;
  run(m, opt, r);
  const ModelConfig& c = m.config;
  const int P = static_cast<int>(kPrompt.size());
  std::size_t i = 0;
  for (int l = 0; l < c.n_layers; ++l) {
    for (int h = 0; h < c.n_heads; ++h) {
      for (int q0 = 0; q0 < P; q0 += 4, ++i) {
        ASSERT_LT(i, r.cap.blocks.size());
        const auto& b = r.cap.blocks[i];
        EXPECT_EQ(b.layer, l);
        EXPECT_EQ(b.head, h);
        EXPECT_EQ(b.q_pos0, q0);
        EXPECT_EQ(b.n_q, std::min(4, P - q0));
        EXPECT_EQ(b.n_keys, q0 + b.n_q);
        EXPECT_FALSE(b.decode);
      }
    }
  }
  EXPECT_EQ(r.cap.prefill_end, P);
  EXPECT_EQ(r.cap.begun, kPrompt);
  ASSERT_EQ(r.cap.logits_pos.size(), 1 + kDecoded.size());
  EXPECT_EQ(r.cap.logits_pos[0], P - 1);
  EXPECT_EQ(r.cap.tokens.size(), kPrompt.size() + kDecoded.size());
}

TEST(EngineAttention, GqaBiasAndRotateHalfModelsMatchNaiveForward) {
  ModelConfig c = tiny::tiny_config();
  c.qkv_bias = true;
  c.tied_classifier = false;
  c.rope_theta = 500.0f;
  const Model m = tiny::to_rotate_half(tiny::random_model(c, 21));
  EngineRun r;
  run(m, {}, r);
  expect_rows_match(m, r.cap, tiny::reference_forward(m, all_tokens()));
}

// Qwen3: every query and key head RMS-normalised before RoPE, on prefill rows and decode steps.
TEST(EngineAttention, QkNormModelsMatchNaiveForward) {
  ModelConfig c = tiny::tiny_config();
  c.qk_norm = true;
  for (const Model& m : {tiny::random_model(c, 23), tiny::to_rotate_half(tiny::random_model(c, 24))}) {
    EngineRun r;
    run(m, {}, r);
    const tiny::Reference ref = tiny::reference_forward(m, all_tokens());
    expect_rows_match(m, r.cap, ref);
    const std::size_t last = static_cast<std::size_t>(ref.T - 1) * c.vocab_size;
    for (int i = 0; i < c.vocab_size; ++i) EXPECT_NEAR(r.last_logits[i], ref.logits[last + i], 1e-4);
  }
}

// Large enough that the matvecs, the prefill row blocks and the decode heads run in parallel.
ModelConfig parallel_config() {
  ModelConfig c = tiny::tiny_config();
  c.dim = 128;
  c.hidden_dim = 256;
  c.head_dim = 64;
  c.vocab_size = 64;
  c.seq_len = 128;
  return c;
}

TEST(EngineAttention, MultiThreadedPathsMatchNaiveForward) {
  const ModelConfig c = parallel_config();
  const Model m = tiny::random_model(c, 17);
  std::vector<int> tokens(72);
  for (int i = 0; i < 72; ++i) tokens[i] = (i * 37 + 1) % c.vocab_size;
  const std::vector<int> prompt(tokens.begin(), tokens.begin() + 70);
  EngineOptions opt;
  opt.n_threads = 2;
  opt.prefill_block = 32;
  Engine e(m, opt);
  Capture cap;
  e.set_observer(&cap);
  e.prefill(prompt);
  e.decode(tokens[70]);
  const std::span<const float> lg = e.decode(tokens[71]);
  const tiny::Reference ref = tiny::reference_forward(m, tokens);
  ASSERT_EQ(cap.rows.size(), static_cast<std::size_t>(c.n_layers * c.n_heads * 72));
  for (const CapturedRow& r : cap.rows) {
    double sum = 0;
    for (std::size_t j = 0; j < r.keys.size(); ++j) {
      sum += r.probs[j];
      const double want = r.keys[j] <= r.q_pos ? ref.a(c, r.layer, r.head, r.q_pos, r.keys[j]) : 0.0;
      ASSERT_NEAR(r.probs[j], want, 1e-5) << "layer " << r.layer << " head " << r.head << " q " << r.q_pos;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  for (int i = 0; i < c.vocab_size; ++i) EXPECT_NEAR(lg[i], ref.logits[71 * c.vocab_size + i], 1e-4);
}

// Every decode row and product is computed by the same code whichever thread takes it, so the
// results are bit-identical for any thread count; with the pre-RoPE cache too.
TEST(EngineAttention, ThreadCountDoesNotChangeResults) {
  const Model m = tiny::random_model(parallel_config(), 8);
  std::vector<int> prompt(90);
  for (int i = 0; i < 90; ++i) prompt[i] = (i * 11 + 2) % 64;
  for (bool rope_in_cache : {false, true}) {
    std::vector<std::vector<float>> logits;
    const std::vector<int> thread_counts = {1, 2, 3, 4};  // 4: the 90 rows as blocks of 72 and 18 in one call
    std::vector<Capture> caps(thread_counts.size());
    for (std::size_t n = 0; n < thread_counts.size(); ++n) {
      EngineOptions opt;
      opt.n_threads = thread_counts[n];
      opt.rope_in_cache = rope_in_cache;
      Engine e(m, opt);
      e.set_observer(&caps[n]);
      e.prefill(prompt);
      std::vector<float> all;
      for (int t = 0; t < 12; ++t) {
        const auto lg = e.decode((t * 5 + 3) % 64);
        all.insert(all.end(), lg.begin(), lg.end());
      }
      logits.push_back(std::move(all));
    }
    for (std::size_t k = 1; k < thread_counts.size(); ++k) {
      ASSERT_EQ(caps[0].rows.size(), caps[k].rows.size());
      for (std::size_t i = 0; i < caps[0].rows.size(); ++i) EXPECT_EQ(caps[0].rows[i].probs, caps[k].rows[i].probs);
      EXPECT_EQ(logits[0], logits[k]) << thread_counts[k] << " threads, rope_in_cache " << rope_in_cache;
    }
  }
}

// Past 512 keys decode attention runs in key ranges per KV head, combined afterwards: with GQA
// (two query heads per KV head) and contexts of one to three ranges, the rows still match the
// naive forward and sum to 1, and stay bit-identical for any thread count. The tolerance is 3e-5:
// over a thousand positions the fp32 forward drifts from the double one by ~1e-5 on a peaked
// row (1.04e-5 at position 1028 with the ranges disabled too).
TEST(EngineAttention, KeyRangesOfLongContextsMatchNaiveForward) {
  ModelConfig c = tiny::tiny_config();
  c.head_dim = 16;
  c.seq_len = 1400;
  const Model m = tiny::random_model(c, 29);
  std::vector<int> tokens(1300);
  for (int i = 0; i < 1300; ++i) tokens[i] = (i * 13 + 5) % c.vocab_size;
  const std::vector<int> prompt(tokens.begin(), tokens.begin() + 508);
  const tiny::Reference ref = tiny::reference_forward(m, tokens);
  std::vector<Capture> caps(3);
  for (int threads : {1, 2, 3}) {
    EngineOptions opt;
    opt.n_threads = threads;
    Engine e(m, opt);
    Capture& cap = caps[threads - 1];
    e.prefill(prompt);
    e.set_observer(&cap);
    for (int t = 508; t < 1300; ++t) {
      // rows checked at contexts 509-512 (one range), 513-520 (two), 1025-1030 (three)
      const bool check = t < 520 || (t >= 1024 && t < 1030);
      e.set_observer(check ? &cap : nullptr);
      e.decode(tokens[t]);
    }
  }
  ASSERT_EQ(caps[0].rows.size(), static_cast<std::size_t>(c.n_layers * c.n_heads * 18));
  for (const CapturedRow& r : caps[0].rows) {
    double sum = 0;
    for (std::size_t j = 0; j < r.keys.size(); ++j) {
      sum += r.probs[j];
      ASSERT_NEAR(r.probs[j], ref.a(c, r.layer, r.head, r.q_pos, r.keys[j]), 3e-5)
          << "layer " << r.layer << " head " << r.head << " q " << r.q_pos << " key " << r.keys[j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "q " << r.q_pos;
    EXPECT_TRUE(std::isfinite(r.lse));
  }
  for (int k : {1, 2}) {
    ASSERT_EQ(caps[0].rows.size(), caps[k].rows.size());
    for (std::size_t i = 0; i < caps[0].rows.size(); ++i)
      ASSERT_EQ(caps[0].rows[i].probs, caps[k].rows[i].probs) << k + 1 << " threads, row " << i;
  }
}

}  // namespace
}  // namespace kvs
