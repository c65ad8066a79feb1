// The model dimensions analyses need (no weights): layers, heads, GQA grouping.
#pragma once

namespace kvs {

struct ModelConfig;

struct ModelShape {
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // KV heads
  int head_dim = 0;
  int group() const { return n_kv_heads > 0 ? n_heads / n_kv_heads : 1; }
  // KV bytes of one position for one (layer, KV head): K and V, fp32.
  int kv_bytes_per_entry() const { return 2 * head_dim * 4; }
};

// The shape of a model of this configuration.
ModelShape shape_of(const ModelConfig& c);

}  // namespace kvs
