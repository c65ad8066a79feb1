// Model helpers: packed weight matrices, the weight traffic of one decoded token (for the
// bandwidth limit), the parameter count, the queries' scale, and the RoPE frequencies the model's
// scaling asks for.
#include "inference/model.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "inference/errors.h"
#include "inference/host_memory.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"

namespace kvs {

void scale_queries(Model& model, float factor) {
  if (factor == 1.0f) return;
  auto scale = [factor](std::span<float> v) {
    for (float& x : v) x *= factor;
  };
  for (LayerWeights& l : model.weights.layers) {
    if (!l.q_norm.empty()) {
      scale(l.q_norm);
    } else {
      l.wq.scale(factor);
      scale(l.bq);
    }
  }
}

namespace {

// LongRoPE's two factor sets must each give every frequency one (InputError naming the model).
void check_longrope_factors(const Model& model) {
  const ModelConfig& c = model.config;
  const std::size_t half = static_cast<std::size_t>(c.rot_dim() / 2);
  if (c.rope_scaling.short_factor.size() != half || c.rope_scaling.long_factor.size() != half)
    throw input_error(model.path.empty() ? c.name : model.path,
                      "LongRoPE needs " + std::to_string(half) + " short and long factors (rotated dims / 2), not " +
                          std::to_string(c.rope_scaling.short_factor.size()) + " and " +
                          std::to_string(c.rope_scaling.long_factor.size()));
}

}  // namespace

void permute_partial_rotary(Model& model) {
  const ModelConfig& c = model.config;
  const int hd = c.head_dim, r = c.rot_dim();
  if (r == hd || c.rope_style != RopeStyle::RotateHalf) return;
  // Within a head, new dim j takes old dim head[j]: the rotated halves at 0 and head_dim/2, each
  // followed by half of the unrotated dims.
  const int rh = r / 2, pass = (hd - r) / 2;
  std::vector<int> head(hd);
  for (int i = 0; i < rh; ++i) {
    head[i] = i;
    head[hd / 2 + i] = rh + i;
  }
  for (int i = 0; i < pass; ++i) {
    head[rh + i] = r + i;
    head[hd / 2 + rh + i] = r + pass + i;
  }
  const auto order = [&](int n_heads) {  // every head's rows [n_heads * head_dim]
    std::vector<int> o(static_cast<std::size_t>(n_heads) * hd);
    for (int h = 0; h < n_heads; ++h)
      for (int j = 0; j < hd; ++j) o[h * hd + j] = h * hd + head[j];
    return o;
  };
  const auto permute = [](WeightVector& v, const std::vector<int>& o) {
    if (v.empty()) return;
    const WeightVector old = v;
    for (std::size_t j = 0; j < o.size(); ++j) v[j] = old[o[j]];
  };
  const std::vector<int> q = order(c.n_heads), k = order(c.n_kv_heads), one = order(1);
  for (LayerWeights& l : model.weights.layers) {
    l.wq.permute_rows(q);
    l.wk.permute_rows(k);
    permute(l.bq, q);
    permute(l.bk, k);
    permute(l.q_norm, l.q_norm.size() == static_cast<std::size_t>(hd) ? one : q);
    permute(l.k_norm, l.k_norm.size() == static_cast<std::size_t>(hd) ? one : k);
  }
}

void scale_block_outputs(Model& model, float residual) {
  if (residual == 1.0f) return;
  for (LayerWeights& l : model.weights.layers)
    for (PackedMatrix* m : {&l.wo, &l.w_down}) m->scale(residual);
}

void scale_logits(Model& model, float logits_divisor) {
  if (logits_divisor == 1.0f) return;
  for (float& w : model.weights.final_norm) w /= logits_divisor;
}

namespace {

// The global layers' frequencies [rotary_dim/2]: rope_theta with rope_scaling applied, LongRoPE's
// `factors` (its short or long ones) where it is LongRoPE.
std::vector<float> scaled_inv_freq(const Model& model, const std::vector<float>& longrope_factors) {
  const ModelConfig& c = model.config;
  std::vector<float> inv_freq = ops::rope_inv_freq(c.rot_dim(), c.rope_theta);  // [rotary_dim/2]
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "linear") {
    ops::rope_scale_linear(inv_freq, s.factor);
  } else if (s.type == "llama3") {
    ops::rope_scale_llama3(inv_freq, s.factor, s.low_freq_factor, s.high_freq_factor,
                           s.original_max_position);
  } else if (s.type == "yarn") {
    ops::rope_scale_yarn(inv_freq, c.rope_theta, s.factor, s.beta_fast, s.beta_slow, s.original_max_position,
                         s.truncate);
  } else if (s.type == "longrope") {
    check_longrope_factors(model);
    ops::rope_scale_each(inv_freq, longrope_factors);
  } else if (!s.type.empty() && s.type != "none") {
    throw input_error(model.path.empty() ? c.name : model.path,
                      "unsupported RoPE scaling type '" + s.type + "'");
  }
  return inv_freq;
}

}  // namespace

ops::RopeTable rope_table(const Model& model, RopeTableKind kind) {
  const ModelConfig& c = model.config;
  if (!c.has_rope_table(kind)) return ops::RopeTable({});
  const int pairs = c.rot_dim() / 2;
  const auto table = [&](std::vector<float> rotated, float scale) {
    rotated.resize(c.head_dim / 2, 0.0f);  // the unrotated pairs: frequency 0, unscaled
    return ops::RopeTable(std::move(rotated), scale, pairs);
  };
  const float global_scale = c.rope_scaling.attention_factor;
  switch (kind) {
    case RopeTableKind::Global: return table(scaled_inv_freq(model, c.rope_scaling.short_factor), global_scale);
    case RopeTableKind::Long: return table(scaled_inv_freq(model, c.rope_scaling.long_factor), global_scale);
    case RopeTableKind::Local:
      if (c.local_rope_as_global) return rope_table(model, RopeTableKind::Global);
      return table(ops::rope_inv_freq(c.rot_dim(), c.rope_local_theta), 1.0f);
    case RopeTableKind::None: return table({}, 1.0f);
  }
  return ops::RopeTable({});
}

PackedMatrix::PackedMatrix(const PackedMatrix& other)
    : rows(other.rows), cols(other.cols), kind(other.kind), factor(other.factor) {
  if (!other.store) return;
  const float* from = other.store->data() + other.offset;
  store = std::make_shared<WeightVector>(from, from + (other.bytes() + sizeof(float) - 1) / sizeof(float));
}

PackedMatrix& PackedMatrix::operator=(const PackedMatrix& other) {
  if (this != &other) *this = PackedMatrix(other);
  return *this;
}

PackedMatrix PackedMatrix::pack(const float* w, int rows, int cols) {
  PackedMatrix m;
  PackQueue one;
  one.add(m, rows, cols, w);
  one.pack("matrix");
  return m;
}

PackedMatrix PackedMatrix::pack(const WeightVector& w, int rows, int cols) {
  if (w.size() != static_cast<std::size_t>(rows) * cols)
    throw std::logic_error("PackedMatrix::pack: " + std::to_string(w.size()) + " floats for a [" +
                           std::to_string(rows) + ", " + std::to_string(cols) + "] matrix");
  return pack(w.data(), rows, cols);
}

std::size_t PackedMatrix::panel_floats() const { return rows == 0 ? 0 : ops::packed_floats(rows, cols); }

std::size_t PackedMatrix::bytes() const {
  if (rows == 0) return 0;
  return quantized() ? ops::quant_bytes(kind, rows, cols) : panel_floats() * sizeof(float);
}

ops::PanelWeights PackedMatrix::weights() const {
  if (!quantized()) return data();
  return ops::QuantPanels{kind, reinterpret_cast<const uint8_t*>(store->data() + offset), factor};
}

std::span<float> PackedMatrix::panels() {
  if (quantized()) {  // expanded panel by panel into fp32 panels of its own
    auto f32 = std::make_shared<WeightVector>(panel_floats());
    const std::size_t per_panel = static_cast<std::size_t>(cols) * ops::kPanelRows;
    for (long p = 0; p < ops::panel_count(rows); ++p)
      ops::quant_panel_to_f32(f32->data() + p * per_panel, weights().quant, cols, p);
    store = std::move(f32);
    offset = 0;
    kind = ops::QuantKind::None;
    factor = 1.0f;  // taken by the expansion
  }
  return {store ? store->data() + offset : nullptr, panel_floats()};
}

WeightVector PackedMatrix::unpacked() const {
  WeightVector w(size());
  for (int r = 0; r < rows; ++r) row(r, w.data() + static_cast<std::size_t>(r) * cols);
  return w;
}

void PackedMatrix::row(int r, float* out) const {
  if (quantized()) ops::quant_row(out, weights().quant, cols, r);
  else ops::panel_row(out, data(), cols, r);
}

void PackedMatrix::scale(float f) {
  if (!quantized()) {
    for (float& w : panels()) w *= f;
  } else if (!ops::quant_scale(reinterpret_cast<uint8_t*>(store->data() + offset), kind, rows, cols, f)) {
    factor *= f;
  }
}

void PackedMatrix::permute_rows(std::span<const int> order) {
  if (quantized()) {  // rows moved as stored, each with its blocks' factors
    auto moved = std::make_shared<WeightVector>((bytes() + sizeof(float) - 1) / sizeof(float));
    uint8_t* to = reinterpret_cast<uint8_t*>(moved->data());
    const uint8_t* from = weights().quant.bytes;
    std::memcpy(to, from, bytes());  // the padding rows as they were
    for (int r = 0; r < rows; ++r) ops::quant_copy_row(to, r, from, order[r], kind, cols);
    store = std::move(moved);
    offset = 0;
    return;
  }
  const std::vector<float> old(data(), data() + panel_floats());  // the panels before
  const std::span<float> now = panels();
  const auto at = [this](int r, int k) {  // where W[r, k] sits in the panels
    return (static_cast<std::size_t>(r / ops::kPanelRows) * cols + k) * ops::kPanelRows + r % ops::kPanelRows;
  };
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < cols; ++k) now[at(r, k)] = old[at(order[r], k)];
}

bool PackedMatrix::operator==(const PackedMatrix& other) const {
  if (rows != other.rows || cols != other.cols) return false;
  if (rows == 0) return true;
  if (kind == other.kind && factor == other.factor)
    return std::memcmp(store->data() + offset, other.store->data() + other.offset, bytes()) == 0;
  return unpacked() == other.unpacked();
}

int PackQueue::Entry::rows() const {
  int n = 0;
  for (const Part& p : parts) n += p.rows;
  return n;
}

void PackQueue::add(PackedMatrix& dst, int rows, int cols, Fill fill) {
  entries_.push_back({{{&dst, rows}}, cols, std::move(fill), nullptr, std::nullopt, nullptr});
}

void PackQueue::add(PackedMatrix& dst, int rows, int cols, const float* rows_major) {
  entries_.push_back({{{&dst, rows}}, cols, {}, rows_major, std::nullopt, nullptr});
}

void PackQueue::add_quantized(PackedMatrix& dst, int rows, int cols, ops::QuantFormat format, const uint8_t* blocks,
                              Fill fill) {
  entries_.push_back({{{&dst, rows}}, cols, std::move(fill), nullptr, format, blocks});
}

void PackQueue::add_stacked(std::vector<Part> parts, int cols, Fill fill, std::optional<ops::QuantFormat> format,
                            const uint8_t* blocks) {
  entries_.push_back({std::move(parts), cols, std::move(fill), nullptr, format, blocks});
}

void PackQueue::pack(const std::string& model) {
  if (entries_.empty()) return;
  // Floats a matrix takes in the store: its panels, rounded so each matrix starts on a 64-byte line.
  const auto span_of = [](const Entry& e, int rows) {
    const std::size_t floats = e.format ? (ops::quant_bytes(ops::quant_kind(*e.format), rows, e.cols) + 3) / 4
                                        : ops::packed_floats(rows, e.cols);
    return (floats + 15) / 16 * 16;
  };
  // A 16-bit matrix is packed from its file's bytes alone: its fp32 weights are never needed.
  const auto filled = [](const Entry& e) { return e.fill && !(e.format && ops::quant_exact(*e.format)); };
  std::size_t total = 0, largest = 0, matrices = 0;
  for (const Entry& e : entries_) {
    for (const Part& p : e.parts) total += span_of(e, p.rows);
    matrices += e.parts.size();
    if (filled(e)) largest = std::max(largest, static_cast<std::size_t>(e.rows()) * e.cols);
  }
  // Refused here rather than by std::bad_alloc, or by the out-of-memory killer partway through.
  const uint64_t bytes = (total + largest) * sizeof(float);
  const std::string purpose = "its weights (" + std::to_string(matrices) + " matrices)";
  require_host_memory(model, bytes, purpose);
  std::shared_ptr<WeightVector> store;
  WeightVector scratch;  // [rows, cols] of the matrix (or stack) being filled
  try {
    store = std::make_shared<WeightVector>(total);
    scratch.resize(largest);
  } catch (const std::bad_alloc&) {
    throw host_memory_error(model, bytes, purpose, host_memory_available());
  }
  std::size_t offset = 0;
  for (Entry& e : entries_) {
    if (filled(e)) e.fill(scratch.data());
    // [e.rows(), cols]; null for a 16-bit matrix (an entry with a fill has no rows_major)
    const float* rows_major = filled(e) ? scratch.data() : e.rows_major;
    const uint8_t* blocks = e.blocks;  // the part's rows in the file's encoding
    for (const Part& p : e.parts) {
      PackedMatrix& m = *p.dst;
      m.rows = p.rows;
      m.cols = e.cols;
      m.store = store;
      m.offset = offset;
      m.kind = ops::QuantKind::None;
      if (e.format && ops::pack_quant_panels(reinterpret_cast<uint8_t*>(store->data() + offset), *e.format, blocks,
                                             rows_major, p.rows, e.cols)) {
        m.kind = ops::quant_kind(*e.format);
      } else if (e.format) {  // its weights do not all expand exactly: fp32 panels of its own
        m.store = std::make_shared<WeightVector>(ops::packed_floats(p.rows, e.cols));
        m.offset = 0;
        ops::pack_panels(m.store->data(), rows_major, p.rows, e.cols);
      } else {
        ops::pack_panels(store->data() + offset, rows_major, p.rows, e.cols);
      }
      if (rows_major != nullptr) rows_major += static_cast<std::size_t>(p.rows) * e.cols;
      if (e.format) blocks += ops::quant_file_row_bytes(*e.format, e.cols) * p.rows;
      offset += span_of(e, p.rows);
    }
  }
  entries_.clear();
}

namespace {

// Bytes a token reads from the layers' tensors (`packed`: the matrices' panels as stored, padding
// included), or their weights (not `packed`: parameters).
std::size_t layer_size(const std::vector<LayerWeights>& layers, bool packed) {
  const std::size_t per_float = packed ? sizeof(float) : 1;
  std::size_t n = 0;
  for (const LayerWeights& l : layers) {
    n += (l.attn_norm.size() + l.bq.size() + l.bk.size() + l.bv.size() + l.q_norm.size() + l.k_norm.size() +
          l.post_attn_norm.size() + l.post_ffn_norm.size() + l.ffn_norm.size()) *
         per_float;
    for (const PackedMatrix* m : l.matrices()) n += packed ? m->bytes() : m->size();
  }
  return n;
}

}  // namespace

std::size_t Model::weight_bytes_per_token() const {
  return (static_cast<std::size_t>(config.dim) + weights.final_norm.size()) * sizeof(float) +  // embedding row, norm
         layer_size(weights.layers, true) + classifier().bytes();
}

Model::MatrixCount Model::matrix_count() const {
  MatrixCount n;
  const auto add = [&n](const PackedMatrix& m) {
    if (m.empty()) return;
    ++n.matrices;
    if (m.quantized()) ++n.as_stored;
  };
  add(weights.token_embedding);
  if (!config.tied_classifier) add(weights.classifier);
  for (const LayerWeights& l : weights.layers)
    for (const PackedMatrix* m : l.matrices()) add(*m);
  return n;
}

std::size_t Model::parameter_count() const {
  return weights.token_embedding.size() + layer_size(weights.layers, false) +
         weights.final_norm.size() + (config.tied_classifier ? 0 : weights.classifier.size());
}

}  // namespace kvs
