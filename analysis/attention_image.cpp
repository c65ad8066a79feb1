// Stacking decode rows and kept sets over steps, the prompt keys' fate under a run, and picking
// prefill maps, for the attention view.
#include "analysis/attention_image.h"

#include <algorithm>
#include <utility>

namespace kvs {

DecodeStack read_decode_stack(const TraceReader& reader, int layer, const ProgressFn& progress) {
  const TraceMeta& m = reader.meta();
  DecodeStack st;
  st.layer = layer;
  st.n_heads = m.shape.n_heads;
  st.n_steps = m.n_steps;
  st.T = m.total_len();
  st.rows.assign((size_t)st.n_heads * st.n_steps * st.T, 0.0f);
  std::vector<float> rows, lse;  // [L, H, T], [L, H]
  for (int s = 0; s < st.n_steps; ++s) {
    if (progress && !progress(s, st.n_steps)) break;
    reader.read_decode_step(s, rows, lse);
    for (int h = 0; h < st.n_heads; ++h) {
      const float* src = rows.data() + ((size_t)layer * st.n_heads + h) * st.T;
      std::copy(src, src + st.T, st.rows.begin() + ((size_t)h * st.n_steps + s) * st.T);
    }
  }
  return st;
}

std::vector<uint8_t> read_evicted_plane(const TraceReader& reader, const std::string& run, int layer, int kv_head,
                                        const std::vector<int32_t>& q_pos, const ProgressFn& progress) {
  const TraceMeta& m = reader.meta();
  const int n = m.n_steps, T = m.total_len(), G = m.shape.n_kv_heads;
  std::vector<uint8_t> plane((size_t)n * T, 0);  // [n_steps, T]
  std::vector<uint8_t> kept;                     // [L, Hkv, T]
  for (int s = 0; s < n; ++s) {
    if (progress && !progress(s, n)) break;
    reader.read_run_kept_step(run, s, kept);
    const uint8_t* k = kept.data() + ((size_t)layer * G + kv_head) * T;
    const int q = s < (int)q_pos.size() ? q_pos[s] : m.prompt_len + s;
    for (int t = 0; t <= q && t < T; ++t) plane[(size_t)s * T + t] = k[t] == 0 ? 1 : k[t] == 2 ? 2 : 0;
  }
  return plane;
}

PromptKeyFate read_prompt_key_fate(const TraceReader& reader, const std::string& run, int layer, int kv_head,
                                   int block) {
  const TraceMeta& m = reader.meta();
  PromptKeyFate fate;
  if (reader.run_steps(run) == 0 || block < 1) return fate;
  const int P = m.prompt_len, T = m.total_len(), cols = (P + block - 1) / block;
  std::vector<uint8_t> kept;  // [L, Hkv, T]
  reader.read_run_kept_step(run, 0, kept);
  const uint8_t* k = kept.data() + ((size_t)layer * m.shape.n_kv_heads + kv_head) * T;  // [T]
  fate.evicted.assign(cols, 0.0f);
  fate.inactive.assign(cols, 0.0f);
  for (int c = 0; c < cols; ++c) {
    const int first = c * block, last = std::min(P, first + block);
    int evicted = 0, inactive = 0;
    for (int pos = first; pos < last; ++pos) {
      evicted += k[pos] == 0;
      inactive += k[pos] == 2;
    }
    fate.evicted[c] = (float)evicted / (last - first);
    fate.inactive[c] = (float)inactive / (last - first);
  }
  return fate;
}

PrefillImage read_prefill_image(const TraceReader& reader, int layer, int head, PrefillEvidence& evidence) {
  PrefillImage img;
  const int P = reader.meta().prompt_len;
  if (reader.meta().has_prefill_map) {
    img.data = reader.read_prefill_map(layer, head);
    if (img.data.size() == (size_t)P * P) {
      img.rows = img.cols = P;
      img.full = true;
      return img;
    }
  }
  PooledMap pooled = reader.read_prefill_pooled(layer, head);
  if (pooled.block > 0) {
    img.rows = img.cols = pooled.n;
    img.block = pooled.block;
    img.full = pooled.block == 1;
    img.data = std::move(pooled.cells);
    return img;
  }
  if (evidence.window_rows.empty()) evidence = reader.read_prefill();
  if (evidence.window == 0 || evidence.window_rows.empty()) return PrefillImage{};
  img.rows = evidence.window;
  img.cols = evidence.prompt_len;
  img.first_query = evidence.prompt_len - evidence.window;
  img.data.resize((size_t)img.rows * img.cols);
  for (int w = 0; w < img.rows; ++w) {
    const float* r = evidence.window_row(layer, head, w);
    std::copy(r, r + img.cols, img.data.begin() + (size_t)w * img.cols);
  }
  return img;
}

std::vector<float> spread_max(const float* data, int rows, int cols, int half_x, int half_y) {
  std::vector<float> across((size_t)rows * cols);  // [rows, cols]: max over the columns around
  for (int r = 0; r < rows; ++r) {
    const float* in = data + (size_t)r * cols;
    for (int c = 0; c < cols; ++c)
      across[(size_t)r * cols + c] = *std::max_element(in + std::max(c - half_x, 0), in + std::min(c + half_x + 1, cols));
  }
  if (half_y == 0) return across;
  std::vector<float> out((size_t)rows * cols);  // [rows, cols]: then over the rows around
  for (int r = 0; r < rows; ++r) {
    float* o = out.data() + (size_t)r * cols;
    std::copy_n(across.data() + (size_t)r * cols, cols, o);
    for (int k = std::max(r - half_y, 0); k < std::min(r + half_y + 1, rows); ++k)
      for (int c = 0; c < cols; ++c) o[c] = std::max(o[c], across[(size_t)k * cols + c]);
  }
  return out;
}

std::vector<float> spread_share(const uint8_t* data, int rows, int cols, int half_x, int half_y, uint8_t value) {
  std::vector<int> across((size_t)rows * cols);  // [rows, cols]: matches over the columns around
  std::vector<int> prefix(cols + 1);              // [cols + 1] matches in columns before c
  for (int r = 0; r < rows; ++r) {
    const uint8_t* in = data + (size_t)r * cols;
    for (int c = 0; c < cols; ++c) prefix[c + 1] = prefix[c] + (in[c] == value);
    for (int c = 0; c < cols; ++c)
      across[(size_t)r * cols + c] = prefix[std::min(c + half_x + 1, cols)] - prefix[std::max(c - half_x, 0)];
  }
  std::vector<float> out((size_t)rows * cols);  // [rows, cols]: then over the rows around, as a share
  for (int r = 0; r < rows; ++r) {
    const int k0 = std::max(r - half_y, 0), k1 = std::min(r + half_y + 1, rows);
    for (int c = 0; c < cols; ++c) {
      int n = 0;
      for (int k = k0; k < k1; ++k) n += across[(size_t)k * cols + c];
      const int width = std::min(c + half_x + 1, cols) - std::max(c - half_x, 0);
      out[(size_t)r * cols + c] = (float)n / (float)(width * (k1 - k0));
    }
  }
  return out;
}

}  // namespace kvs
