// Model helpers: the weight traffic of one decoded token (for the bandwidth limit), the parameter
// count, and the RoPE frequencies the model's scaling asks for.
#include "inference/model.h"

#include "inference/errors.h"
#include "kernels/rope.h"

namespace kvs {

std::vector<float> rope_inv_freq(const Model& model) {
  const ModelConfig& c = model.config;
  std::vector<float> inv_freq = ops::rope_inv_freq(c.head_dim, c.rope_theta);  // [head_dim/2]
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "linear") {
    ops::rope_scale_linear(inv_freq, s.factor);
  } else if (s.type == "llama3") {
    ops::rope_scale_llama3(inv_freq, s.factor, s.low_freq_factor, s.high_freq_factor,
                           s.original_max_position);
  } else if (!s.type.empty() && s.type != "none") {
    throw input_error(model.path.empty() ? c.name : model.path,
                      "unsupported RoPE scaling type '" + s.type + "'");
  }
  return inv_freq;
}

namespace {

std::size_t layer_weights(const std::vector<LayerWeights>& layers) {
  std::size_t n = 0;
  for (const LayerWeights& l : layers) {
    n += l.attn_norm.size() + l.wq.size() + l.wk.size() + l.wv.size() + l.wo.size() +
         l.bq.size() + l.bk.size() + l.bv.size() + l.ffn_norm.size() + l.w_gate.size() +
         l.w_up.size() + l.w_down.size();
  }
  return n;
}

}  // namespace

std::size_t Model::weight_bytes_per_token() const {
  const std::size_t floats = static_cast<std::size_t>(config.dim) +  // the token's embedding row
                             layer_weights(weights.layers) + weights.final_norm.size() +
                             classifier().size();
  return floats * sizeof(float);
}

std::size_t Model::parameter_count() const {
  return weights.token_embedding.size() + layer_weights(weights.layers) +
         weights.final_norm.size() + (config.tied_classifier ? 0 : weights.classifier.size());
}

}  // namespace kvs
