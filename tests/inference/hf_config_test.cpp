// Hugging Face config.json variants on stories260K-hf's weights: Qwen2 (q/k/v biases), Qwen3
// (QK-norm, layer_types), Mistral, rope_scaling llama3 / linear / unsupported, untied lm_head; bad
// or unsupported settings (layer count, ranges, types, mlp_bias, hidden_act, a missing lm_head, an
// o_proj bias); and
// default_model_path().
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "inference/engine.h"
#include "inference/loader.h"
#include "inference/model_checks.h"
#include "loader_test_util.h"
#include "safetensors_writer.h"

namespace kvs {
namespace {

using testing::config_with;
using testing::copy_side_files;
using testing::copy_with_weights;
using testing::hf_config;
using testing::input_error_of;
using testing::RawTensor;
using testing::read_raw;
using testing::shared_model;
using testing::TempDir;
using testing::write_bytes;
using testing::write_safetensors;

RawTensor f32_tensor(const std::string& name, std::vector<uint64_t> shape, float base) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  RawTensor t{name, "F32", shape, std::vector<char>(n * 4)};
  for (uint64_t i = 0; i < n; ++i) {
    const float v = base + static_cast<float>(i);
    std::memcpy(t.data.data() + 4 * i, &v, 4);
  }
  return t;
}

// What loading stories260K-hf's weights under `config` gives: the one-line error with the
// "FOLDER/config.json: " it starts with taken off (the whole error where it names another file).
std::string config_refusal(const std::string& config) {
  TempDir dir;
  copy_with_weights(dir, config);
  const std::string error = input_error_of([&] { load_model(dir.file("")); });
  const std::string prefix = dir.file("config.json") + ": ";
  return error.starts_with(prefix) ? error.substr(prefix.size()) : error;
}

TEST(HfConfig, Qwen2WithBiasesAndLlama3RopeScaling) {
  TempDir dir;
  std::string config = config_with(hf_config(), "architectures", "[\"Qwen2ForCausalLM\"]");
  config = config_with(config, "model_type",
                "\"qwen2\", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                "\"original_max_position_embeddings\": 256}");
  copy_side_files(dir, config);
  std::vector<RawTensor> all = read_raw(shared_model("stories260K-hf/model.safetensors"));
  for (int l = 0; l < 5; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    all.push_back(f32_tensor(p + "q_proj.bias", {64}, 100.0f * l));
    all.push_back(f32_tensor(p + "k_proj.bias", {32}, 1000.0f));
    if (l != 4) all.push_back(f32_tensor(p + "v_proj.bias", {32}, 2000.0f));
  }
  write_safetensors(dir.file("model.safetensors"), all);
  EXPECT_EQ(
      input_error_of([&] { load_model(dir.file("")); }),
      dir.file("model.safetensors") + ": missing tensor model.layers.4.self_attn.v_proj.bias");
  all.push_back(f32_tensor("model.layers.4.self_attn.v_proj.bias", {32}, 2000.0f));
  write_safetensors(dir.file("model.safetensors"), all);
  const Model m = load_model(dir.file(""));
  EXPECT_EQ(m.config.arch, "qwen2");
  EXPECT_TRUE(m.config.qkv_bias);
  EXPECT_EQ(m.config.rope_style, RopeStyle::RotateHalf);
  EXPECT_EQ(m.weights.layers[2].bq[5], 205.0f);
  EXPECT_EQ(m.weights.layers[0].bk[31], 1031.0f);
  EXPECT_EQ(m.weights.layers[4].bv[0], 2000.0f);
  EXPECT_EQ(m.config.rope_scaling.type, "llama3");
  EXPECT_EQ(m.config.rope_scaling.factor, 8.0f);
  EXPECT_EQ(m.config.rope_scaling.low_freq_factor, 1.0f);
  EXPECT_EQ(m.config.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(m.config.rope_scaling.original_max_position, 256);
}

// Qwen3: q_norm / k_norm [head_dim] on every layer, no biases, head_dim 128 where config.json gives
// none (transformers' Qwen3Config default); layer_types other than full_attention are refused,
// naming config.json.
TEST(HfConfig, Qwen3QkNormsAndLayerTypes) {
  const std::string no_head_dim =
      config_with(config_with(hf_config(), "architectures", "[\"Qwen3ForCausalLM\"]"), "head_dim", "null");
  TempDir wide;
  copy_with_weights(wide, no_head_dim);
  EXPECT_EQ(input_error_of([&] { load_model(wide.file("")); }),
            wide.file("model.safetensors") +
                ": tensor model.layers.0.self_attn.q_proj.weight has shape [64, 64], config.json implies [1024, 64]");
  const std::string qwen3 = config_with(no_head_dim, "head_dim", "8");
  TempDir dir;
  copy_side_files(dir, config_with(qwen3, "model_type", "\"qwen3\""));
  std::vector<RawTensor> all = read_raw(shared_model("stories260K-hf/model.safetensors"));
  for (int l = 0; l < 5; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    all.push_back(f32_tensor(p + "q_norm.weight", {8}, 10.0f * l));
    if (l != 3) all.push_back(f32_tensor(p + "k_norm.weight", {8}, -3.0f));
  }
  write_safetensors(dir.file("model.safetensors"), all);
  EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }),
            dir.file("model.safetensors") + ": missing tensor model.layers.3.self_attn.k_norm.weight");
  all.push_back(f32_tensor("model.layers.3.self_attn.k_norm.weight", {8}, -3.0f));
  write_safetensors(dir.file("model.safetensors"), all);
  const Model m = load_model(dir.file(""));
  EXPECT_EQ(m.config.arch, "qwen3");
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_FALSE(m.config.qkv_bias);
  EXPECT_EQ(m.config.rope_style, RopeStyle::RotateHalf);
  EXPECT_EQ(m.weights.layers[2].q_norm, (WeightVector{20, 21, 22, 23, 24, 25, 26, 27}));
  EXPECT_EQ(m.weights.layers[4].k_norm[7], 4.0f);
  EXPECT_TRUE(m.weights.layers[0].bq.empty());

  const std::string five = "[\"full_attention\", \"full_attention\", \"full_attention\", \"full_attention\", ";
  TempDir full, sliding, odd;
  copy_side_files(full, config_with(qwen3, "model_type", "\"qwen3\", \"layer_types\": " + five + "\"full_attention\"]"));
  std::filesystem::copy_file(dir.file("model.safetensors"), full.file("model.safetensors"));
  EXPECT_EQ(load_model(full.file("")).config.n_layers, 5);
  copy_side_files(sliding,
                  config_with(qwen3, "model_type", "\"qwen3\", \"layer_types\": " + five + "\"sliding_attention\"]"));
  EXPECT_EQ(input_error_of([&] { load_model(sliding.file("")); }),
            sliding.file("config.json") +
                ": layer_types holds \"sliding_attention\" (supported: full_attention)");
  copy_side_files(odd, config_with(qwen3, "model_type", "\"qwen3\", \"layer_types\": " + five + "7]"));
  EXPECT_EQ(input_error_of([&] { load_model(odd.file("")); }),
            odd.file("config.json") + ": layer_types holds a number (supported: full_attention)");
}

// stories260K-hf's tensors as a Gemma checkpoint lays them out: the FFN's norms before and after it
// (pre_feedforward_layernorm from -0.5, post_feedforward_layernorm from 0, each + its index) and,
// with qk_norm, q_norm from 1 and k_norm from 0 on every layer.
std::vector<RawTensor> gemma_tensors(bool qk_norm) {
  std::vector<RawTensor> all = read_raw(shared_model("stories260K-hf/model.safetensors"));
  for (int l = 0; l < 5; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    if (qk_norm) {
      all.push_back(f32_tensor(p + "self_attn.q_norm.weight", {8}, 1.0f));
      all.push_back(f32_tensor(p + "self_attn.k_norm.weight", {8}, 0.0f));
    }
    all.push_back(f32_tensor(p + "pre_feedforward_layernorm.weight", {64}, -0.5f));
    all.push_back(f32_tensor(p + "post_feedforward_layernorm.weight", {64}, 0.0f));
  }
  return all;
}

// The model in dir, written with `config` and `tensors`.
Model load_written(const TempDir& dir, const std::string& config, const std::vector<RawTensor>& tensors) {
  copy_side_files(dir, config);
  write_safetensors(dir.file("model.safetensors"), tensors);
  return load_model(dir.file(""));
}

// Gemma 3: norms of 1 + weight (pre_feedforward_layernorm the FFN's, post_attention_layernorm
// the attention output's), q_norm scaled by sqrt(head_dim / query_pre_attn_scalar), local layers
// from layer_types or sliding_window_pattern, the local RoPE base from rope_local_base_freq or
// transformers 5's rope_parameters by layer type; soft caps only where given; other activations and
// malformed layer kinds refused.
TEST(HfConfig, Gemma3LayersNormsAndRope) {
  std::string gemma = config_with(hf_config(), "architectures", "[\"Gemma3ForCausalLM\"]");
  gemma = config_with(gemma, "hidden_act", "\"gelu_pytorch_tanh\"");
  gemma = config_with(gemma, "model_type", "\"gemma3_text\", \"query_pre_attn_scalar\": 32, \"sliding_window\": 16");
  const std::vector<RawTensor> all = gemma_tensors(true);
  const auto load_with = [&](const TempDir& dir, const std::string& config) { return load_written(dir, config, all); };
  TempDir a;
  const Model m = load_with(a, gemma);
  EXPECT_EQ(m.config.arch, "gemma3");
  EXPECT_EQ(m.config.local_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1}));  // pattern 6: the 6th would be global
  EXPECT_EQ(m.config.sliding_window, 16);
  EXPECT_EQ(m.config.rope_theta, 10000.0f);  // as stories260K-hf's config.json gives it
  EXPECT_EQ(m.config.rope_local_theta, 10000.0f);
  EXPECT_EQ(m.config.embed_scale, 8.0f);
  EXPECT_EQ(m.weights.layers[1].q_norm[2], (1.0f + 3.0f) * 0.5f);  // sqrt(8 / 32)
  EXPECT_EQ(m.weights.layers[1].k_norm[2], 1.0f + 2.0f);
  EXPECT_EQ(m.weights.layers[0].ffn_norm[0], 0.5f);
  EXPECT_EQ(m.weights.layers[0].post_ffn_norm[63], 64.0f);
  EXPECT_FALSE(m.weights.layers[0].post_attn_norm.empty());
  EXPECT_EQ(m.config.attn_softcap, 0.0f);
  EXPECT_EQ(m.config.final_softcap, 0.0f);

  TempDir capped;
  const Model k = load_with(capped, config_with(gemma, "rms_norm_eps", "1e-5, \"final_logit_softcapping\": 30.0"));
  EXPECT_EQ(k.config.final_softcap, 30.0f);
  EXPECT_EQ(k.config.attn_softcap, 0.0f);

  TempDir b;
  const std::string typed = config_with(
      gemma, "rope_theta",
      "null, \"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0, \"rope_theta\": "
      "500000.0}, \"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 20000.0}}, \"layer_types\": "
      "[\"full_attention\", \"sliding_attention\", \"full_attention\", \"sliding_attention\", \"sliding_attention\"]");
  const Model t = load_with(b, typed);
  EXPECT_EQ(t.config.local_layers, (std::vector<uint8_t>{0, 1, 0, 1, 1}));
  EXPECT_EQ(t.config.rope_theta, 500000.0f);
  EXPECT_EQ(t.config.rope_scaling.type, "linear");
  EXPECT_EQ(t.config.rope_local_theta, 20000.0f);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {config_with(gemma, "rms_norm_eps", "1e-5, \"attn_logit_softcapping\": -1"),
       "attn_logit_softcapping has an invalid value -1 (expected a positive number)"},
      {config_with(gemma, "hidden_act", "\"gelu\""), "hidden_act \"gelu\" is not supported (supported: gelu_pytorch_tanh)"},
      {config_with(gemma, "rms_norm_eps", "1e-5, \"layer_types\": [\"full_attention\"]"),
       "layer_types is not a list of num_hidden_layers (5) layer kinds"},
      {config_with(gemma, "rms_norm_eps",
                   "1e-5, \"layer_types\": [\"full_attention\", \"x\", \"full_attention\", \"full_attention\", "
                   "\"full_attention\"]"),
       "layer_types holds \"x\" (supported: sliding_attention, full_attention)"},
  };
  for (const auto& [config, problem] : bad) EXPECT_EQ(config_refusal(config), problem);
}

// Phi-3: q, k and v stacked in one qkv_proj and gate and up in one gate_up_proj, split on load into
// the weights the separate projections give; its sliding_window applies to every layer;
// partial_rotary_factor (Phi-4-mini's) rotates the first dims of each head.
TEST(HfConfig, Phi3FusedProjectionsSplitOnLoad) {
  const std::vector<RawTensor> llama = read_raw(shared_model("stories260K-hf/model.safetensors"));
  const auto find = [&](const std::string& name) {
    return *std::find_if(llama.begin(), llama.end(), [&](const RawTensor& t) { return t.name == name; });
  };
  // The tensors `parts` stacked by rows as `name`.
  const auto stacked = [&](const std::string& name, const std::vector<std::string>& parts) {
    RawTensor t = find(parts[0]);
    t.name = name;
    for (std::size_t i = 1; i < parts.size(); ++i) {
      const RawTensor& more = find(parts[i]);
      t.shape[0] += more.shape[0];
      t.data.insert(t.data.end(), more.data.begin(), more.data.end());
    }
    return t;
  };
  std::vector<RawTensor> all;
  for (const RawTensor& t : llama) {
    const bool fused = t.name.find("_proj.weight") != std::string::npos &&
                       (t.name.find("q_proj") != std::string::npos || t.name.find("k_proj") != std::string::npos ||
                        t.name.find("v_proj") != std::string::npos || t.name.find("gate_proj") != std::string::npos ||
                        t.name.find("up_proj") != std::string::npos);
    if (!fused) all.push_back(t);
  }
  for (int l = 0; l < 5; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    all.push_back(stacked(p + "self_attn.qkv_proj.weight",
                          {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"}));
    all.push_back(stacked(p + "mlp.gate_up_proj.weight", {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}));
  }
  std::string phi3 = config_with(hf_config(), "architectures", "[\"Phi3ForCausalLM\"]");
  phi3 = config_with(phi3, "model_type", "\"phi3\", \"sliding_window\": 100");
  TempDir dir;
  const Model m = load_written(dir, phi3, all);
  const Model want = load_model(shared_model("stories260K-hf"));
  EXPECT_EQ(m.config.arch, "phi3");
  EXPECT_EQ(m.config.sliding_window, 100);
  EXPECT_EQ(m.config.window(3), 100);
  for (int l = 0; l < 5; ++l) {
    const LayerWeights &a = m.weights.layers[l], &b = want.weights.layers[l];
    EXPECT_EQ(a.wq.unpacked(), b.wq.unpacked()) << l;
    EXPECT_EQ(a.wk.unpacked(), b.wk.unpacked()) << l;
    EXPECT_EQ(a.wv.unpacked(), b.wv.unpacked()) << l;
    EXPECT_EQ(a.w_gate.unpacked(), b.w_gate.unpacked()) << l;
    EXPECT_EQ(a.w_up.unpacked(), b.w_up.unpacked()) << l;
  }
  // RoPE over 6 of each head's 8 dims: each head's q and k rows permuted so that the rotated pairs
  // (i, i + 3) sit at (i, i + 4), the unrotated dims 6 and 7 at 3 and 7; v untouched. Other
  // architectures, and factors that leave an odd number of dims, are refused.
  TempDir partial;
  const Model p = load_written(partial, config_with(phi3, "rms_norm_eps", "1e-5, \"partial_rotary_factor\": 0.75"), all);
  EXPECT_EQ(p.config.rotary_dim, 6);
  const int head[] = {0, 1, 2, 6, 3, 4, 5, 7};
  for (int l = 0; l < 5; ++l) {
    const LayerWeights &a = p.weights.layers[l], &b = want.weights.layers[l];
    std::vector<float> got(64), old(64);
    for (int r = 0; r < 16; ++r) {  // two query heads and two key heads' rows
      const int h = r / 8, j = r % 8;
      a.wq.row(r, got.data());
      b.wq.row(h * 8 + head[j], old.data());
      EXPECT_EQ(got, old) << "layer " << l << " q row " << r;
      a.wk.row(r, got.data());
      b.wk.row(h * 8 + head[j], old.data());
      EXPECT_EQ(got, old) << "layer " << l << " k row " << r;
    }
    EXPECT_EQ(a.wv.unpacked(), b.wv.unpacked()) << l;
  }
  const std::vector<std::pair<std::string, std::string>> refused = {
      {config_with(phi3, "rms_norm_eps", "1e-5, \"partial_rotary_factor\": 0.7"),
       "partial_rotary_factor 0.7 does not rotate an even number of dims below head_dim 8"},
      {config_with(hf_config(), "rms_norm_eps", "1e-5, \"partial_rotary_factor\": 0.75"),
       "partial_rotary_factor 0.75 is not supported (RoPE over the whole head only)"},
  };
  for (const auto& [config, problem] : refused) EXPECT_EQ(config_refusal(config), problem);
}

// OLMo 2: no input_layernorm (the blocks read the residual as it is), post_attention_layernorm and
// post_feedforward_layernorm after the blocks, q_norm and k_norm as wide as all of a token's query
// (key) heads; rms_norm_eps defaults to Olmo2Config's 1e-5. A per-head q_norm (Qwen3's width) is
// refused by its shape.
// stories260K-hf's tensors as OLMo and EXAONE 4 checkpoints lay them out: no input_layernorm,
// q_norm and k_norm [q_width] and [k_width] from 1 and 2, post_feedforward_layernorm from 3 (each +
// its index).
std::vector<RawTensor> olmo_tensors(uint64_t q_width, uint64_t k_width) {
  std::vector<RawTensor> all;
  for (const RawTensor& t : read_raw(shared_model("stories260K-hf/model.safetensors")))
    if (t.name.find("input_layernorm") == std::string::npos) all.push_back(t);
  for (int l = 0; l < 5; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    all.push_back(f32_tensor(p + "self_attn.q_norm.weight", {q_width}, 1.0f));
    all.push_back(f32_tensor(p + "self_attn.k_norm.weight", {k_width}, 2.0f));
    all.push_back(f32_tensor(p + "post_feedforward_layernorm.weight", {64}, 3.0f));
  }
  return all;
}

TEST(HfConfig, Olmo2NormsAfterTheBlocksAndAcrossHeads) {
  const std::vector<RawTensor> all = olmo_tensors(64, 32), per_head = olmo_tensors(8, 8);
  std::string olmo = config_with(hf_config(), "architectures", "[\"Olmo2ForCausalLM\"]");
  olmo = config_with(olmo, "model_type", "\"olmo2\"");
  TempDir dir;
  const Model m = load_written(dir, olmo, all);
  const Model llama = load_model(shared_model("stories260K-hf"));
  EXPECT_EQ(m.config.arch, "olmo2");
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_EQ(m.config.rope_style, RopeStyle::RotateHalf);
  for (int l = 0; l < 5; ++l) {
    const LayerWeights& w = m.weights.layers[l];
    EXPECT_TRUE(w.attn_norm.empty()) << l;
    EXPECT_TRUE(w.ffn_norm.empty()) << l;
    EXPECT_EQ(w.post_attn_norm, llama.weights.layers[l].ffn_norm) << l;  // the file's post_attention_layernorm
    ASSERT_EQ(w.q_norm.size(), 64u);
    ASSERT_EQ(w.k_norm.size(), 32u);
    EXPECT_EQ(w.q_norm[63], 64.0f);
    EXPECT_EQ(w.k_norm[31], 33.0f);
    EXPECT_EQ(w.post_ffn_norm[0], 3.0f);
    EXPECT_EQ(w.wq.unpacked(), llama.weights.layers[l].wq.unpacked()) << l;
  }

  TempDir no_eps;
  std::string without_eps = olmo;
  const std::size_t at = without_eps.find("\"rms_norm_eps\"");
  ASSERT_NE(at, std::string::npos);
  without_eps.erase(at, without_eps.find(',', at) + 1 - at);
  EXPECT_EQ(load_written(no_eps, without_eps, all).config.rms_eps, 1e-5f);

  TempDir wrong;
  copy_side_files(wrong, olmo);
  write_safetensors(wrong.file("model.safetensors"), per_head);
  EXPECT_EQ(input_error_of([&] { load_model(wrong.file("")); }),
            wrong.file("model.safetensors") + ": tensor model.layers.0.self_attn.q_norm.weight has shape [8], "
                                              "config.json implies [64]");
}

// OLMo 3: OLMo 2's tensors; all layers but every 4th local within sliding_window (or as layer_types
// says), rotated at the global base unscaled; YaRN on the global layers, its attention factor
// 0.1 ln(factor) + 1 unless given.
TEST(HfConfig, Olmo3LocalLayersAndYarn) {
  const std::vector<RawTensor> all = olmo_tensors(64, 32);
  // config.json of an Olmo3ForCausalLM with rope_scaling `scaling` (and `more` keys after it)
  const auto olmo = [](const std::string& scaling, const std::string& more = "") {
    return config_with(config_with(hf_config(), "architectures", "[\"Olmo3ForCausalLM\"]"), "rope_theta",
                       "500000.0, \"sliding_window\": 16, \"rope_scaling\": " + scaling + more);
  };
  TempDir dir;
  const Model m = load_written(
      dir, olmo("{\"rope_type\": \"yarn\", \"factor\": 8.0, \"original_max_position_embeddings\": 64}"), all);
  EXPECT_EQ(m.config.arch, "olmo3");
  EXPECT_EQ(m.config.local_layers, (std::vector<uint8_t>{1, 1, 1, 0, 1}));
  EXPECT_EQ(m.config.window(0), 16);
  EXPECT_EQ(m.config.window(3), 0);
  EXPECT_EQ(m.config.rope_local_theta, 500000.0f);
  const RopeScaling& r = m.config.rope_scaling;
  EXPECT_EQ(r.type, "yarn");
  EXPECT_EQ(r.factor, 8.0f);
  EXPECT_EQ(r.original_max_position, 64);
  EXPECT_NEAR(r.attention_factor, 1.2079441541679836, 1e-6);
  EXPECT_TRUE(m.weights.layers[2].attn_norm.empty());
  EXPECT_EQ(m.weights.layers[2].q_norm.size(), 64u);

  // YaRN without a factor: the context's growth over the original (512 / 128); DeepSeek's mscale
  // pair sets the attention factor; an attention factor given wins.
  TempDir implied;
  const Model d = load_written(
      implied,
      olmo("{\"rope_type\": \"yarn\", \"original_max_position_embeddings\": 128, \"mscale\": 0.5, "
           "\"mscale_all_dim\": 1.0, \"beta_fast\": 16, \"truncate\": false}",
           ", \"layer_types\": [\"full_attention\", \"sliding_attention\", \"full_attention\", "
           "\"sliding_attention\", \"full_attention\"]"),
      all);
  EXPECT_EQ(d.config.local_layers, (std::vector<uint8_t>{0, 1, 0, 1, 0}));
  EXPECT_EQ(d.config.rope_scaling.factor, 4.0f);
  EXPECT_NEAR(d.config.rope_scaling.attention_factor, (0.05 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1), 1e-6);
  EXPECT_EQ(d.config.rope_scaling.beta_fast, 16.0f);
  EXPECT_FALSE(d.config.rope_scaling.truncate);
  TempDir given;
  const Model g = load_written(
      given, olmo("{\"rope_type\": \"yarn\", \"factor\": 2, \"attention_factor\": 1.5}"), all);
  EXPECT_EQ(g.config.rope_scaling.attention_factor, 1.5f);
  EXPECT_EQ(g.config.rope_scaling.original_max_position, 512);  // no original given: the context
}

// SmolLM3: Llama's tensors, every 4th layer without RoPE (or as no_rope_layers says, 1 where a
// layer rotates); a windowed NoPE layer and malformed lists are refused.
TEST(HfConfig, SmolLM3NoPELayers) {
  const std::string smol = config_with(config_with(hf_config(), "architectures", "[\"SmolLM3ForCausalLM\"]"),
                                       "model_type", "\"smollm3\"");
  TempDir dir;
  copy_with_weights(dir, smol);
  const Model m = load_model(dir.file(""));
  EXPECT_EQ(m.config.arch, "smollm3");
  EXPECT_EQ(m.config.nope_layers, (std::vector<uint8_t>{0, 0, 0, 1, 0}));
  EXPECT_TRUE(m.config.nope(3));
  EXPECT_FALSE(m.config.nope(4));
  TempDir listed;
  copy_with_weights(listed, config_with(smol, "model_type", "\"smollm3\", \"no_rope_layers\": [1, 0, 1, 1, 0]"));
  EXPECT_EQ(load_model(listed.file("")).config.nope_layers, (std::vector<uint8_t>{0, 1, 0, 0, 1}));
  // use_sliding_window: the window on the NoPE layers (or those layer_types names); without a
  // sliding_window, on none
  TempDir windowed, unwindowed;
  copy_with_weights(windowed, config_with(smol, "model_type", "\"smollm3\", \"use_sliding_window\": true, "
                                                              "\"sliding_window\": 8"));
  const ModelConfig w = load_model(windowed.file("")).config;
  EXPECT_EQ(w.sliding_window, 8);
  EXPECT_EQ(w.local_layers, (std::vector<uint8_t>{0, 0, 0, 1, 0}));
  copy_with_weights(unwindowed, config_with(smol, "model_type", "\"smollm3\", \"use_sliding_window\": true"));
  EXPECT_TRUE(load_model(unwindowed.file("")).config.local_layers.empty());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"\"smollm3\", \"no_rope_layers\": [1, 0]", "no_rope_layers is not a list of num_hidden_layers (5) flags"},
      {"\"smollm3\", \"no_rope_layers\": [1, 0, 2, 1, 1]", "no_rope_layers holds 2 (expected 0 or 1)"},
      {"\"smollm3\", \"use_sliding_window\": true, \"sliding_window\": 0",
       "sliding_window has an invalid value 0 (expected an integer from 1 to " + std::to_string(kMaxContext) + ")"},
  };
  for (const auto& [model_type, problem] : bad)
    EXPECT_EQ(config_refusal(config_with(smol, "model_type", model_type)), problem);
}

// Granite: Llama with multipliers, folded into the weights on load: the embeddings' as embed_scale,
// the score scale into the queries, each block's output into wo and w_down, the logits' divisor
// into the final norm (the logits of logits_scaling 4 are a quarter of those of 1).
TEST(HfConfig, GraniteMultipliersAreFoldedIntoTheWeights) {
  const auto granite = [](const std::string& logits_scaling) {
    return config_with(config_with(hf_config(), "architectures", "[\"GraniteForCausalLM\"]"), "model_type",
                       "\"granite\", \"embedding_multiplier\": 12.0, \"residual_multiplier\": 0.25, "
                       "\"attention_multiplier\": 0.5, \"logits_scaling\": " + logits_scaling);
  };
  TempDir a, b;
  copy_with_weights(a, granite("4.0"));
  copy_with_weights(b, granite("1.0"));
  const Model m = load_model(a.file("")), one = load_model(b.file("")), llama = load_model(shared_model("stories260K-hf"));
  EXPECT_EQ(m.config.arch, "granite");
  EXPECT_EQ(m.config.embed_scale, 12.0f);
  const LayerWeights &g = m.weights.layers[2], &l = llama.weights.layers[2];
  EXPECT_FLOAT_EQ(g.wo.unpacked()[5], 0.25f * l.wo.unpacked()[5]);
  EXPECT_FLOAT_EQ(g.w_down.unpacked()[7], 0.25f * l.w_down.unpacked()[7]);
  EXPECT_FLOAT_EQ(g.wq.unpacked()[3], 0.5f * std::sqrt(8.0f) * l.wq.unpacked()[3]);  // 0.5 over head_dim^-1/2
  EXPECT_EQ(g.wk.unpacked(), l.wk.unpacked());
  const std::vector<int> tokens = {1, 403, 407, 261, 378};
  Engine ea(m), eb(one);
  const std::span<const float> la = ea.prefill(tokens), lb = eb.prefill(tokens);
  for (int i = 0; i < m.config.vocab_size; ++i) EXPECT_NEAR(la[i] * 4.0f, lb[i], 1e-5f * std::max(1.0f, std::abs(lb[i])));
}

// EXAONE 4: OLMo's layout with per-head QK-norm; with a sliding_window (4096 where none is given)
// every 4th layer global and NoPE, or as sliding_window_pattern's string of L and G says, local
// layers rotated as the global ones would be; sliding_window null: every layer global and rotated.
TEST(HfConfig, Exaone4LocalAndNoPELayers) {
  const std::vector<RawTensor> all = olmo_tensors(8, 8);
  const auto exaone = [](const std::string& more) {
    return config_with(config_with(hf_config(), "architectures", "[\"Exaone4ForCausalLM\"]"), "model_type",
                       "\"exaone4\"" + more);
  };
  TempDir dir;
  const Model m = load_written(dir, exaone(""), all);
  EXPECT_EQ(m.config.arch, "exaone4");
  EXPECT_EQ(m.config.sliding_window, 4096);
  EXPECT_EQ(m.config.local_layers, (std::vector<uint8_t>{1, 1, 1, 0, 1}));
  EXPECT_EQ(m.config.nope_layers, (std::vector<uint8_t>{0, 0, 0, 1, 0}));
  EXPECT_TRUE(m.config.local_rope_as_global);
  EXPECT_TRUE(m.weights.layers[0].attn_norm.empty());
  EXPECT_EQ(m.weights.layers[0].q_norm.size(), 8u);
  TempDir pattern;
  const Model p = load_written(pattern, exaone(", \"sliding_window\": 16, \"sliding_window_pattern\": \"LG\""), all);
  EXPECT_EQ(p.config.local_layers, (std::vector<uint8_t>{1, 0, 1, 0, 1}));
  EXPECT_EQ(p.config.nope_layers, (std::vector<uint8_t>{0, 1, 0, 1, 0}));
  EXPECT_EQ(p.config.window(0), 16);
  TempDir global;
  const Model g = load_written(global, exaone(", \"sliding_window\": null"), all);
  EXPECT_TRUE(g.config.local_layers.empty());
  EXPECT_TRUE(g.config.nope_layers.empty());
  EXPECT_EQ(config_refusal(exaone(", \"sliding_window_pattern\": \"LXG\"")),
            "sliding_window_pattern \"LXG\" is not a string of L (local) and G (global)");
}

// Gemma 3 with a vision tower (Gemma3ForConditionalGeneration, as the 4B, 12B and 27B are published):
// the language model from text_config, which leaves num_attention_heads and num_key_value_heads to
// Gemma3TextConfig's defaults (8 and 4), its tensors under language_model.model. (the hub's layout)
// or model.language_model. (transformers 5's); the vision tower's tensors are not read. The same
// weights as the text-only layout; a missing text_config is refused.
TEST(HfConfig, Gemma3WithAVisionTowerRunsItsLanguageModel) {
  const std::vector<RawTensor> text = gemma_tensors(true);
  const std::string shape = "\"model_type\": \"gemma3_text\", \"hidden_size\": 64, \"intermediate_size\": 172, "
                            "\"num_hidden_layers\": 5, \"head_dim\": 8, \"vocab_size\": 512, "
                            "\"query_pre_attn_scalar\": 32, \"sliding_window\": 16, \"rope_theta\": 10000.0";
  TempDir plain;
  const Model want = load_written(plain, "{\"architectures\": [\"Gemma3ForCausalLM\"], " + shape + "}", text);
  for (const std::string prefix : {"language_model.model.", "model.language_model."}) {
    SCOPED_TRACE(prefix);
    std::vector<RawTensor> all = text;
    for (RawTensor& t : all) t.name = prefix + t.name.substr(std::string("model.").size());
    all.push_back(f32_tensor("vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight", {4, 4}, 0.0f));
    all.push_back(f32_tensor("multi_modal_projector.mm_soft_emb_norm.weight", {4}, 0.0f));
    TempDir dir;
    const std::string config = "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], \"eos_token_id\": [1, 106], "
                               "\"text_config\": {" + shape + "}, \"vision_config\": {\"hidden_size\": 4}}";
    const Model m = load_written(dir, config, all);
    EXPECT_EQ(m.config.arch, "gemma3");
    EXPECT_EQ(m.config.n_heads, 8);
    EXPECT_EQ(m.config.n_kv_heads, 4);
    EXPECT_EQ(m.config.local_layers, want.config.local_layers);
    EXPECT_TRUE(m.config.tied_classifier);
    EXPECT_NE(std::find(m.config.end_ids.begin(), m.config.end_ids.end(), 106), m.config.end_ids.end());
    for (int l = 0; l < 5; ++l) {
      EXPECT_EQ(m.weights.layers[l].wq.unpacked(), want.weights.layers[l].wq.unpacked()) << l;
      EXPECT_EQ(m.weights.layers[l].q_norm, want.weights.layers[l].q_norm) << l;
      EXPECT_EQ(m.weights.layers[l].post_ffn_norm, want.weights.layers[l].post_ffn_norm) << l;
    }
    EXPECT_EQ(m.weights.final_norm, want.weights.final_norm);
    EXPECT_EQ(m.weights.token_embedding.unpacked(), want.weights.token_embedding.unpacked());
  }
  TempDir bare;
  copy_side_files(bare, "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], " + shape + "}");
  EXPECT_EQ(input_error_of([&] { load_model(bare.file("")); }),
            bare.file("config.json") + ": Gemma3ForConditionalGeneration without a text_config object");
  TempDir narrow;
  copy_side_files(narrow, "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], \"text_config\": {" + shape +
                              ", \"num_attention_heads\": 0}}");
  EXPECT_EQ(input_error_of([&] { load_model(narrow.file("")); }),
            narrow.file("config.json") +
                " (text_config): num_attention_heads has an invalid value 0 (expected an integer from 1 to " +
                std::to_string(kMaxHeads) + ")");
}

// Gemma 2: every other layer local from layer 0 (no layer_types), one RoPE base for all, soft caps
// of 50 and 30 where config.json gives none and none where it gives null, the queries scaled by
// sqrt(head_dim / query_pre_attn_scalar) in wq (no q_norm), norms of 1 + weight around both blocks;
// RoPE scaling refused.
TEST(HfConfig, Gemma2SoftCapsLayersAndQueryScale) {
  std::string gemma = config_with(hf_config(), "architectures", "[\"Gemma2ForCausalLM\"]");
  gemma = config_with(gemma, "hidden_act", "\"gelu_pytorch_tanh\"");
  gemma = config_with(gemma, "model_type", "\"gemma2\", \"query_pre_attn_scalar\": 32, \"sliding_window\": 16");
  const std::vector<RawTensor> all = gemma_tensors(false);
  const auto load_with = [&](const TempDir& dir, const std::string& config) { return load_written(dir, config, all); };
  TempDir a;
  const Model m = load_with(a, gemma);
  EXPECT_EQ(m.config.arch, "gemma2");
  EXPECT_EQ(m.config.local_layers, (std::vector<uint8_t>{1, 0, 1, 0, 1}));
  EXPECT_EQ(m.config.sliding_window, 16);
  EXPECT_EQ(m.config.rope_local_theta, m.config.rope_theta);
  EXPECT_EQ(m.config.attn_softcap, 50.0f);
  EXPECT_EQ(m.config.final_softcap, 30.0f);
  EXPECT_EQ(m.config.activation, Activation::GeluTanh);
  EXPECT_EQ(m.config.embed_scale, 8.0f);
  EXPECT_FALSE(m.config.qk_norm);
  EXPECT_TRUE(m.weights.layers[0].q_norm.empty());
  EXPECT_EQ(m.weights.layers[0].ffn_norm[0], 0.5f);
  EXPECT_EQ(m.weights.layers[3].post_ffn_norm[63], 64.0f);
  const Model plain = load_model(shared_model("stories260K-hf"));
  const WeightVector wq = m.weights.layers[2].wq.unpacked(), wq0 = plain.weights.layers[2].wq.unpacked();
  for (std::size_t i = 0; i < wq.size(); ++i) ASSERT_EQ(wq[i], wq0[i] * 0.5f) << i;  // sqrt(8 / 32)
  EXPECT_EQ(m.weights.layers[2].wk.unpacked(), plain.weights.layers[2].wk.unpacked());

  TempDir b;
  const Model uncapped = load_with(
      b, config_with(gemma, "rms_norm_eps",
                     "1e-5, \"attn_logit_softcapping\": null, \"final_logit_softcapping\": 12.5"));
  EXPECT_EQ(uncapped.config.attn_softcap, 0.0f);
  EXPECT_EQ(uncapped.config.final_softcap, 12.5f);

  TempDir c;
  copy_side_files(c, config_with(gemma, "rms_norm_eps",
                                 "1e-5, \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}"));
  EXPECT_EQ(input_error_of([&] { load_model(c.file("")); }),
            c.file("config.json") + ": RoPE scaling is not supported in Gemma 2");
}

TEST(HfConfig, MistralLinearScalingAndUntiedHead) {
  TempDir dir;
  std::string config = config_with(hf_config(), "architectures", "[\"MistralForCausalLM\"]");
  config = config_with(config, "tie_word_embeddings", "false");
  config = config_with(config, "model_type",
                "\"mistral\", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}");
  copy_side_files(dir, config);
  std::vector<RawTensor> all = read_raw(shared_model("stories260K-hf/model.safetensors"));
  all.push_back(f32_tensor("lm_head.weight", {512, 64}, -7.0f));
  write_safetensors(dir.file("model.safetensors"), all);
  const Model m = load_model(dir.file(""));
  EXPECT_EQ(m.config.arch, "mistral");
  EXPECT_FALSE(m.config.tied_classifier);
  EXPECT_EQ(m.classifier().unpacked()[3], -4.0f);
  EXPECT_EQ(m.config.rope_scaling.type, "linear");
  EXPECT_EQ(m.config.rope_scaling.factor, 2.0f);

  // An unknown scaling type is refused, naming config.json.
  TempDir dir2;
  copy_side_files(dir2,
                  config_with(hf_config(), "model_type",
                       "\"llama\", \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 4}"));
  std::filesystem::copy_file(shared_model("stories260K-hf/model.safetensors"),
                             dir2.file("model.safetensors"));
  EXPECT_EQ(input_error_of([&] { load_model(dir2.file("")); }),
            dir2.file("config.json") +
                ": unsupported rope_scaling type \"dynamic\" (supported: llama3, linear, yarn, longrope)");
}

// Mistral's sliding_window is read (null, or a window as long as the context, means none); Qwen2's
// use_sliding_window puts it on the layers from max_window_layers on (or those layer_types names),
// rotated as the others; a max_window_layers that is not a count is refused, naming config.json.
TEST(HfConfig, SlidingWindow) {
  const auto load_with = [](const TempDir& dir, const std::string& arch, const std::string& extra) {
    std::string config = config_with(hf_config(), "architectures", "[\"" + arch + "\"]");
    copy_side_files(dir, config_with(config, "model_type", extra));
    std::filesystem::copy_file(shared_model("stories260K-hf/model.safetensors"), dir.file("model.safetensors"));
    // The config alone: Qwen2's q/k/v biases are not in stories260K's tensors.
    return load_model(dir.file(""), ModelParts::ConfigOnly);
  };
  TempDir a, b, c, d, e, f, g, h;
  EXPECT_EQ(load_with(a, "MistralForCausalLM", "\"mistral\", \"sliding_window\": 64").config.sliding_window, 64);
  EXPECT_EQ(load_with(b, "MistralForCausalLM", "\"mistral\", \"sliding_window\": null").config.sliding_window, 0);
  EXPECT_EQ(load_with(c, "MistralForCausalLM", "\"mistral\", \"sliding_window\": 4096").config.sliding_window, 0);
  // stories260K-hf has 5 layers: the window on layers 3 and 4
  const ModelConfig qwen = load_with(d, "Qwen2ForCausalLM",
                                     "\"qwen2\", \"sliding_window\": 64, \"use_sliding_window\": true, "
                                     "\"max_window_layers\": 3").config;
  EXPECT_EQ(qwen.sliding_window, 64);
  EXPECT_EQ(qwen.local_layers, (std::vector<uint8_t>{0, 0, 0, 1, 1}));
  EXPECT_TRUE(qwen.local_rope_as_global);
  const ModelConfig listed =
      load_with(e, "Qwen2ForCausalLM",
                "\"qwen2\", \"sliding_window\": 32, \"use_sliding_window\": true, \"max_window_layers\": 3, "
                "\"layer_types\": [\"sliding_attention\", \"full_attention\", \"full_attention\", "
                "\"full_attention\", \"sliding_attention\"]").config;
  EXPECT_EQ(listed.local_layers, (std::vector<uint8_t>{1, 0, 0, 0, 1}));
  EXPECT_EQ(load_with(f, "Qwen2ForCausalLM", "\"qwen2\", \"sliding_window\": 64, \"use_sliding_window\": false")
                .config.local_layers,
            std::vector<uint8_t>{});
  const ModelConfig null_window =
      load_with(h, "Qwen2ForCausalLM", "\"qwen2\", \"sliding_window\": null, \"use_sliding_window\": true").config;
  EXPECT_EQ(null_window.sliding_window, 0);
  EXPECT_TRUE(null_window.local_layers.empty());
  EXPECT_EQ(input_error_of([&] {
              load_with(g, "Qwen2ForCausalLM",
                        "\"qwen2\", \"use_sliding_window\": true, \"max_window_layers\": 1.5");
            }),
            g.file("config.json") + ": max_window_layers is 1.5, expected an integer from 0");
}

TEST(HfConfig, MissingFieldsAndFiles) {
  TempDir dir;
  copy_side_files(dir, config_with(hf_config(), "num_hidden_layers", "null"));
  EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }),
            dir.file("config.json") + ": missing num_hidden_layers");
  TempDir empty;
  EXPECT_EQ(input_error_of([&] { load_model(empty.file("")); }),
            empty.file("") + ": not a model folder (no config.json)");
  TempDir no_weights;
  copy_side_files(no_weights);
  EXPECT_EQ(input_error_of([&] { load_model(no_weights.file("")); }),
            no_weights.file("") + ": no model.safetensors or model.safetensors.index.json");
}

// num_hidden_layers must match the model.layers.N tensors (5 in stories260K-hf), checked before
// anything is sized from it: 2^24 used to allocate 4.7 GB of empty layers (counts above 2^16 are
// now refused as read), and 4 loaded 4 of the 5 layers as a different model.
TEST(HfConfig, LayerCountMustMatchTheLayerTensors) {
  for (const char* count : {"65536", "4"}) {
    TempDir dir;
    copy_with_weights(dir, config_with(hf_config(), "num_hidden_layers", count));
    EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }),
              dir.file("config.json") + ": num_hidden_layers " + count +
                  " does not match the checkpoint, which holds tensors for 5 layers "
                  "(model.layers.0.* to model.layers.4.*)");
  }
}

// Integer hyper-parameters are bounded, and n_heads * head_dim is computed in 64 bits: 49248 heads
// of 174422 wrapped to a q width of 64 and passed every shape check.
TEST(HfConfig, IntegerHyperParametersAreRangeChecked) {
  TempDir a, b, c;
  copy_with_weights(a, config_with(config_with(hf_config(), "num_attention_heads", "49248"), "head_dim", "174422"));
  EXPECT_EQ(input_error_of([&] { load_model(a.file("")); }),
            a.file("config.json") + ": 49248 heads of head_dim 174422 make 8589934656 query "
                                    "features, more than the 1048576 supported");
  copy_with_weights(b, config_with(hf_config(), "max_position_embeddings", "4294967312"));
  EXPECT_EQ(input_error_of([&] { load_model(b.file("")); }),
            b.file("config.json") + ": max_position_embeddings has an invalid value 4294967312 (expected "
                                    "an integer from 1 to 16777216)");
  copy_with_weights(c, config_with(hf_config(), "hidden_size", "\"64\""));
  EXPECT_EQ(input_error_of([&] { load_model(c.file("")); }),
            c.file("config.json") + ": hidden_size is a string, expected an integer");
}

// Attention settings that do not fit together name the one thing wrong (num_attention_heads 7 gave
// "not a multiple of num_key_value_heads 4 or head_dim is odd").
TEST(HfConfig, AttentionLayoutProblemsAreNamed) {
  const std::string odd = " is odd (rotary embeddings rotate pairs of features)";
  const std::pair<std::string, std::string> cases[] = {
      {config_with(config_with(hf_config(), "num_attention_heads", "7"), "head_dim", "null"),
       "hidden_size 64 is not a multiple of num_attention_heads 7 (with no head_dim, each head gets "
       "hidden_size / num_attention_heads features)"},
      {config_with(hf_config(), "num_attention_heads", "7"),
       "num_attention_heads 7 is not a multiple of num_key_value_heads 4"},
      {config_with(hf_config(), "head_dim", "9"), "head_dim 9" + odd},
      {config_with(config_with(hf_config(), "hidden_size", "72"), "head_dim", "null"),
       "head_dim 9 (hidden_size / num_attention_heads)" + odd},
  };
  for (const auto& [config, problem] : cases) EXPECT_EQ(config_refusal(config), problem);
}

// Float hyper-parameters must be finite and positive, and values of the wrong type are errors
// (a string rope_theta fell back to 10000 while a string hidden_size was refused).
TEST(HfConfig, FloatHyperParametersMustBePositiveNumbers) {
  const std::string positive = " (expected a positive number)";
  const std::pair<std::string, std::string> cases[] = {
      {config_with(hf_config(), "rms_norm_eps", "-1e-05"), "rms_norm_eps has an invalid value -1e-05" + positive},
      {config_with(hf_config(), "rope_theta", "0"), "rope_theta has an invalid value 0" + positive},
      {config_with(hf_config(), "rope_theta", "\"abc\""), "rope_theta is a string, expected a number"},
      {config_with(hf_config(), "model_type",
            "\"llama\", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 0}"),
       "rope_scaling.factor has an invalid value 0" + positive},
      {config_with(hf_config(), "tie_word_embeddings", "\"true\""),
       "tie_word_embeddings is not true or false"},
  };
  for (const auto& [config, problem] : cases) EXPECT_EQ(config_refusal(config), problem);
}

// Config settings and tensors the engine does not implement are refused instead of ignored.
TEST(HfConfig, UnimplementedSettingsAreRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {config_with(hf_config(), "mlp_bias", "true"),
       "mlp_bias (biases on the MLP projections) is not supported"},
      {config_with(hf_config(), "hidden_act", "\"gelu\""),
       "hidden_act \"gelu\" is not supported (supported: silu)"},
      // An untied head the checkpoint lacks was silently tied to the embedding.
      {config_with(hf_config(), "tie_word_embeddings", "false"),
       "tie_word_embeddings is false or absent but the checkpoint has no lm_head.weight"},
      {config_with(hf_config(), "tie_word_embeddings", "null"),
       "tie_word_embeddings is false or absent but the checkpoint has no lm_head.weight"},
  };
  for (const auto& [config, problem] : cases) EXPECT_EQ(config_refusal(config), problem);
  // HF Llama adds an o_proj bias under attention_bias; the engine has none to add.
  TempDir dir;
  copy_side_files(dir, config_with(hf_config(), "attention_bias", "true"));
  std::vector<RawTensor> all = read_raw(shared_model("stories260K-hf/model.safetensors"));
  all.push_back(f32_tensor("model.layers.3.self_attn.o_proj.bias", {64}, 1.0f));
  write_safetensors(dir.file("model.safetensors"), all);
  EXPECT_EQ(input_error_of([&] { load_model(dir.file("")); }),
            dir.file("config.json") + ": attention_bias with a bias on o_proj "
                                      "(model.layers.3.self_attn.o_proj.bias) is not supported");
}

TEST(LoaderDefault, DefaultModelPathFollowsKvscopeCache) {
  TempDir dir;
  const char* old = getenv("KVSCOPE_CACHE");
  const std::string saved = old ? old : "";
  setenv("KVSCOPE_CACHE", dir.file("").c_str(), 1);
  EXPECT_EQ(default_model_path(), "");
  write_bytes(dir.file("SmolLM2-135M-Instruct.Q4_1.gguf"), "GGUF", 4);
  EXPECT_EQ(default_model_path(), dir.file("SmolLM2-135M-Instruct.Q4_1.gguf"));
  if (old) {
    setenv("KVSCOPE_CACHE", saved.c_str(), 1);
  } else {
    unsetenv("KVSCOPE_CACHE");
  }
}

}  // namespace
}  // namespace kvs
