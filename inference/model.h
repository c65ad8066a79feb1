// Llama-family model description: hyper-parameters and fp32 weights, whatever file they came from.
// Loaders (llama2.c .bin, GGUF, HF safetensors) fill a Model; the engine only reads it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inference/huge_pages.h"

namespace kvs {

// How query/key pairs are rotated. llama2.c and GGUF store q/k so that pairs are adjacent
// (x[2i], x[2i+1]); HF checkpoints pair x[i] with x[i + head_dim/2] ("rotate_half").
enum class RopeStyle { Interleaved, RotateHalf };

struct RopeScaling {
  std::string type;                  // "" (none), "linear" or "llama3"
  float factor = 1.0f;
  float low_freq_factor = 1.0f;      // llama3 only
  float high_freq_factor = 4.0f;     // llama3 only
  int original_max_position = 8192;  // llama3 only
};

struct ModelConfig {
  std::string arch = "llama";  // llama | mistral | qwen2
  std::string name;            // human-readable model name
  int dim = 0;                 // hidden size
  int hidden_dim = 0;          // FFN inner size
  int n_layers = 0;
  int n_heads = 0;             // query heads
  int n_kv_heads = 0;          // key/value heads (GQA when < n_heads)
  int head_dim = 0;
  int vocab_size = 0;
  int seq_len = 0;             // maximum context
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  RopeStyle rope_style = RopeStyle::Interleaved;
  RopeScaling rope_scaling;
  bool qkv_bias = false;       // Qwen2
  bool tied_classifier = true; // classifier shares the token embedding
  // Sliding-window attention (Mistral-7B-v0.1): the query at q attends keys k > q - sliding_window
  // only; 0 = none.
  int sliding_window = 0;

  // The loaders bound n_heads * head_dim (check_attention_width), so these fit an int.
  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int group() const { return n_heads / n_kv_heads; }
};

struct LayerWeights {
  WeightVector attn_norm;  // [dim]
  WeightVector wq;         // [n_heads*head_dim, dim]
  WeightVector wk;         // [n_kv_heads*head_dim, dim]
  WeightVector wv;         // [n_kv_heads*head_dim, dim]
  WeightVector wo;         // [dim, n_heads*head_dim]
  WeightVector bq;         // [n_heads*head_dim] or empty
  WeightVector bk;         // [n_kv_heads*head_dim] or empty
  WeightVector bv;         // [n_kv_heads*head_dim] or empty
  WeightVector ffn_norm;   // [dim]
  WeightVector w_gate;     // [hidden_dim, dim]  (llama2.c w1)
  WeightVector w_up;       // [hidden_dim, dim]  (llama2.c w3)
  WeightVector w_down;     // [dim, hidden_dim]  (llama2.c w2)
};

struct ModelWeights {
  WeightVector token_embedding;  // [vocab_size, dim]
  std::vector<LayerWeights> layers;    // [n_layers]
  WeightVector final_norm;       // [dim]
  WeightVector classifier;       // [vocab_size, dim]; empty when tied to token_embedding
};

struct Model {
  ModelConfig config;
  ModelWeights weights;
  std::string path;    // file or folder it was loaded from
  std::string format;  // "llama2c" | "gguf" | "hf"
  std::string weight_type;  // storage type on disk, e.g. "F32", "Q4_1 (mixed)"

  const WeightVector& classifier() const {
    return config.tied_classifier ? weights.token_embedding : weights.classifier;
  }
  // Bytes of fp32 weights the forward pass reads per decoded token.
  std::size_t weight_bytes_per_token() const;
  // Weights the model holds: the embedding, every layer's tensors, the final norm and the
  // classifier when it is separate (a tied one is the embedding, counted once).
  std::size_t parameter_count() const;
};

// RoPE inverse frequencies [head_dim/2] with the model's scaling applied. Throws InputError for
// a scaling type it does not know.
std::vector<float> rope_inv_freq(const Model& model);

}  // namespace kvs
