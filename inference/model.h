// Llama-family model description: hyper-parameters and fp32 weights, whatever file they came from.
// Loaders (llama2.c .bin, GGUF, HF safetensors) fill a Model; the engine only reads it.
#pragma once
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "inference/huge_pages.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "kernels/softcap.h"

namespace kvs {

// How query/key pairs are rotated. llama2.c and GGUF store q/k so that pairs are adjacent
// (x[2i], x[2i+1]); HF checkpoints pair x[i] with x[i + head_dim/2] ("rotate_half").
enum class RopeStyle { Interleaved, RotateHalf };

// The FFN's gated activation: SwiGLU, silu(gate) * up (Llama, Qwen, Mistral), or GeGLU with
// GELU's tanh approximation, gelu_tanh(gate) * up (Gemma).
enum class Activation { Silu, GeluTanh };

struct RopeScaling {
  std::string type;                  // "" (none), "linear", "llama3", "yarn" or "longrope"
  float factor = 1.0f;
  float low_freq_factor = 1.0f;      // llama3 only
  float high_freq_factor = 4.0f;     // llama3 only
  int original_max_position = 8192;  // llama3, yarn and longrope
  // longrope (Phi-3's 128K models): each frequency divided by its factor, [head_dim/2] each; the
  // short factors rotate a forward pass that ends within original_max_position, the long ones one
  // that ends past it (ModelConfig::long_rope), as transformers chooses them.
  std::vector<float> short_factor, long_factor;
  float beta_fast = 32.0f;           // yarn only: ops::rope_scale_yarn
  float beta_slow = 1.0f;            // yarn only
  bool truncate = true;              // yarn only
  // What the rotation scales queries and keys by (yarn's attention factor; 1 otherwise): the RoPE
  // table's scale, so every score grows by its square, as transformers scales cos and sin.
  float attention_factor = 1.0f;
};

// The RoPE tables a model's layers rotate with: the global layers' (every layer's in most models),
// LongRoPE's long factors', the local layers' and the NoPE layers' (cos 1, sin 0: no rotation).
enum class RopeTableKind { Global, Long, Local, None };
inline constexpr int kRopeTableKinds = 4;

struct ModelConfig {
  // llama | mistral | qwen2 | qwen3 | phi3 | gemma2 | gemma3 | olmo2 | olmo3 | smollm3 | granite | exaone4
  std::string arch = "llama";
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
  // Dims of each head RoPE rotates (HF's partial_rotary_factor: Phi-4-mini's 96 of 128); 0: all.
  // The engine rotates whole heads: frequencies past rotary_dim / 2 are 0 (cos 1, sin 0), and a
  // rotate-half model's q/k rows are permuted on load (permute_partial_rotary) so that its rotated
  // pairs (i, i + rotary_dim/2) become (i, i + head_dim/2).
  int rotary_dim = 0;
  bool qkv_bias = false;       // Qwen2
  // Queries and keys RMS-normalised before RoPE: each head on its own (Qwen3, Gemma 3) or all
  // heads of a token together (OLMo 2), as LayerWeights::q_norm's width says.
  bool qk_norm = false;
  Activation activation = Activation::Silu;
  float embed_scale = 1.0f;    // token embeddings multiplied by this (Gemma: sqrt(dim))
  bool tied_classifier = true; // classifier shares the token embedding
  // Sliding-window attention (Mistral-7B-v0.1): the query at q attends keys k > q - sliding_window
  // only; 0 = none.
  int sliding_window = 0;
  // Soft caps (Gemma 2; 0: none): each attention score becomes attn_softcap * tanh(score /
  // attn_softcap) before its softmax, each logit final_softcap * tanh(logit / final_softcap).
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  // Layers of two kinds (Gemma 2 and 3): [n_layers], 1 where the layer is local (attends within
  // sliding_window, rotates with rope_local_theta, unscaled), 0 where it is global (every key,
  // rope_theta with rope_scaling). Empty: every layer alike, windowed where sliding_window > 0.
  std::vector<uint8_t> local_layers;
  float rope_local_theta = 10000.0f;
  // The local layers rotate as the global ones do (rope_theta with rope_scaling: EXAONE 4), not
  // with rope_local_theta unscaled.
  bool local_rope_as_global = false;
  // Layers without positions (SmolLM3's NoPE layers): [n_layers], 1 where a layer rotates neither
  // queries nor keys. Empty: every layer rotates.
  std::vector<uint8_t> nope_layers;
  // Tokens that end a text besides the tokenizer's EOS and BOS: an HF folder's eos_token_id lists
  // (config.json, generation_config.json), a GGUF file's end-of-turn and end-of-message tokens.
  std::vector<int> end_ids;

  // The loaders bound n_heads * head_dim (check_attention_width), so these fit an int.
  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  int group() const { return n_heads / n_kv_heads; }
  int rot_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  bool local(int layer) const { return !local_layers.empty() && local_layers[layer] != 0; }
  bool nope(int layer) const { return !nope_layers.empty() && nope_layers[layer] != 0; }
  // Layer `layer`'s sliding window (0: none).
  int window(int layer) const { return local_layers.empty() || local(layer) ? sliding_window : 0; }
  // Whether a forward pass over positions up to end - 1 rotates with LongRoPE's long factors.
  bool long_rope(int end) const {
    return rope_scaling.type == "longrope" && end > rope_scaling.original_max_position;
  }
  // Whether some layer rotates with tables of `kind` (the engines make only those).
  bool has_rope_table(RopeTableKind kind) const {
    switch (kind) {
      case RopeTableKind::Global: return true;
      case RopeTableKind::Long: return rope_scaling.type == "longrope";
      case RopeTableKind::Local: return !local_layers.empty();
      case RopeTableKind::None: return !nope_layers.empty();
    }
    return false;
  }
  // The table layer `layer` rotates with in a forward pass that uses LongRoPE's long factors or not.
  RopeTableKind rope_table_of(int layer, bool long_factors) const {
    return nope(layer)      ? RopeTableKind::None
           : local(layer)   ? RopeTableKind::Local
           : long_factors   ? RopeTableKind::Long
                            : RopeTableKind::Global;
  }
  // How a query-key dot product becomes an attention score: times head_dim^-1/2, soft-capped.
  ops::Scoring scoring() const { return {1.0f / std::sqrt(static_cast<float>(head_dim)), attn_softcap}; }
};

// A weight matrix W[rows, cols] kept packed in panels (kernels/matmul.h), the layout the CPU
// products stream. A loaded model's matrices share one allocation on huge pages (PackQueue):
// with one of their own, those under 2 MiB (SmolLM2's q, k, v and output projections) sat on
// small pages and read at 0.92 of the probe where on huge pages they read 0.98. A copy of a
// matrix copies its panels into storage of its own. A matrix of a quantized, fp16 or bf16
// tensor in a format kernels/quant_panels.h reads keeps its quantized panels instead (`kind`),
// which expand to the fp32 panels' weights bit for bit.
struct PackedMatrix {
  int rows = 0;
  int cols = 0;
  // the panels at offset: fp32 [panel_count(rows), cols, kPanelRows], or the quantized panels'
  // quant_bytes(kind, rows, cols) bytes
  std::shared_ptr<WeightVector> store;
  std::size_t offset = 0;
  ops::QuantKind kind = ops::QuantKind::None;
  // Quantized: every weight times this (ops::QuantPanels::scale), a multiplier of the model's
  // that the stored 16-bit weights cannot hold exactly (see scale).
  float factor = 1.0f;

  PackedMatrix() = default;
  PackedMatrix(const PackedMatrix& other);
  PackedMatrix& operator=(const PackedMatrix& other);
  PackedMatrix(PackedMatrix&&) noexcept = default;
  PackedMatrix& operator=(PackedMatrix&&) noexcept = default;

  // W from row-major w[rows * cols], in storage of its own.
  static PackedMatrix pack(const float* w, int rows, int cols);
  static PackedMatrix pack(const WeightVector& w, int rows, int cols);
  bool empty() const { return rows == 0; }
  std::size_t size() const { return static_cast<std::size_t>(rows) * cols; }  // weights, not padding
  std::size_t panel_floats() const;                                           // padding included
  bool quantized() const { return kind != ops::QuantKind::None; }
  // Bytes of the panels, padding included: what a product streams.
  std::size_t bytes() const;
  // The fp32 panels; null where quantized.
  const float* data() const { return store && !quantized() ? store->data() + offset : nullptr; }
  // The fp32 panels to edit; a quantized matrix is expanded to fp32 panels first.
  std::span<float> panels();
  // The panels as the products read them.
  ops::PanelWeights weights() const;
  WeightVector unpacked() const;     // row-major [rows, cols]
  // W becomes W * f (a multiplier of the model's folded into its weights): fp32 panels weight by
  // weight; quantized ones keep their kind, scaled by ops::quant_scale where it can (a block
  // kind's weights then within a rounding or two of w f; a 16-bit kind's exactly by a power of
  // two), else (a 16-bit kind, f not a power of two) with `factor` taking f: each weight still
  // reads as the fp32 w f, and decode's products multiply their sums by it.
  void scale(float f);
  // Row r becomes the old row order[r] (order: a permutation of 0..rows-1): fp32 panels in place,
  // quantized ones (which keep their kind) in storage of their own.
  void permute_rows(std::span<const int> order);
  void row(int r, float* out) const;  // out[cols] = W[r, :]
  bool operator==(const PackedMatrix& other) const;  // the same shape and weights
};

// The matrices a loader reads, packed into one allocation: each added with where its row-major
// weights come from, then all read and packed by pack(), one at a time through one scratch buffer
// (a model's weights plus its largest matrix at the peak, not twice the model).
class PackQueue {
 public:
  // Writes W[rows, cols] row-major into the buffer given.
  using Fill = std::function<void(float* rows_major)>;
  // A matrix of a stack and its rows.
  struct Part {
    PackedMatrix* dst;
    int rows;
  };
  void add(PackedMatrix& dst, int rows, int cols, Fill fill);
  // W[rows, cols] row-major at `rows_major`, which must stay valid until pack().
  void add(PackedMatrix& dst, int rows, int cols, const float* rows_major);
  // The same, kept quantized: `blocks` holds W in `format` (row-major, valid until
  // pack()); `fill` its fp32 weights, against which pack() checks every quantized weight (a
  // matrix where one differs is packed in fp32), and which it never asks for in a format
  // that widens exactly (ops::quant_exact: F16, BF16).
  void add_quantized(PackedMatrix& dst, int rows, int cols, ops::QuantFormat format, const uint8_t* blocks,
                     Fill fill);
  // Matrices stored stacked by rows in one tensor (Phi-3's q/k/v and gate/up): `fill` writes the
  // whole stack [sum of the parts' rows, cols], read once; each part is packed from its rows,
  // kept quantized where `format` is given (`blocks`: the stack in it, as add_quantized's).
  void add_stacked(std::vector<Part> parts, int cols, Fill fill, std::optional<ops::QuantFormat> format = {},
                   const uint8_t* blocks = nullptr);
  // Throws InputError naming `model` (its path) when the host has too little memory for them.
  void pack(const std::string& model);

 private:
  struct Entry {
    std::vector<Part> parts;  // one part but for a stack
    int cols;
    Fill fill;                    // or
    const float* rows_major;      // when fill is empty (null otherwise)
    std::optional<ops::QuantFormat> format;  // kept quantized (with a fill)
    const uint8_t* blocks = nullptr;         // with format: the parts' blocks, one after another
    int rows() const;             // the parts' rows, in all
  };
  std::vector<Entry> entries_;
};

struct LayerWeights {
  WeightVector attn_norm;  // [dim], or empty where the block reads the residual as it is (OLMo 2)
  PackedMatrix wq;         // [n_heads*head_dim, dim]
  PackedMatrix wk;         // [n_kv_heads*head_dim, dim]
  PackedMatrix wv;         // [n_kv_heads*head_dim, dim]
  PackedMatrix wo;         // [dim, n_heads*head_dim]
  WeightVector bq;         // [n_heads*head_dim] or empty
  WeightVector bk;         // [n_kv_heads*head_dim] or empty
  WeightVector bv;         // [n_kv_heads*head_dim] or empty
  // QK-norm weights or empty: [head_dim], every query head normalised on its own (Qwen3, Gemma 3),
  // or [n_heads*head_dim], a token's query heads normalised together (OLMo 2)
  WeightVector q_norm;
  WeightVector k_norm;     // [head_dim] or [n_kv_heads*head_dim]: the same for the keys
  // [dim] each or empty: the attention's and the FFN's outputs normalised before the residual add
  // (Gemma 2 and 3, OLMo 2)
  WeightVector post_attn_norm;
  WeightVector post_ffn_norm;
  WeightVector ffn_norm;   // [dim], or empty as attn_norm
  PackedMatrix w_gate;     // [hidden_dim, dim]  (llama2.c w1)
  PackedMatrix w_up;       // [hidden_dim, dim]  (llama2.c w3)
  PackedMatrix w_down;     // [dim, hidden_dim]  (llama2.c w2)

  // The layer's weight matrices.
  std::array<const PackedMatrix*, 7> matrices() const { return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down}; }
};

struct ModelWeights {
  PackedMatrix token_embedding;      // [vocab_size, dim]; a token's row by row()
  std::vector<LayerWeights> layers;  // [n_layers]
  WeightVector final_norm;           // [dim]
  PackedMatrix classifier;           // [vocab_size, dim]; empty when tied to token_embedding
};

// What a loader reads: the whole model, or its configuration alone (ModelWeights left empty),
// checked as for a whole load: what a tokenizer and the chat format need (`kvscope tokenize`),
// without the time and memory the weights take.
enum class ModelParts { All, ConfigOnly };

struct Model {
  ModelConfig config;
  ModelWeights weights;
  std::string path;    // file or folder it was loaded from
  std::string format;  // "llama2c" | "gguf" | "hf"
  std::string weight_type;  // storage type on disk, e.g. "F32", "Q4_1 (mixed)"

  const PackedMatrix& classifier() const {
    return config.tied_classifier ? weights.token_embedding : weights.classifier;
  }
  // Bytes of weights the forward pass reads per decoded token, as stored (fp32, 16-bit or
  // quantized panels; their padding rows included: they are streamed too).
  std::size_t weight_bytes_per_token() const;
  // The weight matrices (the embedding, each layer's, a separate classifier), and how many of
  // them are kept in their file's encoding (kernels/quant_panels.h: quantized or 16-bit) rather
  // than in fp32.
  struct MatrixCount {
    int matrices = 0;
    int as_stored = 0;
  };
  MatrixCount matrix_count() const;
  // Weights the model holds: the embedding, every layer's tensors, the final norm and the
  // classifier when it is separate (a tied one is the embedding, counted once).
  std::size_t parameter_count() const;
};

// Layer kinds [n_layers] as ModelConfig::local_layers holds them: every layer local but each
// every-th (the every-th, 2*every-th, ..., counting from 1), the pattern Gemma, OLMo 3 and EXAONE 4
// take where their configs list no layer types.
inline std::vector<uint8_t> local_but_every(int n_layers, int every) {
  std::vector<uint8_t> local(n_layers);
  for (int l = 0; l < n_layers; ++l) local[l] = (l + 1) % every != 0;
  return local;
}

// Multiplies every query by `factor` (1: nothing): through the q_norm weights where the model has
// them, else the rows of wq and bq. Loaders fold a checkpoint's own score scale (Gemma's
// query_pre_attn_scalar^-1/2) into the queries this way, since the engine scales by head_dim^-1/2.
void scale_queries(Model& model, float factor);

// A partially rotated rotate-half model (ModelConfig::rotary_dim < head_dim) laid out for whole-head
// rotation: every query and key head's dims permuted (the rows of wq, wk, their biases and QK-norm
// weights) so that the rotated pairs (i, i + rotary_dim/2) sit at (i, i + head_dim/2) and the
// unrotated dims fill the rest; attention scores are unchanged. Interleaved models need none.
void permute_partial_rotary(Model& model);

// Granite's multipliers folded into the weights, so that the engine runs it as Llama: each block's
// output times `residual` (the rows of wo and w_down), the logits divided by `logits_divisor` (the
// final norm's weights). 1 and 1: nothing.
void scale_block_outputs(Model& model, float residual);
void scale_logits(Model& model, float logits_divisor);

// The model's RoPE table of `kind` (no positions reserved yet): frequencies [head_dim/2], 0 past
// rotary_dim / 2, and the scale of the rotated pairs. Global: rope_theta with rope_scaling (LongRoPE's
// short factors) and its attention factor; Long: LongRoPE's long factors; Local: rope_local_theta
// unscaled, or as Global where local_rope_as_global; None: no rotation. An empty table for a kind
// the model has no layers of. Throws InputError for a scaling type it does not know.
ops::RopeTable rope_table(const Model& model, RopeTableKind kind);

}  // namespace kvs
