// GGUF models of each architecture llama.cpp's converter writes and KVScope reads: a random model
// written as a GGUF file of that architecture (qwen3, gemma3, gemma2, phi3, granite, smollm3,
// olmo2 and OLMo 3, exaone4) loads as the model it was written from — its configuration, its
// weights (stacked or permuted ones split or permuted as the HF loader does) and its logits.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "gguf_writer.h"
#include "inference/engine.h"
#include "inference/loader.h"
#include "tiny_model.h"

namespace kvs {
namespace {

using testing::input_error_of;
using testing::TempDir;

// `m` as a GGUF file of architecture `arch`, laid out as llama.cpp's converter writes a model with
// Hugging Face's rotate-half q/k rows (phi3's q/k/v and gate/up stacked in one tensor each): its
// hyper-parameters under "<arch>.", every tensor it holds but those named in `omit`; `extra` adds
// metadata.
void write_model_gguf(const std::string& path, const std::string& arch, const Model& m,
                      const std::set<std::string>& omit = {},
                      const std::function<void(testing::GgufWriter&)>& extra = {}) {
  const ModelConfig& c = m.config;
  testing::GgufWriter w;
  const std::string k = arch + ".";
  w.add_string("general.architecture", arch);
  w.add_u32(k + "embedding_length", c.dim);
  w.add_u32(k + "feed_forward_length", c.hidden_dim);
  w.add_u32(k + "block_count", c.n_layers);
  w.add_u32(k + "attention.head_count", c.n_heads);
  w.add_u32(k + "attention.head_count_kv", c.n_kv_heads);
  w.add_u32(k + "attention.key_length", c.head_dim);
  w.add_u32(k + "context_length", c.seq_len);
  w.add_f32(k + "rope.freq_base", c.rope_theta);
  w.add_f32(k + "attention.layer_norm_rms_epsilon", c.rms_eps);
  if (extra) extra(w);
  const auto matrix = [&](const std::string& name, const PackedMatrix& mat, uint64_t rows, uint64_t cols) {
    const WeightVector v = mat.unpacked();
    w.add_f32_tensor(name, {cols, rows}, std::vector<float>(v.begin(), v.end()));
  };
  // The matrices' rows stacked in one tensor, as phi3 stores q/k/v and gate/up.
  const auto stacked = [&](const std::string& name, std::initializer_list<const PackedMatrix*> parts) {
    std::vector<float> all;
    for (const PackedMatrix* p : parts) {
      const WeightVector v = p->unpacked();
      all.insert(all.end(), v.begin(), v.end());
    }
    w.add_f32_tensor(name, {static_cast<uint64_t>(c.dim), all.size() / c.dim}, all);
  };
  const bool phi3 = arch == "phi3";
  const auto vec = [&](const std::string& name, const WeightVector& v) {
    if (!v.empty() && !omit.count(name)) w.add_f32_tensor(name, {v.size()}, std::vector<float>(v.begin(), v.end()));
  };
  matrix("token_embd.weight", m.weights.token_embedding, c.vocab_size, c.dim);
  if (!c.tied_classifier) matrix("output.weight", m.weights.classifier, c.vocab_size, c.dim);
  vec("output_norm.weight", m.weights.final_norm);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = m.weights.layers[l];
    const std::string b = "blk." + std::to_string(l) + ".";
    vec(b + "attn_norm.weight", lw.attn_norm);
    if (phi3) {
      stacked(b + "attn_qkv.weight", {&lw.wq, &lw.wk, &lw.wv});
    } else {
      matrix(b + "attn_q.weight", lw.wq, c.q_dim(), c.dim);
      matrix(b + "attn_k.weight", lw.wk, c.kv_dim(), c.dim);
      matrix(b + "attn_v.weight", lw.wv, c.kv_dim(), c.dim);
    }
    matrix(b + "attn_output.weight", lw.wo, c.dim, c.q_dim());
    vec(b + "attn_q_norm.weight", lw.q_norm);
    vec(b + "attn_k_norm.weight", lw.k_norm);
    vec(b + "post_attention_norm.weight", lw.post_attn_norm);
    vec(b + "ffn_norm.weight", lw.ffn_norm);
    vec(b + "post_ffw_norm.weight", lw.post_ffn_norm);
    if (phi3) {
      stacked(b + "ffn_up.weight", {&lw.w_gate, &lw.w_up});
    } else {
      matrix(b + "ffn_gate.weight", lw.w_gate, c.hidden_dim, c.dim);
      matrix(b + "ffn_up.weight", lw.w_up, c.hidden_dim, c.dim);
    }
    matrix(b + "ffn_down.weight", lw.w_down, c.dim, c.hidden_dim);
  }
  w.write(path);
}

// The last position's logits of `tokens` through `m` are those of the naive forward pass of
// `want` (the model it was written from).
void expect_naive_logits(const Model& m, const Model& want, const std::vector<int>& tokens) {
  Engine e(m);
  const std::span<const float> logits = e.prefill(tokens);
  const tiny::Reference ref = tiny::reference_forward(want, tokens);
  const std::size_t last = (tokens.size() - 1) * want.config.vocab_size;
  for (int i = 0; i < want.config.vocab_size; ++i) EXPECT_NEAR(logits[i], ref.logits[last + i], 1e-4) << i;
}

// A qwen3 GGUF: q/k in Hugging Face's rotate-half order, attn_q_norm / attn_k_norm [head_dim] per
// layer, key_length wider than dim / head_count (as in Qwen3-0.6B: 1024 / 16 heads of 128). The
// weights load as written and the engine's logits are the naive forward pass's.
TEST(GgufModel, Qwen3WithQkNormAndWideHeads) {
  ModelConfig c = tiny::tiny_config();
  c.head_dim = 16;  // q width 64 from a dim of 32
  c.qk_norm = true;
  c.rope_theta = 1000000.0f;
  c.rms_eps = 1e-6f;
  const Model want = tiny::to_rotate_half(tiny::random_model(c, 41));
  TempDir dir;
  const std::string path = dir.file("qwen3.gguf");
  write_model_gguf(path, "qwen3", want);
  const Model m = load_model(path);
  EXPECT_EQ(m.config.arch, "qwen3");
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_EQ(m.config.head_dim, 16);
  EXPECT_EQ(m.config.rope_style, RopeStyle::RotateHalf);
  for (int l = 0; l < c.n_layers; ++l) {
    EXPECT_EQ(m.weights.layers[l].q_norm, want.weights.layers[l].q_norm) << l;
    EXPECT_EQ(m.weights.layers[l].k_norm, want.weights.layers[l].k_norm) << l;
    EXPECT_EQ(m.weights.layers[l].wq.unpacked(), want.weights.layers[l].wq.unpacked()) << l;
  }
  expect_naive_logits(m, want, {1, 5, 9, 3, 14, 7, 22, 30});

  const std::string missing = dir.file("no-k-norm.gguf");
  write_model_gguf(missing, "qwen3", want, {"blk.1.attn_k_norm.weight"});
  EXPECT_EQ(input_error_of([&] { load_model(missing); }), missing + ": missing tensor blk.1.attn_k_norm.weight");
}

// A gemma3 GGUF (its norms already 1 + HF's weights, as the converter writes them): every 6th layer
// global, the others local within attention.sliding_window with RoPE base 10000, post-block
// norms, GeGLU and embeddings scaled by sqrt(dim), as the naive forward pass runs them;
// soft-capping keys refused (llama.cpp's gemma3 caps nothing).
TEST(GgufModel, Gemma3LocalAndGlobalLayers) {
  ModelConfig c = tiny::gemma3_config();
  c.n_layers = 6;
  c.local_layers = {1, 1, 1, 1, 1, 0};
  c.rope_local_theta = 10000.0f;
  const Model want = tiny::random_model(c, 43);
  const auto window = [&](testing::GgufWriter& w) { w.add_u32("gemma3.attention.sliding_window", c.sliding_window); };
  TempDir dir;
  const std::string path = dir.file("gemma3.gguf");
  write_model_gguf(path, "gemma3", want, {}, window);
  const Model m = load_model(path);
  EXPECT_EQ(m.config.local_layers, c.local_layers);
  EXPECT_EQ(m.config.sliding_window, c.sliding_window);
  EXPECT_EQ(m.config.window(5), 0);
  EXPECT_EQ(m.config.activation, Activation::GeluTanh);
  EXPECT_EQ(m.config.embed_scale, std::sqrt(32.0f));
  EXPECT_EQ(m.weights.layers[3].post_ffn_norm, want.weights.layers[3].post_ffn_norm);
  expect_naive_logits(m, want, {1, 5, 9, 3, 14, 7, 22, 30, 2, 11});  // longer than the window

  const std::string capped = dir.file("softcap.gguf");
  write_model_gguf(capped, "gemma3", want, {}, [&](testing::GgufWriter& w) {
    window(w);
    w.add_f32("gemma3.final_logit_softcapping", 30.0f);
  });
  EXPECT_EQ(input_error_of([&] { load_model(capped); }),
            capped + ": gemma3.final_logit_softcapping is not supported (llama.cpp's gemma3 caps nothing)");
}

// A gemma2 GGUF: every other layer local from layer 0, one RoPE base for all, the file's soft caps
// on scores and logits (the naive forward pass with them), 50 and 30 where the file gives none.
TEST(GgufModel, Gemma2SoftCapsAndAlternatingLayers) {
  const ModelConfig c = tiny::gemma2_config();
  const Model want = tiny::random_model(c, 44);
  TempDir dir;
  const std::string path = dir.file("gemma2.gguf");
  write_model_gguf(path, "gemma2", want, {}, [&](testing::GgufWriter& w) {
    w.add_u32("gemma2.attention.sliding_window", c.sliding_window);
    w.add_f32("gemma2.attn_logit_softcapping", c.attn_softcap);
    w.add_f32("gemma2.final_logit_softcapping", c.final_softcap);
  });
  const Model m = load_model(path);
  EXPECT_EQ(m.config.arch, "gemma2");
  EXPECT_EQ(m.config.local_layers, c.local_layers);
  EXPECT_EQ(m.config.rope_local_theta, m.config.rope_theta);
  EXPECT_EQ(m.config.attn_softcap, c.attn_softcap);
  EXPECT_EQ(m.config.final_softcap, c.final_softcap);
  EXPECT_FALSE(m.config.qk_norm);
  expect_naive_logits(m, want, {1, 5, 9, 3, 14, 7, 22, 30, 2, 11});  // longer than the window

  const std::string defaults = dir.file("defaults.gguf");
  write_model_gguf(defaults, "gemma2", want);
  const Model d = load_model(defaults);
  EXPECT_EQ(d.config.attn_softcap, 50.0f);
  EXPECT_EQ(d.config.final_softcap, 30.0f);
  EXPECT_EQ(d.config.sliding_window, 4096);
}

// A phi3 GGUF: q/k/v stacked in attn_qkv and gate/up in ffn_up, in Hugging Face's rotate-half
// order; attention.sliding_window on every layer; the naive forward pass's logits; the 128K
// models' LongRoPE factors.
TEST(GgufModel, Phi3FusedProjectionsAndSlidingWindow) {
  ModelConfig c = tiny::tiny_config();
  c.rope_style = RopeStyle::RotateHalf;
  c.sliding_window = 5;
  const Model want = tiny::random_model(c, 45);
  TempDir dir;
  const std::string path = dir.file("phi3.gguf");
  write_model_gguf(path, "phi3", want, {},
                   [&](testing::GgufWriter& w) { w.add_u32("phi3.attention.sliding_window", c.sliding_window); });
  const Model m = load_model(path);
  EXPECT_EQ(m.config.arch, "phi3");
  EXPECT_EQ(m.config.sliding_window, 5);
  for (int l = 0; l < c.n_layers; ++l) {
    EXPECT_EQ(m.weights.layers[l].wk.unpacked(), want.weights.layers[l].wk.unpacked()) << l;
    EXPECT_EQ(m.weights.layers[l].w_up.unpacked(), want.weights.layers[l].w_up.unpacked()) << l;
  }
  expect_naive_logits(m, want, {1, 5, 9, 3, 14, 7, 22, 30, 2, 11});  // longer than the window

  // The 128K models' LongRoPE: the factor tensors, the original context and the attention factor
  // from the metadata; the loaded model's logits are those of the model it was written from, short
  // factors within the original context of 6 and long past it.
  const std::string longrope = dir.file("longrope.gguf");
  Model scaled = want;
  scaled.config = tiny::with_longrope(c, 6, 1.1f);
  const RopeScaling& r = scaled.config.rope_scaling;
  const auto factors = [&](testing::GgufWriter& w) {
    w.add_u32("phi3.attention.sliding_window", c.sliding_window);
    w.add_f32_tensor("rope_factors_short.weight", {4}, {r.short_factor.begin(), r.short_factor.end()});
    w.add_f32_tensor("rope_factors_long.weight", {4}, {r.long_factor.begin(), r.long_factor.end()});
  };
  write_model_gguf(longrope, "phi3", scaled, {}, [&](testing::GgufWriter& w) {
    factors(w);
    w.add_u32("phi3.rope.scaling.original_context_length", 6);
    w.add_f32("phi3.rope.scaling.attn_factor", 1.1f);
  });
  const Model lr = load_model(longrope);
  EXPECT_EQ(lr.config.rope_scaling.type, "longrope");
  EXPECT_EQ(lr.config.rope_scaling.long_factor, r.long_factor);
  EXPECT_EQ(lr.config.rope_scaling.attention_factor, 1.1f);
  for (const std::vector<int>& tokens : {std::vector<int>{1, 5, 9, 3, 14}, std::vector<int>{1, 5, 9, 3, 14, 7, 22, 30}}) {
    Engine loaded(lr), written(scaled);
    const std::span<const float> a = loaded.prefill(tokens), b = written.prefill(tokens);
    for (int i = 0; i < c.vocab_size; ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << tokens.size() << " tokens, logit " << i;
  }
  // Phi-4-mini's partial rotation: rope.dimension_count 4 of 8 dims, the q/k rows permuted as the
  // HF loader permutes them (checked against transformers there); no sliding window, which the
  // converter writes as a window of 0.
  const std::string partial = dir.file("partial.gguf");
  write_model_gguf(partial, "phi3", want, {}, [](testing::GgufWriter& w) {
    w.add_u32("phi3.rope.dimension_count", 4);
    w.add_u32("phi3.attention.sliding_window", 0);
  });
  const Model pm = load_model(partial);
  EXPECT_EQ(pm.config.rotary_dim, 4);
  EXPECT_EQ(pm.config.sliding_window, 0);
  Model permuted = want;
  permuted.config.rotary_dim = 4;
  permute_partial_rotary(permuted);
  EXPECT_EQ(pm.weights.layers[1].wq.unpacked(), permuted.weights.layers[1].wq.unpacked());
  EXPECT_NE(pm.weights.layers[1].wq.unpacked(), want.weights.layers[1].wq.unpacked());
  const std::string no_original = dir.file("no_original.gguf");
  write_model_gguf(no_original, "phi3", want, {}, factors);
  EXPECT_EQ(input_error_of([&] { load_model(no_original); }),
            no_original + ": missing metadata phi3.rope.scaling.original_context_length");
}

// A granite GGUF: llama's layout (interleaved pairs) and llama.cpp's four multipliers, folded into
// the weights as the HF loader folds Granite's (checked against transformers there): the naive
// forward pass of the written model with them folded by hand.
TEST(GgufModel, GraniteMultipliers) {
  const Model plain = tiny::random_model(tiny::tiny_config(), 47);
  TempDir dir;
  const std::string path = dir.file("granite.gguf");
  write_model_gguf(path, "granite", plain, {}, [](testing::GgufWriter& w) {
    w.add_f32("granite.embedding_scale", 12.0f);
    w.add_f32("granite.attention.scale", 0.2f);
    w.add_f32("granite.residual_scale", 0.22f);
    w.add_f32("granite.logit_scale", 8.0f);
  });
  const Model m = load_model(path);
  EXPECT_EQ(m.config.arch, "granite");
  EXPECT_EQ(m.config.rope_style, RopeStyle::Interleaved);
  Model folded = plain;
  folded.config.embed_scale = 12.0f;
  scale_queries(folded, 0.2f * std::sqrt(8.0f));
  scale_block_outputs(folded, 0.22f);
  scale_logits(folded, 8.0f);
  expect_naive_logits(m, folded, {1, 5, 9, 3, 14, 7, 22, 30, 2, 11});
}

// A smollm3 GGUF: llama's layout (interleaved pairs), every 4th layer without RoPE as llama.cpp
// runs it (no key says which): the naive forward pass of SmolLM3's layers.
TEST(GgufModel, SmolLM3NoPELayers) {
  ModelConfig c = tiny::smollm3_config();  // layer 3 of 4 NoPE
  c.rope_style = RopeStyle::Interleaved;
  const Model want = tiny::random_model(c, 48);
  TempDir dir;
  const std::string path = dir.file("smollm3.gguf");
  write_model_gguf(path, "smollm3", want);
  const Model m = load_model(path);
  EXPECT_EQ(m.config.arch, "smollm3");
  EXPECT_EQ(m.config.nope_layers, (std::vector<uint8_t>{0, 0, 0, 1}));
  expect_naive_logits(m, want, {1, 5, 9, 3, 14, 7, 22, 30, 2, 11});
}

// An olmo2 GGUF: no attn_norm or ffn_norm, the norms after both blocks, attn_q_norm and
// attn_k_norm as wide as all of a token's query (key) heads, rotate-half pairs; the naive forward
// pass's logits.
TEST(GgufModel, Olmo2NormsAfterTheBlocksAndAcrossHeads) {
  const ModelConfig c = tiny::olmo2_config();
  const Model want = tiny::random_model(c, 46);
  TempDir dir;
  const std::string path = dir.file("olmo2.gguf");
  write_model_gguf(path, "olmo2", want);
  const Model m = load_model(path);
  EXPECT_EQ(m.config.arch, "olmo2");
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_EQ(m.config.rope_style, RopeStyle::RotateHalf);
  EXPECT_FALSE(m.config.tied_classifier);
  for (int l = 0; l < c.n_layers; ++l) {
    EXPECT_TRUE(m.weights.layers[l].attn_norm.empty()) << l;
    EXPECT_TRUE(m.weights.layers[l].ffn_norm.empty()) << l;
    EXPECT_EQ(m.weights.layers[l].q_norm, want.weights.layers[l].q_norm) << l;
    EXPECT_EQ(m.weights.layers[l].k_norm.size(), static_cast<std::size_t>(c.kv_dim())) << l;
    EXPECT_EQ(m.weights.layers[l].post_attn_norm, want.weights.layers[l].post_attn_norm) << l;
  }
  expect_naive_logits(m, want, {1, 5, 9, 3, 14, 7, 22, 30, 2, 11});
}

// An exaone4 GGUF: OLMo 2's norms after the blocks with per-head QK-norm; with a window, the
// local layers attention.sliding_window_pattern marks (else all but every 4th), rotated as the
// global ones would be (linear scaling here), the global ones without RoPE; the naive forward
// pass's logits. Without a window every layer is global and rotates.
TEST(GgufModel, Exaone4HybridLayers) {
  const ModelConfig c = tiny::exaone4_config();  // layers 0-2 local (window 4), layer 3 global NoPE
  const Model want = tiny::random_model(c, 49);
  TempDir dir;
  const std::string path = dir.file("exaone4.gguf");
  const auto hybrid = [](const std::vector<bool>& pattern) {
    return [pattern](testing::GgufWriter& w) {
      w.add_string("exaone4.rope.scaling.type", "linear");
      w.add_f32("exaone4.rope.scaling.factor", 2.0f);
      w.add_u32("exaone4.attention.sliding_window", 4);
      if (!pattern.empty()) w.add_bools("exaone4.attention.sliding_window_pattern", pattern);
    };
  };
  write_model_gguf(path, "exaone4", want, {}, hybrid({true, true, true, false}));
  const Model m = load_model(path);
  EXPECT_EQ(m.config.arch, "exaone4");
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_EQ(m.config.local_layers, c.local_layers);
  EXPECT_EQ(m.config.nope_layers, c.nope_layers);
  EXPECT_TRUE(m.config.local_rope_as_global);
  EXPECT_EQ(m.config.window(0), 4);
  EXPECT_TRUE(m.weights.layers[0].attn_norm.empty());
  EXPECT_EQ(m.weights.layers[0].k_norm.size(), static_cast<std::size_t>(c.head_dim));
  expect_naive_logits(m, want, {1, 5, 9, 3, 14, 7, 22, 30, 2, 11});

  write_model_gguf(path, "exaone4", want, {}, hybrid({}));
  EXPECT_EQ(load_model(path).config.local_layers, c.local_layers);
  write_model_gguf(path, "exaone4", want, {}, hybrid({true, false, true, false}));
  EXPECT_EQ(load_model(path).config.nope_layers, (std::vector<uint8_t>{0, 1, 0, 1}));
  write_model_gguf(path, "exaone4", want, {}, hybrid({true, true}));
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": exaone4.attention.sliding_window_pattern is not 4 flags (one a layer)");

  write_model_gguf(path, "exaone4", want);
  const Model global = load_model(path);
  EXPECT_TRUE(global.config.local_layers.empty());
  EXPECT_TRUE(global.config.nope_layers.empty());
  EXPECT_EQ(global.config.window(0), 0);
}

// The logits of every position of `tokens` through `m` are those through `want`, the model it was
// written from: for settings the naive forward pass does not implement (YaRN), the GGUF file must
// give the engine the configuration the Hugging Face loader gives it.
void expect_engine_logits(const Model& m, const Model& want, const std::vector<int>& tokens) {
  Engine e(m), w(want);
  const std::span<const int> prompt(tokens.data(), 3);
  const auto logits = [](std::span<const float> s) { return std::vector<float>(s.begin(), s.end()); };
  EXPECT_EQ(logits(e.prefill(prompt)), logits(w.prefill(prompt)));
  for (std::size_t i = prompt.size(); i < tokens.size(); ++i)
    EXPECT_EQ(logits(e.decode(tokens[i])), logits(w.decode(tokens[i]))) << i;
}

// OLMo 3 as llama.cpp's converter writes it: olmo2 with attention.sliding_window (all layers but
// every 4th local, rotated at the global base unscaled) and YaRN on the global layers, its betas
// and attention factor copied from transformers' rope_scaling.
TEST(GgufModel, Olmo3LocalLayersAndYarn) {
  ModelConfig c = tiny::olmo2_config();
  c.arch = "olmo3";
  c.n_layers = 4;
  c.sliding_window = 4;
  c.local_layers = {1, 1, 1, 0};
  c.rope_local_theta = c.rope_theta;
  RopeScaling& r = c.rope_scaling;
  r.type = "yarn";
  r.factor = 4.0f;
  r.original_max_position = 16;
  r.beta_fast = 8.0f;
  r.beta_slow = 2.0f;
  r.attention_factor = 1.25f;
  const Model want = tiny::random_model(c, 47);
  TempDir dir;
  const std::string path = dir.file("olmo3.gguf");
  write_model_gguf(path, "olmo2", want, {}, [](testing::GgufWriter& w) {
    w.add_u32("olmo2.attention.sliding_window", 4);
    w.add_string("olmo2.rope.scaling.type", "yarn");
    w.add_f32("olmo2.rope.scaling.factor", 4.0f);
    w.add_u32("olmo2.rope.scaling.original_context_length", 16);
    w.add_f32("olmo2.rope.scaling.yarn_beta_fast", 8.0f);
    w.add_f32("olmo2.rope.scaling.yarn_beta_slow", 2.0f);
    w.add_f32("olmo2.rope.scaling.yarn_attn_factor", 1.25f);
  });
  const Model m = load_model(path);
  EXPECT_EQ(m.config.arch, "olmo3");
  EXPECT_EQ(m.config.local_layers, c.local_layers);
  EXPECT_EQ(m.config.window(0), 4);
  EXPECT_EQ(m.config.window(3), 0);
  EXPECT_EQ(m.config.rope_local_theta, c.rope_theta);
  const RopeScaling& got = m.config.rope_scaling;
  EXPECT_EQ(got.type, "yarn");
  EXPECT_EQ(got.factor, 4.0f);
  EXPECT_EQ(got.original_max_position, 16);
  EXPECT_EQ(got.beta_fast, 8.0f);
  EXPECT_EQ(got.beta_slow, 2.0f);
  EXPECT_EQ(got.attention_factor, 1.25f);
  expect_engine_logits(m, want, {1, 5, 9, 3, 14, 7, 22, 30, 2, 11, 4, 17});
}

}  // namespace
}  // namespace kvs
