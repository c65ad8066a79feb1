// Model helpers: the weight traffic of one decoded token (for the bandwidth limit).
#include "inference/model.h"

namespace kvs {

std::size_t Model::weight_bytes_per_token() const {
  std::size_t floats = static_cast<std::size_t>(config.dim);  // the token's embedding row
  for (const LayerWeights& l : weights.layers) {
    floats += l.attn_norm.size() + l.wq.size() + l.wk.size() + l.wv.size() + l.wo.size() +
              l.bq.size() + l.bk.size() + l.bv.size() + l.ffn_norm.size() + l.w_gate.size() +
              l.w_up.size() + l.w_down.size();
  }
  floats += weights.final_norm.size() + classifier().size();
  return floats * sizeof(float);
}

}  // namespace kvs
