// Model helpers: packed weight matrices, the weight traffic of one decoded token (for the bandwidth limit), the parameter
// count, and the RoPE frequencies the model's scaling asks for.
#include "inference/model.h"

#include <stdexcept>
#include <string>

#include "inference/errors.h"
#include "kernels/matmul.h"
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

PackedMatrix PackedMatrix::pack(const float* w, int rows, int cols) {
  PackedMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.panels.resize(ops::packed_floats(rows, cols));
  ops::pack_panels(m.panels.data(), w, rows, cols);
  return m;
}

PackedMatrix PackedMatrix::pack(const WeightVector& w, int rows, int cols) {
  if (w.size() != static_cast<std::size_t>(rows) * cols)
    throw std::logic_error("PackedMatrix::pack: " + std::to_string(w.size()) + " floats for a [" +
                           std::to_string(rows) + ", " + std::to_string(cols) + "] matrix");
  return pack(w.data(), rows, cols);
}

WeightVector PackedMatrix::unpacked() const {
  WeightVector w(size());
  ops::unpack_panels(w.data(), panels.data(), rows, cols);
  return w;
}

void PackedMatrix::row(int r, float* out) const { ops::panel_row(out, panels.data(), cols, r); }

WeightVector& PackQueue::stage(PackedMatrix& dst, int rows, int cols) {
  staged_.push_back({&dst, rows, cols, {}});
  return staged_.back().w;
}

// Tensors on the OpenMP threads, one each (their pages first touched by the thread packing them).
void PackQueue::pack() {
  const long n = static_cast<long>(staged_.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (long i = 0; i < n; ++i) {
    Staged& s = staged_[i];
    *s.dst = PackedMatrix::pack(s.w, s.rows, s.cols);
    WeightVector().swap(s.w);
  }
  staged_.clear();
}

namespace {

// Floats of the layers' tensors: `packed` counts the matrices' panels (padding included).
std::size_t layer_floats(const std::vector<LayerWeights>& layers, bool packed) {
  auto m = [packed](const PackedMatrix& w) { return packed ? w.panels.size() : w.size(); };
  std::size_t n = 0;
  for (const LayerWeights& l : layers) {
    n += l.attn_norm.size() + m(l.wq) + m(l.wk) + m(l.wv) + m(l.wo) + l.bq.size() + l.bk.size() +
         l.bv.size() + l.ffn_norm.size() + m(l.w_gate) + m(l.w_up) + m(l.w_down);
  }
  return n;
}

}  // namespace

std::size_t Model::weight_bytes_per_token() const {
  const std::size_t floats = static_cast<std::size_t>(config.dim) +  // the token's embedding row
                             layer_floats(weights.layers, true) + weights.final_norm.size() +
                             classifier().panels.size();
  return floats * sizeof(float);
}

std::size_t Model::parameter_count() const {
  return weights.token_embedding.size() + layer_floats(weights.layers, false) +
         weights.final_norm.size() + (config.tied_classifier ? 0 : weights.classifier.size());
}

}  // namespace kvs
