// Checks the model loaders share: plausibility bounds on hyper-parameters, and a config's layer
// count against the layer tensors the checkpoint actually holds (checked before anything is
// sized from the count).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kvs {

// Bounds on hyper-parameters, far above any Llama-family model and low enough that sizes computed
// from them cannot overflow.
constexpr int64_t kMaxModelDim = int64_t{1} << 20;  // dim, hidden_dim, head_dim, n_heads*head_dim
constexpr int64_t kMaxHeads = int64_t{1} << 16;     // n_heads, n_kv_heads
constexpr int64_t kMaxLayers = int64_t{1} << 16;
constexpr int64_t kMaxContext = int64_t{1} << 24;   // seq_len and other positions
constexpr int64_t kMaxVocab = int64_t{1} << 24;

// Throws InputError naming `where` unless n_heads * head_dim (computed in 64 bits) is at most
// kMaxModelDim, so that ModelConfig::q_dim() and kv_dim() fit an int.
void check_attention_width(int64_t n_heads, int64_t head_dim, const std::string& where);

// Names a loader's file gives the attention hyper-parameters, for check_attention_layout.
struct AttentionKeys {
  std::string dim, n_heads, n_kv_heads, head_dim;
};

// Throws InputError naming `where` and the one thing wrong, checked in this order: with no head_dim
// in the file (`head_dim_given` false), dim must be a multiple of n_heads (head_dim = dim /
// n_heads); n_heads a multiple of n_kv_heads; head_dim even (RoPE rotates pairs of features).
void check_attention_layout(int64_t dim, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                            bool head_dim_given, const AttentionKeys& keys, const std::string& where);

// Throws InputError "<where>: <key> N does not match the M layers whose tensors ..." unless the
// tensor names "<prefix><i>.<rest>" cover exactly the layers 0 .. n_layers-1 (the largest i is
// n_layers-1; a layer missing in between is reported by the tensor reads).
void check_layer_count(int64_t n_layers, const std::vector<std::string>& tensor_names,
                       const std::string& prefix, const std::string& where, const std::string& key);

}  // namespace kvs
