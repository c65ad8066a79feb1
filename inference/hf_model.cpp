// Hugging Face folder -> Model. HF linear weights are [out, in] row-major, the Model's layout;
// q/k rows are in rotate-half order, so the model gets RopeStyle::RotateHalf.
#include "inference/hf_model.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "inference/errors.h"
#include "inference/json.h"
#include "inference/mapped_file.h"
#include "inference/model_checks.h"
#include "inference/safetensors_file.h"
#include "kernels/quant_panels.h"
#include "kernels/rope.h"

namespace fs = std::filesystem;

namespace kvs {
namespace {

// The shape a config class gives where config.json has no value: transformers' defaults, -1 where
// the value must be given. Hub checkpoints of the Gemma 3 models with vision towers (4B, 12B, 27B)
// leave most of their text_config to Gemma3TextConfig's defaults.
struct ShapeDefaults {
  int64_t vocab = -1, hidden = -1, intermediate = -1, layers = -1, heads = -1;
  int64_t kv_heads = 0;  // 0: as many as the query heads
};

struct Architecture {
  const char* hf_name;
  const char* arch;
  bool qkv_bias;
  bool qk_norm;          // q_norm / k_norm on every head (Qwen3, Gemma 3), or across heads (OLMo 2)
  int default_context;   // max_position_embeddings where config.json has none (transformers' default)
  int default_head_dim;  // head_dim where config.json has none (transformers'); 0: hidden_size / heads
  float default_rms_eps;  // rms_norm_eps where config.json has none (transformers')
  ShapeDefaults shape = {};
};

const AttentionKeys kHfAttentionKeys{"hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim"};

const Architecture kArchitectures[] = {
    {"LlamaForCausalLM", "llama", false, false, 2048, 0, 1e-6f},
    {"MistralForCausalLM", "mistral", false, false, 4096 * 32, 0, 1e-6f},
    {"Qwen2ForCausalLM", "qwen2", true, false, 32768, 0, 1e-6f},
    {"Qwen3ForCausalLM", "qwen3", false, true, 32768, 128, 1e-6f},
    {"Phi3ForCausalLM", "phi3", false, false, 4096, 0, 1e-5f},
    {"Gemma2ForCausalLM", "gemma2", false, false, 8192, 256, 1e-6f, {256000, 2304, 9216, 26, 8, 4}},
    {"Gemma3ForCausalLM", "gemma3", false, true, 131072, 256, 1e-6f, {262208, 2304, 9216, 26, 8, 4}},
    {"Olmo2ForCausalLM", "olmo2", false, true, 2048, 0, 1e-5f, {50304, 4096, 11008, 32, 32}},
    {"Olmo3ForCausalLM", "olmo3", false, true, 2048, 0, 1e-5f, {50304, 4096, 11008, 32, 32}},
    {"SmolLM3ForCausalLM", "smollm3", false, false, 32768, 0, 1e-6f, {128256, 2048, 11008, 36, 16, 4}},
    {"GraniteForCausalLM", "granite", false, false, 2048, 0, 1e-6f, {32000, 4096, 11008, 32, 32}},
    {"Exaone4ForCausalLM", "exaone4", false, true, 2048, 0, 1e-5f, {102400, 4096, 16384, 32, 32, 32}},
};
// A Gemma 3 checkpoint with a vision tower: its language model (text_config, the tensors under
// language_model.model. as the hub holds them or model.language_model. as transformers 5 saves
// them) runs as Gemma3ForCausalLM; the vision tower is not read.
constexpr const char* kGemma3Multimodal = "Gemma3ForConditionalGeneration";

// "a string", "a boolean", ...: how errors name a JSON value's type.
std::string type_phrase(const Json& v) {
  return v.is_number() ? "a number"
         : v.is_string() ? "a string"
         : v.is_bool()   ? "a boolean"
         : v.is_array()  ? "an array"
         : v.is_null()   ? "null"
                         : "an object";
}

// A JSON number as config.json shows it: 4294967312, 2.5, -1e-05.
std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", x);
  return buf;
}

// The integer `v` in [1, max], or `fallback` when absent or null (-1: required); `name` names it in
// errors.
int positive_int(const Json* v, const std::string& path, const std::string& name,
                 int64_t fallback, int64_t max) {
  const bool given = v != nullptr && !v->is_null();
  if (!given && fallback < 0) throw input_error(path, "missing " + name);
  if (given && !v->is_number()) throw input_error(path, name + " is " + type_phrase(*v) + ", expected an integer");
  const double x = given ? v->as_number() : static_cast<double>(fallback);
  if (!(x >= 1 && x <= static_cast<double>(max)) || x != static_cast<double>(static_cast<int>(x))) {
    throw input_error(path, name + " has an invalid value " + number_text(x) + " (expected an integer from 1 to " +
                                std::to_string(max) + ")");
  }
  return static_cast<int>(x);
}

// The number `v` as a finite float > 0, or `fallback` when absent or null.
float positive_float(const Json* v, const std::string& path, const std::string& name,
                     float fallback) {
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_number()) throw input_error(path, name + " is " + type_phrase(*v) + ", expected a number");
  const float x = static_cast<float>(v->as_number());
  if (!std::isfinite(x) || x <= 0.0f)
    throw input_error(path, name + " has an invalid value " + number_text(v->as_number()) +
                                " (expected a positive number)");
  return x;
}

// The boolean `v`, or `fallback` when absent or null.
bool flag(const Json* v, const std::string& path, const std::string& name, bool fallback) {
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_bool()) throw input_error(path, name + " is not true or false");
  return v->as_bool();
}

// The tensors of a checkpoint, wherever they are stored (one file or several shards).
class TensorSet {
 public:
  explicit TensorSet(const fs::path& folder) : folder_(folder.string()) {
    const fs::path single = folder / "model.safetensors";
    const fs::path index = folder / "model.safetensors.index.json";
    if (path_kind(index.string()) != PathKind::Missing) {
      listing_ = index.string();
      const Json j = Json::parse_file(index.string());
      const Json* map = j.find("weight_map");
      if (map == nullptr || !map->is_object())
        throw input_error(index.string(), "missing weight_map");
      for (std::size_t i = 0; i < map->keys().size(); ++i) {
        const Json& file = map->items()[i];
        if (!file.is_string())
          throw input_error(index.string(), "weight_map entry is not a file name");
        const fs::path shard = folder / file.as_string();
        if (path_kind(shard.string()) == PathKind::Missing) {
          throw input_error(shard.string(), "missing shard (listed in " +
                                                index.filename().string() + " for tensor " +
                                                map->keys()[i] + ")");
        }
        auto& f = files_[shard.string()];
        if (!f) f = std::make_shared<SafetensorsFile>(shard.string());
        owner_[map->keys()[i]] = f.get();
      }
    } else if (path_kind(single.string()) != PathKind::Missing) {
      listing_ = single.string();
      auto f = std::make_shared<SafetensorsFile>(single.string());
      for (const auto& [name, t] : f->tensors()) owner_[name] = f.get();
      files_[single.string()] = f;
    } else {
      throw input_error(folder.string(), "no model.safetensors or model.safetensors.index.json");
    }
  }

  bool has(const std::string& name) const { return owner_.count(name) > 0; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, file] : owner_) out.push_back(name);
    return out;
  }

  // Checks `name` has shape `want` and converts it into `dst`.
  void read(WeightVector& dst, const std::string& name, std::vector<uint64_t> want) {
    const auto [f, t] = checked(name, want);
    pending_.push_back({f, t, &dst});
  }
  // The same for a matrix `want` = {rows, cols}, converted and packed by finish(); an F16 or
  // BF16 one is kept in 16 bits (kernels/quant_panels.h).
  void read(PackedMatrix& dst, const std::string& name, std::vector<uint64_t> want) {
    const auto [file, tensor] = checked(name, want);
    const int rows = static_cast<int>(want[0]), cols = static_cast<int>(want[1]);
    auto fill = [f = file, t = tensor](float* rows_major) { f->read_f32(*t, rows_major); };
    if (const auto format = sixteen_bit(*tensor))
      packs_.add_quantized(dst, rows, cols, *format, file->raw(*tensor), fill);
    else
      packs_.add(dst, rows, cols, fill);
  }

  // Matrices stored stacked by rows in the tensor `name` [sum of the parts' rows, cols] (Phi-3's
  // qkv_proj, gate_up_proj): the tensor converted once, each part packed from its rows by finish()
  // (in 16 bits as read() packs a matrix).
  void read_stacked(const std::string& name, std::vector<PackQueue::Part> parts, uint64_t cols) {
    uint64_t rows = 0;
    for (const PackQueue::Part& p : parts) rows += static_cast<uint64_t>(p.rows);
    const auto [file, tensor] = checked(name, {rows, cols});
    const auto format = sixteen_bit(*tensor);
    packs_.add_stacked(std::move(parts), static_cast<int>(cols),
                       [f = file, t = tensor](float* rows_major) { f->read_f32(*t, rows_major); }, format,
                       format ? file->raw(*tensor) : nullptr);
  }

  // The 16-bit panel format of an F16 or BF16 tensor; none for F32.
  static std::optional<ops::QuantFormat> sixteen_bit(const SafetensorsTensor& t) {
    if (t.dtype == "F16") return ops::QuantFormat::F16;
    if (t.dtype == "BF16") return ops::QuantFormat::BF16;
    return std::nullopt;
  }

  // Sizes (in parallel, so several threads first-touch the pages) and converts every queued
  // tensor, then packs the matrices.
  void finish() {
    const int64_t n = static_cast<int64_t>(pending_.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 8)
    for (int64_t i = 0; i < n; ++i) pending_[i].dst->resize(pending_[i].tensor->elements());
    for (const Pending& p : pending_) p.file->read_f32(*p.tensor, p.dst->data());
    pending_.clear();
    packs_.pack(folder_);
  }

  // Dtype of most weights, "(mixed)" when several occur.
  std::string weight_type() const {
    std::map<std::string, uint64_t> count;
    for (const auto& [name, file] : owner_) {
      if (const SafetensorsTensor* t = file->find(name)) count[t->dtype] += t->elements();
    }
    std::string main;
    uint64_t most = 0;
    for (const auto& [dtype, n] : count) {
      if (n > most) main = dtype, most = n;
    }
    return main + (count.size() > 1 ? " (mixed)" : "");
  }

  // The file holding `name` and its tensor, checked to have shape `want` and a dtype it converts.
  std::pair<const SafetensorsFile*, const SafetensorsTensor*> checked(const std::string& name,
                                                                      const std::vector<uint64_t>& want) const {
    auto it = owner_.find(name);
    if (it == owner_.end()) throw input_error(listing_, "missing tensor " + name);
    const SafetensorsFile& f = *it->second;
    const SafetensorsTensor* t = f.find(name);
    if (t == nullptr)
      throw input_error(f.path(), "missing tensor " + name + " (named in the index)");
    if (t->shape != want) {
      throw input_error(f.path(), "tensor " + name + " has shape " + shape(t->shape) +
                                      ", config.json implies " + shape(want));
    }
    f.check_dtype(*t);
    return {&f, t};
  }

  static std::string shape(const std::vector<uint64_t>& dims) {
    std::string s = "[";
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }

 private:
  struct Pending {
    const SafetensorsFile* file;
    const SafetensorsTensor* tensor;
    WeightVector* dst;
  };
  std::vector<Pending> pending_;
  PackQueue packs_;
  std::string folder_;   // the model's folder
  std::string listing_;  // the file that lists the tensors: the index or the single file
  std::map<std::string, std::shared_ptr<SafetensorsFile>> files_;  // path -> file
  std::map<std::string, const SafetensorsFile*> owner_;            // tensor -> file holding it
};

// LongRoPE's factors `v` (named `name` in errors): a list of `n` positive numbers.
std::vector<float> rope_factors(const std::string& path, const std::string& name, const Json* v, int n) {
  if (v == nullptr || v->is_null()) throw input_error(path, "missing " + name);
  if (!v->is_array() || v->size() != static_cast<std::size_t>(n))
    throw input_error(path, name + " is not a list of " + std::to_string(n) + " factors (rotated dims / 2)");
  std::vector<float> factors;
  for (std::size_t i = 0; i < v->size(); ++i)
    factors.push_back(positive_float(&v->items()[i], path, name + "[" + std::to_string(i) + "]", 1.0f));
  return factors;
}

// The scaling in `rs` (rope_scaling, or one rope_parameters object, named `key` in errors) into
// c.rope_scaling. original_context: YaRN's original_max_position_embeddings where rs has none.
void read_scaling(const std::string& path, const std::string& key, const Json& rs, int original_context,
                  ModelConfig& c) {
  const std::string type = rs.get_string("rope_type", rs.get_string("type", ""));
  if (type == "llama3") {
    RopeScaling& r = c.rope_scaling;
    r.type = "llama3";
    r.factor = positive_float(rs.find("factor"), path, key + ".factor", 8.0f);
    r.low_freq_factor = positive_float(rs.find("low_freq_factor"), path, key + ".low_freq_factor", 1.0f);
    r.high_freq_factor = positive_float(rs.find("high_freq_factor"), path, key + ".high_freq_factor", 4.0f);
    if (r.high_freq_factor <= r.low_freq_factor)
      throw input_error(path, key + ".high_freq_factor is not above low_freq_factor");
    r.original_max_position = positive_int(rs.find("original_max_position_embeddings"), path,
                                           key + ".original_max_position_embeddings", 8192, kMaxContext);
  } else if (type == "linear") {
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = positive_float(rs.find("factor"), path, key + ".factor", 1.0f);
  } else if (type == "yarn") {
    // As transformers: the factor by default the context's growth over the original; the attention
    // factor from the factor (and DeepSeek's mscale pair) where none is given; betas 32 and 1.
    RopeScaling& r = c.rope_scaling;
    r.type = "yarn";
    r.original_max_position = positive_int(rs.find("original_max_position_embeddings"), path,
                                           key + ".original_max_position_embeddings", original_context, kMaxContext);
    r.factor = positive_float(rs.find("factor"), path, key + ".factor",
                              static_cast<float>(c.seq_len) / static_cast<float>(r.original_max_position));
    r.beta_fast = positive_float(rs.find("beta_fast"), path, key + ".beta_fast", 32.0f);
    r.beta_slow = positive_float(rs.find("beta_slow"), path, key + ".beta_slow", 1.0f);
    r.truncate = flag(rs.find("truncate"), path, key + ".truncate", true);
    const float mscale = positive_float(rs.find("mscale"), path, key + ".mscale", 0.0f);
    const float mscale_all_dim = positive_float(rs.find("mscale_all_dim"), path, key + ".mscale_all_dim", 0.0f);
    const float implied = mscale > 0.0f && mscale_all_dim > 0.0f
                              ? ops::yarn_mscale(r.factor, mscale) / ops::yarn_mscale(r.factor, mscale_all_dim)
                              : ops::yarn_mscale(r.factor);
    r.attention_factor = positive_float(rs.find("attention_factor"), path, key + ".attention_factor", implied);
  } else if (type == "longrope" || type == "su") {
    // Phi-3's 128K models, as transformers: a factor per frequency, short and long, and the
    // attention factor sqrt(1 + ln(factor) / ln(original)) where none is given.
    RopeScaling& r = c.rope_scaling;
    r.type = "longrope";
    r.original_max_position = positive_int(rs.find("original_max_position_embeddings"), path,
                                           key + ".original_max_position_embeddings", original_context, kMaxContext);
    r.short_factor = rope_factors(path, key + ".short_factor", rs.find("short_factor"), c.rot_dim() / 2);
    r.long_factor = rope_factors(path, key + ".long_factor", rs.find("long_factor"), c.rot_dim() / 2);
    r.factor = positive_float(rs.find("factor"), path, key + ".factor",
                              static_cast<float>(c.seq_len) / static_cast<float>(r.original_max_position));
    r.attention_factor = positive_float(rs.find("attention_factor"), path, key + ".attention_factor",
                                        ops::longrope_mscale(r.factor, r.original_max_position));
  } else if (type != "default" && !type.empty()) {
    throw input_error(path,
                      "unsupported " + key + " type \"" + type + "\" (supported: llama3, linear, yarn, longrope)");
  }
}

// RoPE's base and scaling: config.json's rope_theta and rope_scaling, or, as transformers 5 writes
// them, both in one rope_parameters object ({"rope_type", "rope_theta", "factor", ...}), which
// wins where both are given. A model with local layers (Gemma 3) has a base of their own
// (rope_local_base_freq, unscaled), or, in transformers 5, rope_parameters keyed by layer type
// ("full_attention": the global layers', "sliding_attention": the local layers'); OLMo 3's local
// layers share the global base (local_shares_theta). default_theta: the base where none is given.
void read_rope(const std::string& path, const Json& j, ModelConfig& c, float default_theta,
               bool local_shares_theta = false) {
  const Json* params = j.find("rope_parameters");
  const bool v5 = params != nullptr && !params->is_null();
  if (v5 && !params->is_object()) throw input_error(path, "rope_parameters is not an object");
  const bool by_type =
      v5 && !c.local_layers.empty() && (params->find("full_attention") || params->find("sliding_attention"));
  for (std::size_t i = 0; v5 && !by_type && i < params->size(); ++i)
    if (params->items()[i].is_object())
      throw input_error(path, "rope_parameters per layer type (\"" + params->keys()[i] + "\") is not supported");
  std::string key = v5 ? "rope_parameters" : "rope_scaling";
  const Json* rs = v5 ? params : j.find("rope_scaling");
  if (by_type) {
    key = "rope_parameters.full_attention";
    rs = params->find("full_attention");
  }
  const bool given = rs != nullptr && !rs->is_null();
  if (given && !rs->is_object()) throw input_error(path, key + " is not an object");
  const Json* theta = v5 && given ? rs->find("rope_theta") : nullptr;
  c.rope_theta = theta != nullptr && !theta->is_null()
                     ? positive_float(theta, path, key + ".rope_theta", default_theta)
                     : positive_float(j.find("rope_theta"), path, "rope_theta", default_theta);
  // YaRN's original context where the scaling gives none: config.json's own (where Phi-3 keeps it),
  // else the context.
  if (given)
    read_scaling(path, key, *rs,
                 positive_int(j.find("original_max_position_embeddings"), path, "original_max_position_embeddings",
                              c.seq_len, kMaxContext),
                 c);
  if (!c.local_layers.empty()) {
    c.rope_local_theta = local_shares_theta ? c.rope_theta
                                            : positive_float(j.find("rope_local_base_freq"), path,
                                                             "rope_local_base_freq", 10000.0f);
    if (const Json* local = by_type ? params->find("sliding_attention") : nullptr; local && !local->is_null()) {
      if (!local->is_object()) throw input_error(path, "rope_parameters.sliding_attention is not an object");
      const std::string type = local->get_string("rope_type", "default");
      if (type != "default")
        throw input_error(path, "rope_parameters.sliding_attention type \"" + type +
                                    "\" is not supported (supported: default)");
      c.rope_local_theta = positive_float(local->find("rope_theta"), path,
                                          "rope_parameters.sliding_attention.rope_theta", c.rope_local_theta);
    }
  }
}

// The eos_token_id of a config.json or generation_config.json (a token id or a list of them; null
// or absent: none) added to `ids`; each must be a token of the vocabulary.
void add_end_ids(const std::string& path, const Json& j, int vocab, std::vector<int>& ids) {
  const Json* e = j.find("eos_token_id");
  if (e == nullptr || e->is_null()) return;
  const std::vector<Json> given = e->is_array() ? e->items() : std::vector<Json>{*e};
  for (const Json& v : given) {
    const double id = v.is_number() ? v.as_number() : -1;
    if (!(id >= 0 && id < vocab) || id != std::floor(id)) {
      throw input_error(path, "eos_token_id holds " + (v.is_number() ? number_text(id) : type_phrase(v)) +
                                  ", not a token id (0.." + std::to_string(vocab - 1) + ")");
    }
    ids.push_back(static_cast<int>(id));
  }
}

// config.json's layer_types, each layer's attention kind as transformers writes it: [n_layers], 1
// where a layer is "sliding_attention" (allowed only where `sliding` is true), 0 where it is
// "full_attention"; empty when the config has none.
std::vector<uint8_t> read_layer_types(const std::string& path, const Json& j, int n_layers, bool sliding) {
  const Json* kinds = j.find("layer_types");
  if (kinds == nullptr || kinds->is_null()) return {};
  if (!kinds->is_array() || kinds->size() != static_cast<std::size_t>(n_layers))
    throw input_error(path, "layer_types is not a list of num_hidden_layers (" + std::to_string(n_layers) +
                                ") layer kinds");
  std::vector<uint8_t> local(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    const Json& kind = kinds->items()[l];
    const std::string name = kind.is_string() ? kind.as_string() : "";
    if (name != "full_attention" && !(sliding && name == "sliding_attention"))
      throw input_error(path, "layer_types holds " + (kind.is_string() ? "\"" + name + "\"" : type_phrase(kind)) +
                                  " (supported: " + (sliding ? "sliding_attention, " : "") + "full_attention)");
    local[l] = name == "sliding_attention";
  }
  return local;
}

// EXAONE 4's layers: with a sliding_window (4096 where config.json has none; null: none), local
// ones within it by layer_types, else by sliding_window_pattern (every pattern-th layer global, or
// a string of L and G repeated), rotated as the global layers would be; the global layers then
// without RoPE (NoPE). Without a window every layer is global and rotates.
void read_exaone4_layers(const std::string& path, const Json& j, ModelConfig& c) {
  const Json* window = j.find("sliding_window");
  if (window != nullptr && window->is_null()) {
    read_layer_types(path, j, c.n_layers, false);
    return;
  }
  c.sliding_window = positive_int(window, path, "sliding_window", 4096, kMaxContext);
  c.local_rope_as_global = true;
  c.local_layers = read_layer_types(path, j, c.n_layers, true);
  const Json* pattern = j.find("sliding_window_pattern");
  if (c.local_layers.empty() && pattern != nullptr && pattern->is_string()) {
    const std::string kinds = pattern->as_string();
    if (kinds.empty() || kinds.find_first_not_of("LG") != std::string::npos)
      throw input_error(path, "sliding_window_pattern \"" + kinds + "\" is not a string of L (local) and G (global)");
    c.local_layers.assign(c.n_layers, 0);
    for (int l = 0; l < c.n_layers; ++l) c.local_layers[l] = kinds[l % kinds.size()] == 'L';
  } else if (c.local_layers.empty()) {
    c.local_layers = local_but_every(c.n_layers, positive_int(pattern, path, "sliding_window_pattern", 4, kMaxLayers));
  }
  c.nope_layers.assign(c.n_layers, 0);
  for (int l = 0; l < c.n_layers; ++l) c.nope_layers[l] = !c.local(l);
}

// SmolLM3's NoPE layers, [n_layers], 1 where a layer does not rotate: config.json's no_rope_layers
// (1 where a layer does), else every no_rope_layer_interval-th layer (default 4).
std::vector<uint8_t> read_nope_layers(const std::string& path, const Json& j, int n_layers) {
  std::vector<uint8_t> nope(n_layers);
  const Json* listed = j.find("no_rope_layers");
  if (listed == nullptr || listed->is_null()) {
    const int interval = positive_int(j.find("no_rope_layer_interval"), path, "no_rope_layer_interval", 4, kMaxLayers);
    for (int l = 0; l < n_layers; ++l) nope[l] = (l + 1) % interval == 0;
    return nope;
  }
  if (!listed->is_array() || listed->size() != static_cast<std::size_t>(n_layers))
    throw input_error(path, "no_rope_layers is not a list of num_hidden_layers (" + std::to_string(n_layers) +
                                ") flags");
  for (int l = 0; l < n_layers; ++l) {
    const Json& v = listed->items()[l];
    if (!v.is_number() || (v.as_number() != 0 && v.as_number() != 1))
      throw input_error(path, "no_rope_layers holds " + (v.is_number() ? number_text(v.as_number()) : type_phrase(v)) +
                                  " (expected 0 or 1)");
    nope[l] = v.as_number() == 0;
  }
  return nope;
}

// Gemma 2 and 3 (text): GeGLU (hidden_activation), embeddings scaled by sqrt(hidden_size), a tied
// classifier unless told otherwise, and local layers (layer_types, else all but every
// pattern-th: Gemma 2 every other one, Gemma 3 sliding_window_pattern, default 6) attending within
// sliding_window; the attention scores and the logits soft-capped by attn_logit_softcapping and
// final_logit_softcapping (none where null; where absent, transformers' defaults: Gemma 2's 50 and
// 30, Gemma 3's none). The bidirectional variant is refused.
void read_gemma(const std::string& path, const Json& j, ModelConfig& c) {
  const bool gemma2 = c.arch == "gemma2";
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    const Json* act = j.find(key);
    if (act != nullptr && !act->is_null() && !(act->is_string() && act->as_string() == "gelu_pytorch_tanh")) {
      throw input_error(path, std::string(key) + " " +
                                  (act->is_string() ? "\"" + act->as_string() + "\"" : type_phrase(*act)) +
                                  " is not supported (supported: gelu_pytorch_tanh)");
    }
  }
  c.activation = Activation::GeluTanh;
  c.embed_scale = std::sqrt(static_cast<float>(c.dim));
  c.tied_classifier = flag(j.find("tie_word_embeddings"), path, "tie_word_embeddings", true);
  for (const auto& [key, cap, gemma2_default] : {std::tuple{"attn_logit_softcapping", &c.attn_softcap, 50.0f},
                                                  std::tuple{"final_logit_softcapping", &c.final_softcap, 30.0f}}) {
    const Json* given = j.find(key);
    const float fallback = gemma2 ? gemma2_default : 0.0f;
    *cap = given != nullptr && given->is_null() ? 0.0f : positive_float(given, path, key, fallback);
  }
  if (flag(j.find("use_bidirectional_attention"), path, "use_bidirectional_attention", false))
    throw input_error(path, "use_bidirectional_attention is not supported (causal attention only)");
  c.sliding_window = positive_int(j.find("sliding_window"), path, "sliding_window", 4096, kMaxContext);
  c.local_layers = read_layer_types(path, j, c.n_layers, true);
  if (c.local_layers.empty()) {
    const int pattern =
        gemma2 ? 2 : positive_int(j.find("sliding_window_pattern"), path, "sliding_window_pattern", 6, kMaxLayers);
    c.local_layers = local_but_every(c.n_layers, pattern);
  }
}

// Gemma's RMSNorms scale by 1 + weight (Gemma2RMSNorm, Gemma3RMSNorm): the weights become those
// factors, as llama.cpp's converter writes them.
void gemma_norm_weights(ModelWeights& w) {
  auto add_one = [](WeightVector& v) {
    for (float& x : v) x += 1.0f;
  };
  for (LayerWeights& l : w.layers)
    for (WeightVector* v : {&l.attn_norm, &l.post_attn_norm, &l.ffn_norm, &l.post_ffn_norm, &l.q_norm, &l.k_norm})
      add_one(*v);
  add_one(w.final_norm);
}

// The first of config.json's architectures ("" when it names none).
std::string hf_architecture(const Json& j) {
  const Json* archs = j.find("architectures");
  return archs && archs->is_array() && archs->size() > 0 && archs->items()[0].is_string()
             ? archs->items()[0].as_string()
             : "";
}

// The config of the language model: config.json itself, or its text_config for a Gemma 3
// checkpoint with a vision tower (hf_arch: config.json's architecture).
const Json& text_config(const std::string& path, const Json& j, const std::string& hf_arch) {
  if (hf_arch != kGemma3Multimodal) return j;
  const Json* text = j.find("text_config");
  if (text == nullptr || !text->is_object())
    throw input_error(path, std::string(kGemma3Multimodal) + " without a text_config object");
  return *text;
}

// The language model's configuration from j (text_config(config.json)); hf_arch names the
// architecture, path how errors name the config.
ModelConfig read_config(const std::string& path, const Json& j, const std::string& hf_arch) {
  const Architecture* arch = nullptr;
  for (const Architecture& a : kArchitectures) {
    if (hf_arch == a.hf_name || (hf_arch == kGemma3Multimodal && a.arch == std::string("gemma3"))) arch = &a;
  }
  if (arch == nullptr) {
    throw input_error(path,
                      "unsupported architecture \"" + hf_arch +
                          "\" (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                          "Qwen3ForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                          "Olmo2ForCausalLM, Olmo3ForCausalLM, SmolLM3ForCausalLM, GraniteForCausalLM, "
                          "Exaone4ForCausalLM, " +
                          kGemma3Multimodal + ")");
  }
  const ShapeDefaults& d = arch->shape;
  ModelConfig c;
  c.arch = arch->arch;
  c.dim = positive_int(j.find("hidden_size"), path, "hidden_size", d.hidden, kMaxModelDim);
  c.hidden_dim = positive_int(j.find("intermediate_size"), path, "intermediate_size", d.intermediate, kMaxModelDim);
  c.n_layers = positive_int(j.find("num_hidden_layers"), path, "num_hidden_layers", d.layers, kMaxLayers);
  c.n_heads = positive_int(j.find("num_attention_heads"), path, "num_attention_heads", d.heads, kMaxHeads);
  c.n_kv_heads = positive_int(j.find("num_key_value_heads"), path, "num_key_value_heads",
                              d.kv_heads > 0 ? d.kv_heads : c.n_heads, kMaxHeads);
  const Json* head_dim = j.find("head_dim");
  const bool head_dim_given = head_dim != nullptr && !head_dim->is_null();
  c.head_dim = head_dim_given              ? positive_int(head_dim, path, "head_dim", -1, kMaxModelDim)
               : arch->default_head_dim > 0 ? arch->default_head_dim
                                            : c.dim / c.n_heads;
  check_attention_layout(c.dim, c.n_heads, c.n_kv_heads, c.head_dim, head_dim_given || arch->default_head_dim > 0,
                         kHfAttentionKeys, path);
  check_attention_width(c.n_heads, c.head_dim, path);
  c.vocab_size = positive_int(j.find("vocab_size"), path, "vocab_size", d.vocab, kMaxVocab);
  c.seq_len = positive_int(j.find("max_position_embeddings"), path, "max_position_embeddings",
                           arch->default_context, kMaxContext);
  c.rms_eps = positive_float(j.find("rms_norm_eps"), path, "rms_norm_eps", arch->default_rms_eps);
  c.rope_style = RopeStyle::RotateHalf;
  c.qkv_bias = arch->qkv_bias || flag(j.find("attention_bias"), path, "attention_bias", false);
  c.qk_norm = arch->qk_norm;
  c.tied_classifier = flag(j.find("tie_word_embeddings"), path, "tie_word_embeddings", false);
  // Llama's mlp_bias and other activations change the MLP, which the engine runs as SwiGLU.
  if (flag(j.find("mlp_bias"), path, "mlp_bias", false))
    throw input_error(path, "mlp_bias (biases on the MLP projections) is not supported");
  // RoPE over the first int(head_dim * partial_rotary_factor) dims of each head (Phi-4-mini's 0.75),
  // top-level or in transformers 5's rope_parameters: Phi-3's code rotates part of a head, the
  // others' whole heads (transformers' too), so elsewhere a factor other than 1 is refused.
  for (const Json* holder : {&j, j.find("rope_parameters")}) {
    const Json* part = holder != nullptr && holder->is_object() ? holder->find("partial_rotary_factor") : nullptr;
    if (part == nullptr || part->is_null() || (part->is_number() && part->as_number() == 1.0)) continue;
    const std::string given = part->is_number() ? number_text(part->as_number()) : type_phrase(*part);
    if (c.arch != "phi3")
      throw input_error(path, "partial_rotary_factor " + given + " is not supported (RoPE over the whole head only)");
    const double f = part->is_number() ? part->as_number() : -1.0;
    const int rotated = f > 0.0 && f < 1.0 ? static_cast<int>(c.head_dim * f) : 0;
    if (rotated < 2 || rotated % 2 != 0 || (c.head_dim - rotated) % 2 != 0)
      throw input_error(path, "partial_rotary_factor " + given +
                                  " does not rotate an even number of dims below head_dim " + std::to_string(c.head_dim));
    c.rotary_dim = rotated;
  }
  if (c.arch == "gemma3") {
    read_gemma(path, j, c);
    read_rope(path, j, c, 1000000.0f);
    return c;
  }
  if (c.arch == "gemma2") {  // one RoPE for every layer, unscaled
    read_gemma(path, j, c);
    read_rope(path, j, c, 10000.0f);
    if (!c.rope_scaling.type.empty()) throw input_error(path, "RoPE scaling is not supported in Gemma 2");
    c.rope_local_theta = c.rope_theta;
    return c;
  }
  if (const Json* act = j.find("hidden_act");
      act != nullptr && !act->is_null() && !(act->is_string() && act->as_string() == "silu")) {
    throw input_error(path, "hidden_act " +
                                (act->is_string() ? "\"" + act->as_string() + "\"" : "of another type") +
                                " is not supported (supported: silu)");
  }
  if (c.arch == "olmo3") {
    // OLMo 2's layers, most of them local: within sliding_window, by layer_types or else all but
    // every 4th, rotated at the global layers' base without their scaling (YaRN in the released
    // long-context models).
    c.sliding_window = positive_int(j.find("sliding_window"), path, "sliding_window", 4096, kMaxContext);
    c.local_layers = read_layer_types(path, j, c.n_layers, true);
    if (c.local_layers.empty()) c.local_layers = local_but_every(c.n_layers, 4);
    read_rope(path, j, c, 10000.0f, true);
    return c;
  }
  if (c.arch == "granite")  // Llama with multipliers; the embeddings' is the engine's embed_scale
    c.embed_scale = positive_float(j.find("embedding_multiplier"), path, "embedding_multiplier", 1.0f);
  if (c.arch == "exaone4") {
    read_exaone4_layers(path, j, c);
    read_rope(path, j, c, 10000.0f, true);
    return c;
  }
  if (c.arch == "smollm3") {
    // Llama's layers, every no_rope_layer_interval-th (4th) without RoPE unless no_rope_layers (1
    // where a layer rotates) lists them; a tied classifier unless told otherwise; with
    // use_sliding_window and a sliding_window, the window on the layers layer_types calls
    // sliding_attention, else on the NoPE layers (SmolLM3Config's layout).
    c.tied_classifier = flag(j.find("tie_word_embeddings"), path, "tie_word_embeddings", true);
    c.nope_layers = read_nope_layers(path, j, c.n_layers);
    const Json* window = j.find("sliding_window");
    if (flag(j.find("use_sliding_window"), path, "use_sliding_window", false) && window != nullptr &&
        !window->is_null()) {
      c.sliding_window = positive_int(window, path, "sliding_window", -1, kMaxContext);
      c.local_rope_as_global = true;
      c.local_layers = read_layer_types(path, j, c.n_layers, true);
      if (c.local_layers.empty()) c.local_layers = c.nope_layers;
    } else {
      read_layer_types(path, j, c.n_layers, false);
    }
    read_rope(path, j, c, 2000000.0f);
    return c;
  }
  // Sliding-window attention: Mistral's sliding_window (null from v0.2 on); Qwen2 and Qwen3
  // configs carry a sliding_window that applies only with use_sliding_window, and then, as
  // transformers' Qwen2Config and Qwen3Config lay it out, to the layers layer_types calls
  // sliding_attention, else to those from max_window_layers (28 where absent) on, rotated as the
  // others.
  const bool qwen = c.arch == "qwen2" || c.arch == "qwen3";
  const Json* window = j.find("sliding_window");
  const bool no_window = window != nullptr && window->is_null();  // null: no layer has one
  if (qwen && flag(j.find("use_sliding_window"), path, "use_sliding_window", false) && !no_window) {
    c.sliding_window = positive_int(window, path, "sliding_window", 4096, kMaxContext);
    c.local_rope_as_global = true;
    c.local_layers = read_layer_types(path, j, c.n_layers, true);
    if (c.local_layers.empty()) {
      const Json* from = j.find("max_window_layers");
      const double first = from == nullptr || from->is_null() ? 28.0 : from->is_number() ? from->as_number() : -1.0;
      if (!(first >= 0 && first <= kMaxContext) || first != static_cast<double>(static_cast<int>(first)))
        throw input_error(path, "max_window_layers is " + (from->is_number() ? number_text(first) : type_phrase(*from)) +
                                    ", expected an integer from 0");
      c.local_layers.assign(c.n_layers, 0);
      for (int l = static_cast<int>(first); l < c.n_layers; ++l) c.local_layers[l] = 1;
    }
    read_rope(path, j, c, 10000.0f);
    return c;
  }
  if (window != nullptr && !no_window && !qwen) {
    c.sliding_window = positive_int(window, path, "sliding_window", -1, kMaxContext);
    if (c.sliding_window >= c.seq_len) c.sliding_window = 0;  // never shorter than the context
  }
  // transformers writes each layer's attention kind (Qwen2, Qwen3); all must be full attention.
  read_layer_types(path, j, c.n_layers, false);
  read_rope(path, j, c, 10000.0f);
  return c;
}

}  // namespace

Model load_hf_model(const std::string& folder, ModelParts parts) {
  const fs::path dir(folder);
  const std::string config_path = (dir / "config.json").string();
  if (path_kind(config_path) == PathKind::Missing)
    throw input_error(folder, "not a model folder (no config.json)");
  const Json config = Json::parse_file(config_path);
  const std::string hf_arch = hf_architecture(config);
  const bool multimodal = hf_arch == kGemma3Multimodal;
  const Json& text = text_config(config_path, config, hf_arch);
  const std::string text_path = multimodal ? config_path + " (text_config)" : config_path;
  ModelConfig c = read_config(text_path, text, hf_arch);
  add_end_ids(config_path, config, c.vocab_size, c.end_ids);
  if (multimodal) add_end_ids(text_path, text, c.vocab_size, c.end_ids);
  if (const std::string gen = (dir / "generation_config.json").string(); path_kind(gen) != PathKind::Missing)
    add_end_ids(gen, Json::parse_file(gen), c.vocab_size, c.end_ids);
  c.name = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
  TensorSet tensors(dir);
  // Where the language model's tensors are: model.*, or a multimodal checkpoint's language model.
  std::string model = "model.", lm_head = "lm_head.weight";
  if (multimodal) {
    const bool hub = tensors.has("language_model.model.embed_tokens.weight");
    model = hub ? "language_model.model." : "model.language_model.";
    if (hub) lm_head = "language_model.lm_head.weight";
  }
  check_layer_count(c.n_layers, tensors.names(), model + "layers.", text_path, "num_hidden_layers");
  // A classifier the checkpoint holds is the one it runs, tie_word_embeddings or not, as
  // transformers 5 does ("both are present ... we will NOT tie them"). A tied model saved by
  // transformers has none: the shared tensor is written once, as the embedding.
  if (tensors.has(lm_head)) c.tied_classifier = false;
  if (!c.tied_classifier && !tensors.has(lm_head))
    throw input_error(text_path, "tie_word_embeddings is false or absent but the checkpoint has no " + lm_head);
  // HF Llama's attention_bias also puts a bias on o_proj, which the engine does not apply.
  for (int i = 0; c.qkv_bias && i < c.n_layers; ++i) {
    const std::string bias = model + "layers." + std::to_string(i) + ".self_attn.o_proj.bias";
    if (tensors.has(bias)) {
      throw input_error(config_path, "attention_bias with a bias on o_proj (" + bias +
                                         ") is not supported");
    }
  }

  const bool gemma = c.arch == "gemma2" || c.arch == "gemma3", phi3 = c.arch == "phi3";
  const bool olmo = c.arch == "olmo2" || c.arch == "olmo3";
  const bool post_norms_only = olmo || c.arch == "exaone4";  // no norm before the blocks, one after each
  // Gemma scales the scores by query_pre_attn_scalar^-1/2, Granite by its attention_multiplier,
  // the engine by head_dim^-1/2: the queries take the difference (scale_queries).
  const bool granite = c.arch == "granite";
  const float query_scale =
      gemma     ? std::sqrt(c.head_dim / positive_float(text.find("query_pre_attn_scalar"), text_path,
                                                        "query_pre_attn_scalar", 256.0f))
      : granite ? positive_float(text.find("attention_multiplier"), text_path, "attention_multiplier", 1.0f) *
                      std::sqrt(static_cast<float>(c.head_dim))
                : 1.0f;

  Model m;
  m.config = c;
  m.path = folder;
  m.format = "hf";
  m.weight_type = tensors.weight_type();
  if (parts == ModelParts::ConfigOnly) return m;
  const uint64_t D = c.dim, H = c.hidden_dim, Q = c.q_dim(), KV = c.kv_dim(), V = c.vocab_size;
  ModelWeights& w = m.weights;
  tensors.read(w.token_embedding, model + "embed_tokens.weight", {V, D});
  w.layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = model + "layers." + std::to_string(i) + ".";
    LayerWeights& l = w.layers[i];
    if (!post_norms_only) tensors.read(l.attn_norm, p + "input_layernorm.weight", {D});
    if (phi3) {  // q, k and v stacked in one qkv_proj [Q + 2 KV, D]
      tensors.read_stacked(p + "self_attn.qkv_proj.weight",
                           {{&l.wq, c.q_dim()}, {&l.wk, c.kv_dim()}, {&l.wv, c.kv_dim()}}, D);
    } else {
      tensors.read(l.wq, p + "self_attn.q_proj.weight", {Q, D});
      tensors.read(l.wk, p + "self_attn.k_proj.weight", {KV, D});
      tensors.read(l.wv, p + "self_attn.v_proj.weight", {KV, D});
    }
    tensors.read(l.wo, p + "self_attn.o_proj.weight", {D, Q});
    if (c.qkv_bias) {
      tensors.read(l.bq, p + "self_attn.q_proj.bias", {Q});
      tensors.read(l.bk, p + "self_attn.k_proj.bias", {KV});
      tensors.read(l.bv, p + "self_attn.v_proj.bias", {KV});
    }
    if (c.qk_norm) {  // OLMo normalises all of a token's query (key) heads together
      tensors.read(l.q_norm, p + "self_attn.q_norm.weight", {olmo ? Q : c.head_dim});
      tensors.read(l.k_norm, p + "self_attn.k_norm.weight", {olmo ? KV : c.head_dim});
    }
    if (post_norms_only) {  // the blocks read the residual as it is
      tensors.read(l.post_attn_norm, p + "post_attention_layernorm.weight", {D});
      tensors.read(l.post_ffn_norm, p + "post_feedforward_layernorm.weight", {D});
    } else if (gemma) {  // Gemma's post_attention_layernorm normalises the attention's output
      tensors.read(l.post_attn_norm, p + "post_attention_layernorm.weight", {D});
      tensors.read(l.ffn_norm, p + "pre_feedforward_layernorm.weight", {D});
      tensors.read(l.post_ffn_norm, p + "post_feedforward_layernorm.weight", {D});
    } else {
      tensors.read(l.ffn_norm, p + "post_attention_layernorm.weight", {D});
    }
    if (phi3) {  // gate and up stacked in one gate_up_proj [2 H, D]
      tensors.read_stacked(p + "mlp.gate_up_proj.weight", {{&l.w_gate, c.hidden_dim}, {&l.w_up, c.hidden_dim}}, D);
    } else {
      tensors.read(l.w_gate, p + "mlp.gate_proj.weight", {H, D});
      tensors.read(l.w_up, p + "mlp.up_proj.weight", {H, D});
    }
    tensors.read(l.w_down, p + "mlp.down_proj.weight", {D, H});
  }
  tensors.read(w.final_norm, model + "norm.weight", {D});
  if (!c.tied_classifier) tensors.read(w.classifier, lm_head, {V, D});
  tensors.finish();
  if (gemma) gemma_norm_weights(w);
  scale_queries(m, query_scale);
  permute_partial_rotary(m);
  if (granite) {  // Granite's other multipliers, folded into the weights (embedding_multiplier: embed_scale)
    scale_block_outputs(m, positive_float(text.find("residual_multiplier"), text_path, "residual_multiplier", 1.0f));
    scale_logits(m, positive_float(text.find("logits_scaling"), text_path, "logits_scaling", 1.0f));
  }
  return m;
}

}  // namespace kvs
