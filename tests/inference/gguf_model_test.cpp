// GGUF model loading: stories260K.gguf equals the llama2.c .bin bit for bit, the tiny-random F16
// fixture with its Llama-2 vocabulary, a K-quant model (weights as decoded, logits as the naive
// forward pass), the hyper-parameters read and checked (RoPE scaling: llama3's factors, YaRN), and
// bad inputs (unknown tensor type, K-quant rows shorter than a super-block, truncation, magic, a
// block count the layer tensors do not match). Each architecture's layout:
// gguf_architectures_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "gguf_writer.h"
#include "inference/engine.h"
#include "inference/gguf_file.h"
#include "inference/loader.h"
#include "quant_blocks.h"
#include "tiny_model.h"

namespace kvs {
namespace {

using testing::input_error_of;
using testing::read_bytes;
using testing::shared_model;
using testing::TempDir;
using testing::write_bytes;

const std::string kTiny = "fixtures/llama-2-tiny-random.gguf";

TEST(GgufModel, Stories260KMatchesTheLlama2cCheckpoint) {
  const Model bin = load_model(shared_model("stories260K/stories260K.bin"));
  const Model gguf = load_model(shared_model("stories260K/stories260K.gguf"));
  const ModelConfig& a = bin.config;
  const ModelConfig& b = gguf.config;
  EXPECT_EQ(gguf.format, "gguf");
  EXPECT_EQ(gguf.weight_type, "F32");
  EXPECT_EQ(b.rope_style, RopeStyle::Interleaved);
  EXPECT_EQ(
      std::tie(a.dim, a.hidden_dim, a.n_layers, a.n_heads, a.n_kv_heads, a.head_dim, a.vocab_size),
      std::tie(b.dim, b.hidden_dim, b.n_layers, b.n_heads, b.n_kv_heads, b.head_dim, b.vocab_size));
  EXPECT_EQ(b.seq_len, 2048);  // the converter's default, as SOURCES.md notes
  EXPECT_FLOAT_EQ(b.rms_eps, 1e-5f);
  EXPECT_EQ(b.rope_theta, 10000.0f);
  // The .gguf stores the classifier separately; it equals the shared embedding.
  EXPECT_FALSE(b.tied_classifier);
  EXPECT_EQ(gguf.weights.classifier, bin.weights.token_embedding);
  EXPECT_EQ(gguf.weights.token_embedding, bin.weights.token_embedding);
  EXPECT_EQ(gguf.weights.final_norm, bin.weights.final_norm);
  for (int l = 0; l < a.n_layers; ++l) {
    const LayerWeights& x = bin.weights.layers[l];
    const LayerWeights& y = gguf.weights.layers[l];
    EXPECT_EQ(x.attn_norm, y.attn_norm) << l;
    EXPECT_EQ(x.wq, y.wq) << l;
    EXPECT_EQ(x.wk, y.wk) << l;
    EXPECT_EQ(x.wv, y.wv) << l;
    EXPECT_EQ(x.wo, y.wo) << l;
    EXPECT_EQ(x.ffn_norm, y.ffn_norm) << l;
    EXPECT_EQ(x.w_gate, y.w_gate) << l;
    EXPECT_EQ(x.w_up, y.w_up) << l;
    EXPECT_EQ(x.w_down, y.w_down) << l;
  }
}

TEST(GgufModel, Stories260KTokenizerMatchesTok512) {
  const Model gguf = load_model(shared_model("stories260K/stories260K.gguf"));
  const auto from_gguf = load_tokenizer(gguf, "");
  const auto from_bin = load_tokenizer(gguf, shared_model("stories260K/tok512.bin"));
  EXPECT_EQ(from_gguf->kind(), "sentencepiece-bpe");
  for (const std::string t : {"Once upon a time", "The dog's ball was red, and 42 birds sang!",
                              "\xF0\x9F\x90\xB6 emoji \xE2\x9C\xA8", "  spaces\n\nnewlines\t"}) {
    EXPECT_EQ(from_gguf->encode(t, true), from_bin->encode(t, true)) << t;
    EXPECT_EQ(from_gguf->decode(from_gguf->encode(t, true)), t);
  }
  EXPECT_EQ(from_gguf->token_text(13), "\n");      // <0x0A>: the character, as decode gives it
  EXPECT_EQ(from_gguf->token_text(0xE6 + 3), "\\xE6");  // a split 3-byte character's lead byte
}

TEST(GgufModel, TinyRandomF16) {
  const Model m = load_model(shared_model(kTiny));
  EXPECT_EQ(m.config.dim, 8);
  EXPECT_EQ(m.config.n_layers, 1);
  EXPECT_EQ(m.config.n_heads, 2);
  EXPECT_EQ(m.config.n_kv_heads, 2);
  EXPECT_EQ(m.config.hidden_dim, 32);
  EXPECT_EQ(m.config.head_dim, 4);
  EXPECT_EQ(m.config.vocab_size, 32000);
  EXPECT_EQ(m.config.seq_len, 4096);
  EXPECT_EQ(m.config.name, "LLaMA v2");
  EXPECT_EQ(m.weight_type, "F16");
  EXPECT_FALSE(m.config.tied_classifier);
  EXPECT_EQ(m.weights.classifier.size(), 32000u * 8);
  EXPECT_EQ(m.weights.layers[0].w_down.size(), 8u * 32);
  // F16 weights are exact in fp32 and not all zero.
  const WeightVector wq = m.weights.layers[0].wq.unpacked();
  EXPECT_TRUE(std::any_of(wq.begin(), wq.end(), [](float v) { return v != 0.0f; }));
}

TEST(GgufModel, TinyRandomLlama2Vocabulary) {
  const Model m = load_model(shared_model(kTiny));
  const auto tok = load_tokenizer(m, "");
  EXPECT_EQ(tok->vocab_size(), 32000);
  EXPECT_EQ(tok->encode("Hello world", true), (std::vector<int>{1, 15043, 3186}));
  EXPECT_EQ(tok->decode(tok->encode("Hello world", true)), "Hello world");
  EXPECT_EQ(tok->token_text(15043), " Hello");
  EXPECT_EQ(tok->token_text(13), "\n");      // <0x0A>: the character, as decode gives it
  EXPECT_EQ(tok->token_text(0xC3 + 3), "\\xC3");  // half of a 2-byte character
  // Control tokens are matched inside the text.
  EXPECT_EQ(tok->encode("Hi</s>", false).back(), 2);
}

// Offset of the uint32 type field in the tensor info of `name` (2-D tensors).
std::size_t type_field_offset(const std::vector<char>& bytes, const std::string& name) {
  const std::string needle =
      std::string(1, static_cast<char>(name.size())) + std::string(7, '\0') + name;
  auto it = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(it, bytes.end());
  return static_cast<std::size_t>(it - bytes.begin()) + needle.size() + 4 + 2 * 8;
}

TEST(GgufModel, UnknownTensorTypeIsNamed) {
  TempDir dir;
  std::vector<char> bytes = read_bytes(shared_model(kTiny));
  const uint32_t q8_k = 15;  // ggml's intermediate type, never used for weights
  std::memcpy(bytes.data() + type_field_offset(bytes, "blk.0.attn_q.weight"), &q8_k, 4);
  const std::string path = dir.file("patched.gguf");
  write_bytes(path, bytes);
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": tensor blk.0.attn_q.weight has unsupported type 15 (Q8_K)");
}

TEST(GgufModel, KQuantRowsShorterThanASuperBlockAreNamed) {
  TempDir dir;
  std::vector<char> bytes = read_bytes(shared_model(kTiny));
  const uint32_t q4_k = kGgmlQ4_K;  // the fixture's rows have 8 weights, K-quants need 256
  std::memcpy(bytes.data() + type_field_offset(bytes, "blk.0.attn_q.weight"), &q4_k, 4);
  const std::string path = dir.file("short-rows.gguf");
  write_bytes(path, bytes);
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": tensor blk.0.attn_q.weight has rows of 8 weights, not a multiple of the "
                   "Q4_K block of 256 weights");
}

TEST(GgufModel, TruncatedFileIsNamed) {
  TempDir dir;
  std::vector<char> bytes = read_bytes(shared_model(kTiny));
  // Data starts at 724416; blk.0.attn_q.weight occupies [+512000, +512128).
  bytes.resize(724416 + 512064);
  const std::string path = dir.file("cut.gguf");
  write_bytes(path, bytes);
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": truncated file (tensor blk.0.attn_q.weight ends past 1236480 bytes)");
  bytes.resize(600000);  // inside the token type array
  write_bytes(path, bytes);
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": truncated file (metadata tokenizer.ggml.token_type ends past 600000 bytes)");
  bytes.resize(5000);  // inside the vocabulary array
  write_bytes(path, bytes);
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": truncated file (metadata tokenizer.ggml.tokens ends past 5000 bytes)");
  bytes.resize(10);  // the magic, then the header cut
  write_bytes(path, bytes);
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": truncated file (10 bytes, shorter than the 24-byte GGUF header)");
}

TEST(GgufModel, MalformedHeaders) {
  TempDir dir;
  std::vector<char> bytes = read_bytes(shared_model(kTiny));
  const std::string path = dir.file("v9.gguf");
  bytes[4] = 9;  // version 9
  write_bytes(path, bytes);
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": unsupported GGUF version 9 (need 2 or 3)");

  bytes = read_bytes(shared_model(kTiny));
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(bytes.data() + 16, &huge, 8);  // n_kv
  write_bytes(path, bytes);
  EXPECT_NE(input_error_of([&] { load_model(path); }).find("truncated file (header claims"),
            std::string::npos);
}

TEST(GgufModel, ShapeAndArchitectureChecks) {
  TempDir dir;
  testing::GgufWriter w;
  w.add_string("general.architecture", "gptneox");
  const std::string path = dir.file("arch.gguf");
  w.write(path);
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": unsupported architecture \"gptneox\" (supported: llama, qwen2, qwen3, phi3, gemma2, gemma3, olmo2, granite, smollm3, "
                   "exaone4)");

  testing::GgufWriter v;
  v.add_string("general.architecture", "llama");
  v.add_u32("llama.embedding_length", 4);
  v.add_u32("llama.feed_forward_length", 8);
  v.add_u32("llama.block_count", 1);
  v.add_u32("llama.attention.head_count", 2);
  v.add_f32_tensor("token_embd.weight", {4, 3}, std::vector<float>(12, 0.5f));
  v.add_f32_tensor("blk.0.attn_norm.weight", {4}, std::vector<float>(4, 1.0f));
  v.add_f32_tensor("blk.0.attn_q.weight", {4, 5}, std::vector<float>(20, 1.0f));
  const std::string shape_path = dir.file("shape.gguf");
  v.write(shape_path);
  EXPECT_EQ(input_error_of([&] { load_model(shape_path); }),
            shape_path + ": tensor blk.0.attn_q.weight has shape [4, 5], expected [4, 4]");
}


// Writes dir/`name`: testing::tiny_llama_writer(layers, omit), then what `extra` adds.
std::string write_llama(const TempDir& dir, const std::string& name, int layers,
                        const std::set<std::string>& omit = {},
                        const std::function<void(testing::GgufWriter&)>& extra = {}) {
  testing::GgufWriter w = testing::tiny_llama_writer(layers, omit);
  if (extra) extra(w);
  const std::string path = dir.file(name);
  w.write(path);
  return path;
}

// The layer count must match the blk.N tensors present, and is checked before anything is sized
// from it (a count of 2^24 used to allocate 4.7 GB of empty layers first; counts above 2^16 are
// now refused as read).
TEST(GgufModel, BlockCountMustMatchTheLayerTensors) {
  TempDir dir;
  const auto with_count = [&](uint32_t count) {
    return write_llama(dir, "layers.gguf", 2, {"llama.block_count"},
                       [&](testing::GgufWriter& w) { w.add_u32("llama.block_count", count); });
  };
  std::string path = with_count(65536);  // the bound on any layer count
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": llama.block_count 65536 does not match the checkpoint, which holds "
                   "tensors for 2 layers (blk.0.* to blk.1.*)");
  path = with_count(1);  // a layer beyond the count would be silently dropped
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path + ": llama.block_count 1 does not match the checkpoint, which holds tensors "
                   "for 2 layers (blk.0.* to blk.1.*)");
  EXPECT_EQ(load_model(with_count(2)).weights.layers.size(), 2u);
}

// End-of-turn and end-of-message tokens end a text too (llama.cpp stops there; a Llama-3 Instruct
// file's EOS is <|end_of_text|>, its turns end with <|eot_id|>); 0xFFFFFFFF, as converters write
// "none", is none.
TEST(GgufModel, EndOfTurnTokensEndTheText) {
  TempDir dir;
  const std::string path = write_llama(dir, "eot.gguf", 1, {}, [](testing::GgufWriter& w) {
    w.add_u32("tokenizer.ggml.eot_token_id", 2);
    w.add_u32("tokenizer.ggml.eom_token_id", 0xFFFFFFFFu);
  });
  EXPECT_EQ(load_model(path).config.end_ids, (std::vector<int>{2}));
  const std::string none = write_llama(dir, "none.gguf", 1, {}, [](testing::GgufWriter&) {});
  EXPECT_TRUE(load_model(none).config.end_ids.empty());
}

// Integer hyper-parameters are range-checked as read, before narrowing to int (a context_length
// of 2^32 + 16 became 16), and n_heads * head_dim in 64 bits (8 heads of key_length 2^30 + 8
// wrapped to a q width of 64 and passed every shape check).
TEST(GgufModel, IntegerHyperParametersAreRangeChecked) {
  TempDir dir;
  const auto load_with = [&](const std::function<void(testing::GgufWriter&)>& meta,
                             const std::set<std::string>& omit = {}) {
    const std::string path = write_llama(dir, "ints.gguf", 1, omit, meta);
    return input_error_of([&] { load_model(path); });
  };
  const std::string path = dir.file("ints.gguf");
  EXPECT_EQ(load_with([](auto& w) { w.add_u64("llama.context_length", (uint64_t{1} << 32) + 16); }),
            path + ": llama.context_length has an invalid value 4294967312 (expected 1 to 16777216)");
  EXPECT_EQ(load_with([](auto& w) { w.add_u32("llama.attention.key_length", 1073741832); }),
            path + ": llama.attention.key_length has an invalid value 1073741832 (expected 1 to "
                   "1048576)");
  EXPECT_EQ(load_with([](auto& w) {
              w.add_u32("llama.attention.head_count", 65536);
              w.add_u32("llama.attention.key_length", 32);
            }, {"llama.attention.head_count"}),
            path + ": 65536 heads of head_dim 32 make 2097152 query features, more than the "
                   "1048576 supported");
  EXPECT_EQ(load_with([](auto& w) { w.add_string("llama.embedding_length", "16"); },
                      {"llama.embedding_length"}),
            path + ": llama.embedding_length is a string, expected an integer");
  EXPECT_EQ(load_with([](auto& w) { w.add_f32("llama.embedding_length", 16.0f); }, {"llama.embedding_length"}),
            path + ": llama.embedding_length is a float32, expected an integer");
}

// Attention metadata that does not fit together names the one thing wrong (it was "inconsistent
// attention metadata (7 heads, 7 KV heads, head_dim 2)" for each).
TEST(GgufModel, AttentionLayoutProblemsAreNamed) {
  TempDir dir;
  const auto load_with = [&](const std::function<void(testing::GgufWriter&)>& meta) {
    const std::string path = write_llama(dir, "heads.gguf", 1, {"llama.attention.head_count"}, meta);
    return input_error_of([&] { load_model(path); });
  };
  const std::string path = dir.file("heads.gguf");
  EXPECT_EQ(load_with([](auto& w) { w.add_u32("llama.attention.head_count", 7); }),
            path + ": llama.embedding_length 16 is not a multiple of llama.attention.head_count 7 (with no "
                   "llama.attention.key_length, each head gets llama.embedding_length / "
                   "llama.attention.head_count features)");
  EXPECT_EQ(load_with([](auto& w) {
              w.add_u32("llama.attention.head_count", 4);
              w.add_u32("llama.attention.head_count_kv", 3);
            }),
            path + ": llama.attention.head_count 4 is not a multiple of llama.attention.head_count_kv 3");
  EXPECT_EQ(load_with([](auto& w) {
              w.add_u32("llama.attention.head_count", 2);
              w.add_u32("llama.attention.key_length", 5);
            }),
            path + ": llama.attention.key_length 5 is odd (rotary embeddings rotate pairs of features)");
  EXPECT_EQ(load_with([](auto& w) { w.add_u32("llama.attention.head_count", 16); }),
            path + ": llama.attention.key_length 1 (llama.embedding_length / llama.attention.head_count) is "
                   "odd (rotary embeddings rotate pairs of features)");
}

// Float hyper-parameters must be finite and positive, and numbers: theta 0 or NaN, a negative eps
// or a linear scaling factor of 0 gave NaN traces, and a string eps fell back to the default.
TEST(GgufModel, FloatHyperParametersMustBePositiveNumbers) {
  TempDir dir;
  const auto load_with = [&](const std::function<void(testing::GgufWriter&)>& meta) {
    const std::string path = write_llama(dir, "floats.gguf", 1, {}, meta);
    return input_error_of([&] { load_model(path); });
  };
  const std::string path = dir.file("floats.gguf");
  EXPECT_EQ(load_with([](auto& w) { w.add_f32("llama.rope.freq_base", 0.0f); }),
            path + ": llama.rope.freq_base has an invalid value 0 (expected a positive number)");
  EXPECT_EQ(load_with([](auto& w) { w.add_f32("llama.rope.freq_base", std::nanf("")); }),
            path + ": llama.rope.freq_base has an invalid value nan (expected a positive number)");
  EXPECT_EQ(load_with([](auto& w) { w.add_f32("llama.attention.layer_norm_rms_epsilon", -1e-5f); }),
            path + ": llama.attention.layer_norm_rms_epsilon has an invalid value -1e-05 (expected "
                   "a positive number)");
  EXPECT_EQ(load_with([](auto& w) { w.add_string("llama.attention.layer_norm_rms_epsilon", "1e-5"); }),
            path + ": llama.attention.layer_norm_rms_epsilon is a string, expected a number");
  EXPECT_EQ(load_with([](auto& w) {
              w.add_string("llama.rope.scaling.type", "linear");
              w.add_f32("llama.rope.scaling.factor", 0.0f);
            }),
            path + ": llama.rope.scaling.factor has an invalid value 0 (expected a positive number)");
}

// YaRN with only what every converter writes (type, factor, original context): betas 32 and 1
// and the attention factor 0.1 ln(factor) + 1, times rope.scaling.attn_factor where given (as
// llama.cpp multiplies it in); the original context is the model's where absent. DeepSeek's
// log multiplier and a partial blend are refused.
TEST(GgufModel, YarnDefaultsAndRefusals) {
  TempDir dir;
  const auto yarn = [](const std::function<void(testing::GgufWriter&)>& more) {
    return [more](testing::GgufWriter& w) {
      w.add_string("llama.rope.scaling.type", "yarn");
      w.add_f32("llama.rope.scaling.factor", 4.0f);
      if (more) more(w);
    };
  };
  const Model plain = load_model(write_llama(dir, "yarn.gguf", 1, {}, yarn([](testing::GgufWriter& w) {
    w.add_u32("llama.rope.scaling.original_context_length", 32);
  })));
  const RopeScaling& r = plain.config.rope_scaling;
  EXPECT_EQ(r.type, "yarn");
  EXPECT_EQ(r.original_max_position, 32);
  EXPECT_EQ(r.beta_fast, 32.0f);
  EXPECT_EQ(r.beta_slow, 1.0f);
  EXPECT_FLOAT_EQ(r.attention_factor, 0.1f * std::log(4.0f) + 1.0f);
  const Model scaled = load_model(write_llama(dir, "yarn.gguf", 1, {}, yarn([](testing::GgufWriter& w) {
    w.add_f32("llama.rope.scaling.attn_factor", 0.5f);
  })));
  EXPECT_EQ(scaled.config.rope_scaling.original_max_position, scaled.config.seq_len);
  EXPECT_FLOAT_EQ(scaled.config.rope_scaling.attention_factor, 0.5f * (0.1f * std::log(4.0f) + 1.0f));
  const Model blend = load_model(write_llama(dir, "yarn.gguf", 1, {}, yarn([](testing::GgufWriter& w) {
    w.add_f32("llama.rope.scaling.yarn_ext_factor", 1.0f);
  })));
  EXPECT_EQ(blend.config.rope_scaling.type, "yarn");

  const std::string path = dir.file("yarn.gguf");
  const auto refusal = [&](const std::function<void(testing::GgufWriter&)>& more) {
    write_llama(dir, "yarn.gguf", 1, {}, yarn(more));
    return input_error_of([&] { load_model(path); });
  };
  EXPECT_EQ(refusal([](testing::GgufWriter& w) { w.add_f32("llama.rope.scaling.yarn_log_multiplier", 0.1f); }),
            path + ": llama.rope.scaling.yarn_log_multiplier (DeepSeek's YaRN) is not supported");
  EXPECT_EQ(refusal([](testing::GgufWriter& w) { w.add_f32("llama.rope.scaling.yarn_ext_factor", 0.5f); }),
            path + ": llama.rope.scaling.yarn_ext_factor other than 1 is not supported");
  EXPECT_EQ(refusal([](testing::GgufWriter& w) { w.add_f32("llama.rope.scaling.yarn_beta_fast", -1.0f); }),
            path + ": llama.rope.scaling.yarn_beta_fast has an invalid value -1 (expected a positive number)");
}

// RoPE settings the engine does not implement are refused: they were silently ignored.
TEST(GgufModel, UnsupportedRopeSettingsAreRefused) {
  TempDir dir;
  const auto load_with = [&](const std::function<void(testing::GgufWriter&)>& meta) {
    const std::string path = write_llama(dir, "rope.gguf", 1, {}, meta);
    return input_error_of([&] { load_model(path); });
  };
  const std::string path = dir.file("rope.gguf");
  EXPECT_EQ(load_with([](auto& w) {
              w.add_string("llama.rope.scaling.type", "longrope");
              w.add_f32("llama.rope.scaling.factor", 4.0f);
            }),
            path + ": unsupported llama.rope.scaling.type \"longrope\" (supported: none, linear, yarn)");
  EXPECT_EQ(load_with([](auto& w) { w.add_u32("llama.rope.dimension_count", 8); }),
            path + ": llama.rope.dimension_count 8 differs from head_dim 16 (partial rotary "
                   "embeddings are phi3's only)");
  const Model m = load_model(write_llama(dir, "rope.gguf", 1, {}, [](auto& w) {
    w.add_string("llama.rope.scaling.type", "none");
    w.add_u32("llama.rope.dimension_count", 16);
  }));
  EXPECT_EQ(m.config.rope_scaling.type, "");
}

// A one-layer llama GGUF (see write_llama) with theta 500000 and the given rope_freqs.weight
// divisors.
std::string write_rope_freqs_model(const TempDir& dir, const std::vector<float>& divisors) {
  return write_llama(dir, "rope.gguf", 1, {}, [&](testing::GgufWriter& w) {
    w.add_f32("llama.rope.freq_base", 500000.0f);
    w.add_f32_tensor("rope_freqs.weight", {8}, divisors);
  });
}

TEST(GgufModel, Llama3RopeFreqsBecomeRopeScaling) {
  // Divisors of Llama-3.1's scaling (factor 8, low 1, high 4, original context 8192) for
  // head_dim 16, theta 500000: the wavelength 2*pi*500000^(i/8) is below 2048 for i <= 3 (divisor
  // 1), 4442.9 for i = 4 (smoothed: 1 / ((1 - s)/8 + s) with s = (8192/4442.9 - 1)/3), and above
  // 8192 for i >= 5 (divisor 8).
  std::vector<float> divisors(8);
  for (int i = 0; i < 8; ++i) {
    const double wavelen = 2 * M_PI * std::pow(500000.0, i / 8.0);
    double d = 1.0;
    if (wavelen > 8192) {
      d = 8.0;
    } else if (wavelen >= 2048) {
      const double smooth = (8192 / wavelen - 1) / 3;
      d = 1 / ((1 - smooth) / 8 + smooth);
    }
    divisors[i] = static_cast<float>(d);
  }
  TempDir dir;
  const Model m = load_model(write_rope_freqs_model(dir, divisors));
  EXPECT_EQ(m.config.rope_scaling.type, "llama3");
  EXPECT_EQ(m.config.rope_scaling.factor, 8.0f);
  EXPECT_EQ(m.config.rope_scaling.original_max_position, 8192);
  EXPECT_EQ(m.config.head_dim, 16);
  divisors[7] = 5.0f;  // no standard factor gives this
  const std::string path = write_rope_freqs_model(dir, divisors);
  EXPECT_EQ(input_error_of([&] { load_model(path); }),
            path +
                ": rope_freqs.weight does not match llama3 rope scaling with factor 8, 16 or 32 "
                "(low 1, high 4, original context 8192)");
}

struct BlockTensor {
  std::string name, type;  // a format of testing::mixed_formats()
  uint64_t ne0, ne1;
};

// A one-layer llama (dim D, 4 heads, 2 KV heads, hidden H, vocab 16) whose 2-D weights are random
// blocks of the given formats with small fp16 factors (below 2^-11): the loaded fp32 weights are
// the decoders' output, the storage type is `weight_type`, and the engine's logits match the
// naive forward pass.
void check_block_model(uint64_t D, uint64_t H, const std::vector<BlockTensor>& tensors,
                       const std::string& weight_type) {
  const uint64_t V = 16;
  std::map<std::string, const testing::BlockFormat*> format;
  for (const testing::BlockFormat& f : testing::mixed_formats()) format[f.name] = &f;
  std::mt19937 rng(11);
  testing::GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.embedding_length", static_cast<uint32_t>(D));
  w.add_u32("llama.feed_forward_length", static_cast<uint32_t>(H));
  w.add_u32("llama.block_count", 1);
  w.add_u32("llama.attention.head_count", 4);
  w.add_u32("llama.attention.head_count_kv", 2);
  std::map<std::string, std::vector<uint8_t>> data;  // tensor name -> its blocks
  for (const BlockTensor& t : tensors) {
    const testing::BlockFormat& f = *format.at(t.type);
    data[t.name] = testing::random_blocks(f, t.ne0 * t.ne1 / f.weights, rng, 3);
    w.add_tensor(t.name, {t.ne0, t.ne1}, f.type, data[t.name]);
  }
  for (const char* norm : {"output_norm.weight", "blk.0.attn_norm.weight", "blk.0.ffn_norm.weight"})
    w.add_f32_tensor(norm, {D}, std::vector<float>(D, 1.0f));
  TempDir dir;
  const std::string path = dir.file("blocks.gguf");
  w.write(path);

  const Model m = load_model(path);
  EXPECT_EQ(m.weight_type, weight_type);
  const LayerWeights& l = m.weights.layers[0];
  const std::map<std::string, const PackedMatrix*> loaded = {
      {"token_embd.weight", &m.weights.token_embedding},
      {"output.weight", &m.weights.classifier},
      {"blk.0.attn_q.weight", &l.wq},
      {"blk.0.attn_k.weight", &l.wk},
      {"blk.0.attn_v.weight", &l.wv},
      {"blk.0.attn_output.weight", &l.wo},
      {"blk.0.ffn_gate.weight", &l.w_gate},
      {"blk.0.ffn_up.weight", &l.w_up},
      {"blk.0.ffn_down.weight", &l.w_down}};
  for (const BlockTensor& t : tensors) {
    std::vector<float> expect(t.ne0 * t.ne1);
    format.at(t.type)->dequantize(data[t.name].data(), expect.data(), expect.size());
    const WeightVector got = loaded.at(t.name)->unpacked();
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expect.begin(), expect.end())) << t.name;
  }

  const std::vector<int> tokens = {1, 5, 9, 3, 14, 7};
  Engine e(m);
  const std::span<const float> logits = e.prefill(tokens);
  const tiny::Reference ref = tiny::reference_forward(m, tokens);
  ASSERT_EQ(logits.size(), V);
  double largest = 0.0;
  for (uint64_t i = 0; i < V; ++i) largest = std::max(largest, std::fabs(ref.logits[5 * V + i]));
  ASSERT_GT(largest, 0.0);
  for (uint64_t i = 0; i < V; ++i) {
    ASSERT_TRUE(std::isfinite(logits[i])) << i;
    EXPECT_NEAR(logits[i], ref.logits[5 * V + i], 1e-4 * largest) << i;
  }
}

// Dim 256, heads of 64: every K-quant.
TEST(GgufModel, KQuantModelLoadsAndRuns) {
  const uint64_t D = 256, H = 256, KV = 128, V = 16;
  check_block_model(D, H,
                    {{"token_embd.weight", "Q6_K", D, V},      {"output.weight", "Q4_K", D, V},
                     {"blk.0.attn_q.weight", "Q4_K", D, D},    {"blk.0.attn_k.weight", "Q5_K", D, KV},
                     {"blk.0.attn_v.weight", "Q3_K", D, KV},   {"blk.0.attn_output.weight", "Q2_K", D, D},
                     {"blk.0.ffn_gate.weight", "Q4_K", D, H},  {"blk.0.ffn_up.weight", "Q5_K", D, H},
                     {"blk.0.ffn_down.weight", "Q6_K", H, D}},
                    "Q4_K (mixed)");
}

// Dim 96 (heads of 24), hidden 256: as llama.cpp writes a K-quant file of such a model (SmolLM2's
// 576 is not a multiple of 256 either), the tensors with rows of 96 weights fall back to the
// 32-weight formats and only ffn_down, with rows of 256, is a super-block format.
TEST(GgufModel, KQuantFileOfANarrowModelLoadsItsFallbackFormats) {
  const uint64_t D = 96, H = 256, KV = 48, V = 16;
  check_block_model(D, H,
                    {{"token_embd.weight", "Q5_0", D, V},      {"output.weight", "IQ4_NL", D, V},
                     {"blk.0.attn_q.weight", "Q5_0", D, D},    {"blk.0.attn_k.weight", "Q5_1", D, KV},
                     {"blk.0.attn_v.weight", "IQ4_NL", D, KV}, {"blk.0.attn_output.weight", "Q5_0", D, D},
                     {"blk.0.ffn_gate.weight", "Q5_0", D, H},  {"blk.0.ffn_up.weight", "Q5_1", D, H},
                     {"blk.0.ffn_down.weight", "IQ4_XS", H, D}},
                    "Q5_0 (mixed)");
}

}  // namespace
}  // namespace kvs
