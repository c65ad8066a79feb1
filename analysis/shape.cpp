// ModelShape from a model's configuration (analysis/shape.h).
#include "analysis/shape.h"

#include "inference/model.h"

namespace kvs {

ModelShape shape_of(const ModelConfig& c) { return {c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim}; }

}  // namespace kvs
