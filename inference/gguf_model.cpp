// GGUF -> Model. GGUF dims are [ne0 = in, ne1 = out], stored row-major as out x in, which is the
// Model's layout. llama.cpp's converter permutes llama q/k into interleaved-pair RoPE order;
// qwen2, qwen3, phi3, gemma2 and gemma3 keep Hugging Face's rotate-half order.
#include "inference/gguf_model.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "inference/errors.h"
#include "inference/gguf_file.h"
#include "inference/model_checks.h"
#include "kernels/rope.h"

namespace kvs {
namespace {

// The quantized-panel format of a GGML tensor type (kernels/quant_panels.h), none where it is
// packed in fp32.
std::optional<ops::QuantFormat> quant_format(uint32_t type) {
  switch (type) {
    case kGgmlQ8_0: return ops::QuantFormat::Q8_0;
    case kGgmlQ4_0: return ops::QuantFormat::Q4_0;
    case kGgmlQ4_1: return ops::QuantFormat::Q4_1;
    case kGgmlQ5_0: return ops::QuantFormat::Q5_0;
    case kGgmlQ5_1: return ops::QuantFormat::Q5_1;
    case kGgmlQ4_K: return ops::QuantFormat::Q4_K;
    case kGgmlQ5_K: return ops::QuantFormat::Q5_K;
    case kGgmlQ2_K: return ops::QuantFormat::Q2_K;
    case kGgmlQ3_K: return ops::QuantFormat::Q3_K;
    case kGgmlQ6_K: return ops::QuantFormat::Q6_K;
    case kGgmlIQ4_NL: return ops::QuantFormat::IQ4_NL;
    case kGgmlIQ4_XS: return ops::QuantFormat::IQ4_XS;
    case kGgmlF16: return ops::QuantFormat::F16;
    case kGgmlBF16: return ops::QuantFormat::BF16;
    default: return std::nullopt;
  }
}

class TensorSource {
 public:
  explicit TensorSource(const GgufFile& g) : g_(g) {}

  const GgufTensorInfo& info(const std::string& name) const {
    const GgufTensorInfo* t = g_.find_tensor(name);
    if (t == nullptr) throw input_error(g_.path(), "missing tensor " + name);
    return *t;
  }

  // Checks that `name` has shape [ne0, ne1] (ne1 = 0 for a vector), sizes `dst` for it and
  // queues its conversion for finish().
  void read(WeightVector& dst, const std::string& name, uint64_t ne0, uint64_t ne1 = 0) {
    pending_.push_back({&checked(name, ne0, ne1), &dst});
  }
  // The same for a matrix [ne1 rows, ne0 cols], converted and packed by finish(); kept in its
  // quantized form where kernels/quant_panels.h reads it.
  void read(PackedMatrix& dst, const std::string& name, uint64_t ne0, uint64_t ne1) {
    const GgufTensorInfo* t = &checked(name, ne0, ne1);
    auto fill = [this, t](float* rows_major) { g_.read_f32_into({{t, rows_major}}); };
    if (const auto format = quant_format(t->type))
      packs_.add_quantized(dst, static_cast<int>(ne1), static_cast<int>(ne0), *format, g_.raw(*t), fill);
    else
      packs_.add(dst, static_cast<int>(ne1), static_cast<int>(ne0), fill);
  }
  // Matrices stored stacked by rows in the tensor `name` [ne0 cols, sum of the parts' rows]
  // (phi3's attn_qkv, ffn_up): the tensor converted once, each part packed from its rows by
  // finish(), kept in its quantized form as read() keeps a matrix.
  void read_stacked(const std::string& name, std::vector<PackQueue::Part> parts, uint64_t ne0) {
    uint64_t rows = 0;
    for (const PackQueue::Part& p : parts) rows += static_cast<uint64_t>(p.rows);
    const GgufTensorInfo* t = &checked(name, ne0, rows);
    const auto format = quant_format(t->type);
    packs_.add_stacked(std::move(parts), static_cast<int>(ne0),
                       [this, t](float* rows_major) { g_.read_f32_into({{t, rows_major}}); }, format,
                       format ? g_.raw(*t) : nullptr);
  }
  // Sizes and converts every queued tensor, then packs the matrices. The buffers are sized in
  // parallel so that their pages are first touched (zeroed) by several threads.
  void finish() {
    const int64_t n = static_cast<int64_t>(pending_.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 8)
    for (int64_t i = 0; i < n; ++i) pending_[i].dst->resize(pending_[i].tensor->elements());
    std::vector<GgufFile::Read> reads;
    for (const Pending& p : pending_) reads.push_back({p.tensor, p.dst->data()});
    g_.read_f32_into(reads);
    pending_.clear();
    packs_.pack(g_.path());
  }

  // The tensor `name`, checked to have shape [ne0, ne1] (ne1 = 0 for a vector).
  const GgufTensorInfo& checked(const std::string& name, uint64_t ne0, uint64_t ne1) const {
    const GgufTensorInfo& t = info(name);
    std::vector<uint64_t> want = {ne0};
    if (ne1 > 0) want.push_back(ne1);
    if (t.dims != want)
      throw input_error(g_.path(), "tensor " + name + " has shape " + shape(t.dims) +
                                       ", expected " + shape(want));
    return t;
  }

  static std::string shape(const std::vector<uint64_t>& dims) {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }

 private:
  const GgufFile& g_;
  struct Pending {
    const GgufTensorInfo* tensor;
    WeightVector* dst;
  };
  std::vector<Pending> pending_;
  PackQueue packs_;
};

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::UInt8: case GgufType::Int8: case GgufType::UInt16: case GgufType::Int16:
    case GgufType::UInt32: case GgufType::Int32: case GgufType::UInt64: case GgufType::Int64:
      return true;
    default:
      return false;
  }
}

// "a string", "a float32", ...: how errors name a metadata value of the wrong type.
std::string type_phrase(GgufType type) {
  switch (type) {
    case GgufType::UInt8: return "a uint8";
    case GgufType::Int8: return "an int8";
    case GgufType::UInt16: return "a uint16";
    case GgufType::Int16: return "an int16";
    case GgufType::UInt32: return "a uint32";
    case GgufType::Int32: return "an int32";
    case GgufType::Float32: return "a float32";
    case GgufType::Bool: return "a bool";
    case GgufType::String: return "a string";
    case GgufType::Array: return "an array";
    case GgufType::UInt64: return "a uint64";
    case GgufType::Int64: return "an int64";
    case GgufType::Float64: return "a float64";
  }
  return "of type " + std::to_string(static_cast<uint32_t>(type));
}

// Integer metadata `key` in [1, max], or `fallback` when absent (-1: the key is required). 64-bit
// values are range-checked before they are narrowed.
int int_param(const GgufFile& g, const std::string& key, int64_t fallback, int64_t max) {
  const GgufValue* v = g.find(key);
  if (v == nullptr) {
    if (fallback < 0) throw input_error(g.path(), "missing metadata " + key);
    return static_cast<int>(fallback);
  }
  if (!is_integer(v->type)) throw input_error(g.path(), key + " is " + type_phrase(v->type) + ", expected an integer");
  if (v->integer < 1 || v->integer > max) {
    const std::string value = v->type == GgufType::UInt64
                                  ? std::to_string(static_cast<uint64_t>(v->integer))
                                  : std::to_string(v->integer);
    throw input_error(g.path(), key + " has an invalid value " + value + " (expected 1 to " +
                                    std::to_string(max) + ")");
  }
  return static_cast<int>(v->integer);
}

// Numeric metadata `key` as a finite float > 0, or `fallback` when absent.
float positive_float(const GgufFile& g, const std::string& key, float fallback) {
  const GgufValue* v = g.find(key);
  if (v == nullptr) return fallback;
  if (!is_integer(v->type) && v->type != GgufType::Float32 && v->type != GgufType::Float64)
    throw input_error(g.path(), key + " is " + type_phrase(v->type) + ", expected a number");
  const float x = static_cast<float>(v->number);
  if (!std::isfinite(x) || x <= 0.0f) {
    char value[32];
    std::snprintf(value, sizeof value, "%g", v->number);
    throw input_error(g.path(), key + " has an invalid value " + value +
                                    " (expected a positive number)");
  }
  return x;
}

// Storage type of the 2-D tensors: the type holding most weights, "(mixed)" when others occur.
std::string describe_weight_type(const GgufFile& g) {
  std::map<uint32_t, uint64_t> elements;  // type -> weights of 2-D tensors
  for (const GgufTensorInfo& t : g.tensors()) {
    if (t.dims.size() >= 2) elements[t.type] += t.elements();
  }
  uint32_t main = kGgmlF32;
  uint64_t most = 0;
  for (const auto& [type, n] : elements) {
    if (n > most) main = type, most = n;
  }
  return ggml_type_name(main) + (elements.size() > 1 ? " (mixed)" : "");
}

// Llama-3.1+ GGUFs keep HF's "llama3" rope scaling as per-frequency divisors (rope_freqs.weight,
// [head_dim/2]), computed by the converter from factor / low / high / original context. Finds the
// standard parameters (low 1, high 4, original 8192; factor 8, 16 or 32) that reproduce them.
RopeScaling llama3_scaling(const std::string& path, const WeightVector& divisors,
                           const ModelConfig& c) {
  for (const float factor : {8.0f, 16.0f, 32.0f}) {
    RopeScaling r;
    r.type = "llama3";
    r.factor = factor;
    const double low_wavelen = r.original_max_position / r.low_freq_factor;
    const double high_wavelen = r.original_max_position / r.high_freq_factor;
    bool match = true;
    for (std::size_t i = 0; i < divisors.size() && match; ++i) {
      const double freq = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.head_dim);
      const double wavelen = 2.0 * M_PI / freq;
      double divisor = 1.0;
      if (wavelen > low_wavelen) {
        divisor = factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (r.original_max_position / wavelen - r.low_freq_factor) /
                              (r.high_freq_factor - r.low_freq_factor);
        divisor = 1.0 / ((1.0 - smooth) / factor + smooth);
      }
      match = std::fabs(divisors[i] - divisor) <= 1e-3 * divisor;
    }
    if (match) return r;
  }
  throw input_error(path,
                    "rope_freqs.weight does not match llama3 rope scaling with factor 8, 16 "
                    "or 32 (low 1, high 4, original context 8192)");
}

// YaRN as llama.cpp's converter writes transformers' rope_scaling: the factor, the original
// context (the model's where absent, as llama.cpp), the betas where the converter copied them (32
// and 1 otherwise) and the attention factor: transformers' (yarn_attn_factor) where copied, else
// 0.1 ln(factor) + 1, times rope.scaling.attn_factor as llama.cpp multiplies it in. What llama.cpp
// reads for DeepSeek's YaRN (yarn_log_multiplier) and a partial blend (yarn_ext_factor other than
// 1) is refused: transformers' YaRN has neither.
RopeScaling read_yarn(const GgufFile& g, const std::string& k, int seq_len, const std::string& path) {
  RopeScaling r;
  r.type = "yarn";
  r.factor = positive_float(g, k + "rope.scaling.factor", 1.0f);
  r.original_max_position = int_param(g, k + "rope.scaling.original_context_length", seq_len, kMaxContext);
  r.beta_fast = positive_float(g, k + "rope.scaling.yarn_beta_fast", 32.0f);
  r.beta_slow = positive_float(g, k + "rope.scaling.yarn_beta_slow", 1.0f);
  r.attention_factor = positive_float(g, k + "rope.scaling.yarn_attn_factor", ops::yarn_mscale(r.factor)) *
                       positive_float(g, k + "rope.scaling.attn_factor", 1.0f);
  if (g.find(k + "rope.scaling.yarn_log_multiplier") != nullptr)
    throw input_error(path, k + "rope.scaling.yarn_log_multiplier (DeepSeek's YaRN) is not supported");
  if (g.find(k + "rope.scaling.yarn_ext_factor") != nullptr &&
      positive_float(g, k + "rope.scaling.yarn_ext_factor", 1.0f) != 1.0f)
    throw input_error(path, k + "rope.scaling.yarn_ext_factor other than 1 is not supported");
  return r;
}

// EXAONE 4's hybrid attention, as the converter writes it and llama.cpp runs it: with
// attention.sliding_window, the local layers attention.sliding_window_pattern marks (one flag a
// layer), else all but every 4th (transformers' default); the 32B's 64 layers are hybrid with a
// window of 4096 in files written before the converter wrote either key. Local layers rotate as the
// global ones would (their scaling too), global layers not at all. Without a window every layer
// is global and rotates.
void read_exaone4_layers(const GgufFile& g, const std::string& k, ModelConfig& c) {
  const bool windowed = g.find(k + "attention.sliding_window") != nullptr;
  if (!windowed && c.n_layers != 64) return;
  c.sliding_window = int_param(g, k + "attention.sliding_window", 4096, kMaxContext);
  c.local_rope_as_global = true;
  const std::string key = k + "attention.sliding_window_pattern";
  if (const GgufValue* pattern = g.find(key)) {
    if (pattern->type != GgufType::Array || pattern->element_type != GgufType::Bool ||
        pattern->numbers.size() != static_cast<std::size_t>(c.n_layers))
      throw input_error(g.path(), key + " is not " + std::to_string(c.n_layers) + " flags (one a layer)");
    c.local_layers.assign(pattern->numbers.begin(), pattern->numbers.end());
  } else {
    c.local_layers = local_but_every(c.n_layers, 4);
  }
  c.nope_layers.assign(c.n_layers, 0);
  for (int l = 0; l < c.n_layers; ++l) c.nope_layers[l] = !c.local(l);
}

}  // namespace

Model load_gguf_model(const std::string& path, ModelParts parts) {
  GgufFile g(path);
  const std::string arch = g.get_string("general.architecture", "");
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "phi3" && arch != "gemma2" &&
      arch != "gemma3" && arch != "olmo2" && arch != "granite" && arch != "smollm3" && arch != "exaone4") {
    throw input_error(path, "unsupported architecture \"" + arch +
                                "\" (supported: llama, qwen2, qwen3, phi3, gemma2, gemma3, olmo2, granite, smollm3, "
                                "exaone4)");
  }
  // Every tensor type is checked before anything large is allocated.
  for (const GgufTensorInfo& t : g.tensors()) {
    if (!ggml_type_supported(t.type)) {
      throw input_error(path, "tensor " + t.name + " has unsupported type " +
                                  std::to_string(t.type) + " (" + ggml_type_name(t.type) + ")");
    }
  }
  TensorSource src(g);
  const std::string k = arch + ".";
  ModelConfig c;
  c.arch = arch;
  c.name = g.get_string("general.name", std::filesystem::path(path).stem().string());
  c.dim = int_param(g, k + "embedding_length", -1, kMaxModelDim);
  c.hidden_dim = int_param(g, k + "feed_forward_length", -1, kMaxModelDim);
  c.n_layers = int_param(g, k + "block_count", -1, kMaxLayers);
  std::vector<std::string> names;
  for (const GgufTensorInfo& t : g.tensors()) names.push_back(t.name);
  check_layer_count(c.n_layers, names, "blk.", path, k + "block_count");
  c.n_heads = int_param(g, k + "attention.head_count", -1, kMaxHeads);
  c.n_kv_heads = int_param(g, k + "attention.head_count_kv", c.n_heads, kMaxHeads);
  const bool head_dim_given = g.find(k + "attention.key_length") != nullptr;
  c.head_dim = head_dim_given ? int_param(g, k + "attention.key_length", -1, kMaxModelDim) : c.dim / c.n_heads;
  check_attention_layout(c.dim, c.n_heads, c.n_kv_heads, c.head_dim, head_dim_given,
                         {k + "embedding_length", k + "attention.head_count", k + "attention.head_count_kv",
                          k + "attention.key_length"},
                         path);
  c.seq_len = int_param(g, k + "context_length", 2048, kMaxContext);
  c.rope_theta = positive_float(g, k + "rope.freq_base", 10000.0f);
  c.rms_eps = positive_float(g, k + "attention.layer_norm_rms_epsilon", 1e-5f);
  // llama.cpp's converter permutes llama's, granite's and smollm3's q/k rows into interleaved pairs
  const bool interleaved = arch == "llama" || arch == "granite" || arch == "smollm3";
  c.rope_style = interleaved ? RopeStyle::Interleaved : RopeStyle::RotateHalf;
  std::string scaling = "none";
  if (const GgufValue* v = g.find(k + "rope.scaling.type")) {
    if (v->type != GgufType::String)
      throw input_error(path, k + "rope.scaling.type is " + type_phrase(v->type) + ", expected a string");
    scaling = v->text;
  }
  if (scaling == "linear") {
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = positive_float(g, k + "rope.scaling.factor", 1.0f);
  } else if (scaling == "yarn") {
    c.rope_scaling = read_yarn(g, k, c.seq_len, path);
  } else if (scaling != "none") {
    throw input_error(path, "unsupported " + k + "rope.scaling.type \"" + scaling +
                                "\" (supported: none, linear, yarn)");
  }
  check_attention_width(c.n_heads, c.head_dim, path);
  // RoPE over the first rope.dimension_count dims of each head: phi3's (Phi-4-mini's 96 of 128);
  // elsewhere the whole head.
  if (const int rotated = int_param(g, k + "rope.dimension_count", c.head_dim, kMaxModelDim);
      rotated != c.head_dim) {
    if (arch != "phi3" || rotated > c.head_dim || rotated % 2 != 0 || (c.head_dim - rotated) % 2 != 0)
      throw input_error(path, k + "rope.dimension_count " + std::to_string(rotated) + " differs from head_dim " +
                                  std::to_string(c.head_dim) +
                                  (arch != "phi3" ? " (partial rotary embeddings are phi3's only)"
                                                  : " (an even number of dims below it is needed)"));
    c.rotary_dim = rotated;
  }
  const GgufTensorInfo& embd = src.info("token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[0] != static_cast<uint64_t>(c.dim)) {
    throw input_error(path, "tensor token_embd.weight has shape " + TensorSource::shape(embd.dims) +
                                ", expected [" + std::to_string(c.dim) + ", vocab]");
  }
  if (embd.dims[1] > static_cast<uint64_t>(kMaxVocab)) {
    throw input_error(path, "tensor token_embd.weight has " + std::to_string(embd.dims[1]) +
                                " rows, more than the " + std::to_string(kMaxVocab) +
                                " tokens supported");
  }
  c.vocab_size = static_cast<int>(embd.dims[1]);
  c.tied_classifier = g.find_tensor("output.weight") == nullptr;
  c.qkv_bias = g.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = arch == "qwen3" || arch == "gemma3" || arch == "olmo2" || arch == "exaone4";
  const bool gemma = arch == "gemma2" || arch == "gemma3", phi3 = arch == "phi3", olmo2 = arch == "olmo2";
  const bool post_norms_only = olmo2 || arch == "exaone4";  // no norm before the blocks, one after each
  // phi3 as llama.cpp runs it: q, k and v in one attn_qkv (or apart), gate and up in one ffn_up,
  // attention.sliding_window on every layer; the 128K models' LongRoPE factors as tensors, chosen
  // per forward pass as transformers chooses them (llama.cpp chooses once, by the context it is
  // given).
  const bool fused_qkv = phi3 && g.find_tensor("blk.0.attn_qkv.weight") != nullptr;
  if (phi3) {
    if (g.find_tensor("rope_factors_long.weight") != nullptr) {
      RopeScaling& r = c.rope_scaling;
      r.type = "longrope";
      r.original_max_position = int_param(g, k + "rope.scaling.original_context_length", -1, kMaxContext);
      WeightVector short_factor, long_factor;  // [head_dim/2] each
      src.read(short_factor, "rope_factors_short.weight", c.rot_dim() / 2);
      src.read(long_factor, "rope_factors_long.weight", c.rot_dim() / 2);
      src.finish();
      r.short_factor.assign(short_factor.begin(), short_factor.end());
      r.long_factor.assign(long_factor.begin(), long_factor.end());
      r.factor = static_cast<float>(c.seq_len) / static_cast<float>(r.original_max_position);
      r.attention_factor = positive_float(g, k + "rope.scaling.attn_factor",
                                          ops::longrope_mscale(r.factor, r.original_max_position));
    }
    // none where 0 (as the converter writes Phi-4's) or never shorter than the context
    const GgufValue* window = g.find(k + "attention.sliding_window");
    if (window == nullptr || !is_integer(window->type) || window->integer != 0)
      c.sliding_window = int_param(g, k + "attention.sliding_window", c.seq_len, kMaxContext);
    if (c.sliding_window >= c.seq_len) c.sliding_window = 0;
  }
  if (arch == "exaone4") read_exaone4_layers(g, k, c);
  if (arch == "smollm3") {  // as llama.cpp: every 4th layer without RoPE (no key says otherwise)
    c.nope_layers.assign(c.n_layers, 0);
    for (int l = 0; l < c.n_layers; ++l) c.nope_layers[l] = (l + 1) % 4 == 0;
  }
  float query_scale = 1.0f;
  const bool granite = arch == "granite";
  if (granite) {
    // Granite's multipliers as llama.cpp reads them (0 or absent: none; the score scale in place of
    // head_dim^-1/2), folded into the weights after loading.
    c.embed_scale = positive_float(g, k + "embedding_scale", 1.0f);
    if (const float s = positive_float(g, k + "attention.scale", 0.0f); s > 0.0f)
      query_scale = s * std::sqrt(static_cast<float>(c.head_dim));
  }
  if (gemma) {
    // As llama.cpp runs gemma2 and gemma3: GeGLU; embeddings scaled by sqrt(dim); the norm weights
    // already 1 + HF's (the converter adds it); local layers within attention.sliding_window —
    // gemma2's every other one (from layer 0), sharing the global layers' RoPE base, with soft caps
    // on the scores and logits (50 and 30 unless the file says otherwise); gemma3's all but every
    // 6th, rotated with base 10000, no caps. Scores scale by head_dim^-1/2, but in the 27B models
    // (46 and 62 layers) by (dim / heads)^-1/2.
    const bool gemma2 = arch == "gemma2";
    c.activation = Activation::GeluTanh;
    c.embed_scale = std::sqrt(static_cast<float>(c.dim));
    c.sliding_window = int_param(g, k + "attention.sliding_window", 4096, kMaxContext);
    const int pattern = gemma2 ? 2 : 6;
    c.local_layers = local_but_every(c.n_layers, pattern);
    c.rope_local_theta = gemma2 ? c.rope_theta : 10000.0f;
    if (gemma2 && !c.rope_scaling.type.empty())
      throw input_error(path, k + "rope.scaling.type \"" + c.rope_scaling.type + "\" is not supported in gemma2");
    for (const auto& [key, cap, gemma2_default] : {std::tuple{"attn_logit_softcapping", &c.attn_softcap, 50.0f},
                                                    std::tuple{"final_logit_softcapping", &c.final_softcap, 30.0f}}) {
      if (!gemma2 && g.find(k + key))
        throw input_error(path, k + key + " is not supported (llama.cpp's gemma3 caps nothing)");
      if (gemma2) *cap = positive_float(g, k + key, gemma2_default);
    }
    if (c.n_layers == (gemma2 ? 46 : 62)) query_scale = std::sqrt(static_cast<float>(c.head_dim) / (c.dim / c.n_heads));
  }
  // End-of-turn and end-of-message tokens end a text too, as llama.cpp counts them; an id past the
  // vocabulary (converters write 0xFFFFFFFF for "none") is none.
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const int64_t id = g.get_int(key, -1); id >= 0 && id < c.vocab_size) c.end_ids.push_back((int)id);
  if (g.find_tensor("rope_freqs.weight") != nullptr) {
    WeightVector divisors;    // [head_dim/2]
    src.read(divisors, "rope_freqs.weight", c.head_dim / 2);
    src.finish();
    c.rope_scaling = llama3_scaling(path, divisors, c);
  }

  // OLMo 3 converts as olmo2 with a sliding window: as llama.cpp runs it, all layers but every 4th
  // local, rotated at the global base without the global layers' scaling (YaRN in the released
  // long-context models).
  if (olmo2 && g.find(k + "attention.sliding_window") != nullptr) {
    c.arch = "olmo3";
    c.sliding_window = int_param(g, k + "attention.sliding_window", -1, kMaxContext);
    c.local_layers = local_but_every(c.n_layers, 4);
    c.rope_local_theta = c.rope_theta;
  }

  Model m;
  m.config = c;
  m.path = path;
  m.format = "gguf";
  m.weight_type = describe_weight_type(g);
  if (parts == ModelParts::ConfigOnly) return m;
  const uint64_t D = c.dim, H = c.hidden_dim, Q = c.q_dim(), KV = c.kv_dim(), V = c.vocab_size;
  ModelWeights& w = m.weights;
  src.read(w.token_embedding, "token_embd.weight", D, V);
  w.layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    if (!post_norms_only) src.read(l.attn_norm, b + "attn_norm.weight", D);
    if (fused_qkv) {  // [D, Q + 2 KV]: q, k, v rows in turn
      src.read_stacked(b + "attn_qkv.weight", {{&l.wq, c.q_dim()}, {&l.wk, c.kv_dim()}, {&l.wv, c.kv_dim()}},
                       D);
    } else {
      src.read(l.wq, b + "attn_q.weight", D, Q);
      src.read(l.wk, b + "attn_k.weight", D, KV);
      src.read(l.wv, b + "attn_v.weight", D, KV);
    }
    src.read(l.wo, b + "attn_output.weight", Q, D);
    if (c.qkv_bias) {
      src.read(l.bq, b + "attn_q.bias", Q);
      src.read(l.bk, b + "attn_k.bias", KV);
      src.read(l.bv, b + "attn_v.bias", KV);
    }
    if (c.qk_norm) {  // OLMo 2's across all of a token's query (key) heads
      src.read(l.q_norm, b + "attn_q_norm.weight", olmo2 ? Q : c.head_dim);
      src.read(l.k_norm, b + "attn_k_norm.weight", olmo2 ? KV : c.head_dim);
    }
    if (gemma || post_norms_only) {
      src.read(l.post_attn_norm, b + "post_attention_norm.weight", D);
      src.read(l.post_ffn_norm, b + "post_ffw_norm.weight", D);
    }
    if (!post_norms_only) src.read(l.ffn_norm, b + "ffn_norm.weight", D);
    if (phi3) {  // [D, 2 H]: gate rows, then up rows
      src.read_stacked(b + "ffn_up.weight", {{&l.w_gate, c.hidden_dim}, {&l.w_up, c.hidden_dim}}, D);
    } else {
      src.read(l.w_gate, b + "ffn_gate.weight", D, H);
      src.read(l.w_up, b + "ffn_up.weight", D, H);
    }
    src.read(l.w_down, b + "ffn_down.weight", H, D);
  }
  src.read(w.final_norm, "output_norm.weight", D);
  if (!c.tied_classifier) src.read(w.classifier, "output.weight", D, V);
  src.finish();
  scale_queries(m, query_scale);
  permute_partial_rotary(m);
  if (granite) {
    scale_block_outputs(m, positive_float(g, k + "residual_scale", 1.0f));
    scale_logits(m, positive_float(g, k + "logit_scale", 1.0f));
  }
  return m;
}

}  // namespace kvs
