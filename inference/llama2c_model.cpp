// llama2.c checkpoint loader. Layout (run.c, version 0): header {dim, hidden_dim, n_layers,
// n_heads, n_kv_heads, vocab_size, seq_len}; then fp32 token_embedding, rms_att, wq, wk, wv, wo,
// rms_ffn, w1, w2, w3, rms_final, freq_cis_real, freq_cis_imag, and the classifier if not shared.
#include "inference/llama2c_model.h"

#include <cstdint>
#include <cstring>
#include <filesystem>

#include "inference/errors.h"
#include "inference/mapped_file.h"

namespace kvs {
namespace {

constexpr std::size_t kHeaderBytes = 7 * sizeof(int32_t);
constexpr int64_t kMaxDim = 1 << 16;  // sanity bound on every header field

// Copies consecutive fp32 arrays out of the mapped weights.
class FloatReader {
 public:
  FloatReader(const MappedFile& file, uint64_t offset) : file_(file), offset_(offset) {}
  WeightVector take(uint64_t count, const std::string& what) {
    const uint8_t* p = file_.range(offset_, count * sizeof(float), what);
    WeightVector out(count);
    if (count > 0) std::memcpy(out.data(), p, count * sizeof(float));
    offset_ += count * sizeof(float);
    return out;
  }
  // W[rows, cols] into `dst` when `packs` packs, straight from the mapped bytes.
  void take_matrix(PackQueue& packs, PackedMatrix& dst, uint64_t rows, uint64_t cols, const std::string& what) {
    const auto* p = reinterpret_cast<const float*>(file_.range(offset_, rows * cols * sizeof(float), what));
    offset_ += rows * cols * sizeof(float);
    packs.add(dst, static_cast<int>(rows), static_cast<int>(cols), p);
  }
  void skip(uint64_t count) { offset_ += count * sizeof(float); }
  uint64_t offset() const { return offset_; }

 private:
  const MappedFile& file_;
  uint64_t offset_;
};

}  // namespace

Model load_llama2c_model(const std::string& path, ModelParts parts) {
  MappedFile file(path);
  if (file.size() < kHeaderBytes) {
    throw input_error(path, "not a llama2.c checkpoint (file of " + std::to_string(file.size()) +
                                " bytes is shorter than the 28-byte header)");
  }
  int32_t h[7];
  std::memcpy(h, file.data(), kHeaderBytes);
  const int64_t dim = h[0], hidden = h[1], n_layers = h[2], n_heads = h[3], n_kv = h[4];
  const bool shared = h[5] > 0;
  const int64_t vocab = h[5] < 0 ? -static_cast<int64_t>(h[5]) : h[5];
  const int64_t seq_len = h[6];
  const std::string header_text =
      "dim " + std::to_string(dim) + ", hidden_dim " + std::to_string(hidden) + ", n_layers " +
      std::to_string(n_layers) + ", n_heads " + std::to_string(n_heads) + ", n_kv_heads " +
      std::to_string(n_kv) + ", vocab " + std::to_string(h[5]) + ", seq_len " +
      std::to_string(seq_len);
  auto in_range = [](int64_t v, int64_t hi) { return v > 0 && v <= hi; };
  const bool plausible = in_range(dim, kMaxDim) && in_range(hidden, 4 * kMaxDim) &&
                         in_range(n_layers, 1024) && in_range(n_heads, 1024) &&
                         in_range(n_kv, 1024) && in_range(vocab, 1 << 22) &&
                         in_range(seq_len, 1 << 24) && dim % n_heads == 0 && n_heads % n_kv == 0 &&
                         (dim / n_heads) % 2 == 0;
  if (!plausible) {
    throw input_error(path, "not a llama2.c checkpoint (implausible header: " + header_text + ")");
  }

  ModelConfig c;
  c.arch = "llama";
  c.name = std::filesystem::path(path).stem().string();
  c.dim = static_cast<int>(dim);
  c.hidden_dim = static_cast<int>(hidden);
  c.n_layers = static_cast<int>(n_layers);
  c.n_heads = static_cast<int>(n_heads);
  c.n_kv_heads = static_cast<int>(n_kv);
  c.head_dim = static_cast<int>(dim / n_heads);
  c.vocab_size = static_cast<int>(vocab);
  c.seq_len = static_cast<int>(seq_len);
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;
  c.rope_style = RopeStyle::Interleaved;
  c.tied_classifier = shared;

  // Size check before any allocation: every count below is at most ~2^50, no overflow.
  const uint64_t kv_dim = static_cast<uint64_t>(c.kv_dim());
  const uint64_t L = n_layers, D = dim, H = hidden, V = vocab;
  const uint64_t per_layer = D + D * D + 2 * D * kv_dim + D * D + D + 3 * D * H;
  const uint64_t rope_tables = static_cast<uint64_t>(seq_len) * c.head_dim;  // real + imag halves
  const uint64_t floats = V * D + L * per_layer + D + rope_tables + (shared ? 0 : V * D);
  const uint64_t expected = kHeaderBytes + floats * sizeof(float);
  if (file.size() < expected) {
    throw input_error(path, "truncated file (" + std::to_string(file.size()) +
                                " bytes, the header (" + header_text + ") needs " +
                                std::to_string(expected) + ")");
  }
  if (file.size() > expected) {
    throw input_error(path, "not a llama2.c checkpoint (" + std::to_string(file.size()) +
                                " bytes, the header (" + header_text + ") needs exactly " +
                                std::to_string(expected) + ")");
  }

  Model m;
  m.config = c;
  m.path = path;
  m.format = "llama2c";
  m.weight_type = "F32";
  if (parts == ModelParts::ConfigOnly) return m;
  ModelWeights& w = m.weights;
  w.layers.resize(c.n_layers);
  FloatReader r(file, kHeaderBytes);
  PackQueue packs;
  r.take_matrix(packs, w.token_embedding, V, D, "token_embedding");
  for (auto& l : w.layers) l.attn_norm = r.take(D, "rms_att_weight");
  for (auto& l : w.layers) r.take_matrix(packs, l.wq, D, D, "wq");
  for (auto& l : w.layers) r.take_matrix(packs, l.wk, kv_dim, D, "wk");
  for (auto& l : w.layers) r.take_matrix(packs, l.wv, kv_dim, D, "wv");
  for (auto& l : w.layers) r.take_matrix(packs, l.wo, D, D, "wo");
  for (auto& l : w.layers) l.ffn_norm = r.take(D, "rms_ffn_weight");
  for (auto& l : w.layers) r.take_matrix(packs, l.w_gate, H, D, "w1");
  for (auto& l : w.layers) r.take_matrix(packs, l.w_down, D, H, "w2");
  for (auto& l : w.layers) r.take_matrix(packs, l.w_up, H, D, "w3");
  w.final_norm = r.take(D, "rms_final_weight");
  r.skip(rope_tables);  // freq_cis_real, freq_cis_imag [seq_len, head_dim/2] each
  if (!shared) r.take_matrix(packs, w.classifier, V, D, "wcls");
  packs.pack(m.path);
  return m;
}

}  // namespace kvs
