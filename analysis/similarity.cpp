// OmniKV inter-layer similarity (POLICIES.md §9): head-maxed softmax per layer, top-K sets, and
// the L x L matrix per decode step and averaged over steps.
#include "analysis/similarity.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "analysis/trace.h"
#include "inference/errors.h"

namespace kvs {

int default_similarity_k(int prompt_len) {
  int k = (int)std::lround(0.067 * prompt_len);
  return std::min(prompt_len, std::max(1, k));
}

std::vector<float> head_max_attention(std::span<const float> rows, std::span<const float> lse,
                                      int n_heads, int row_len, int prompt_len) {
  if (rows.size() != (size_t)n_heads * row_len || lse.size() != (size_t)n_heads ||
      prompt_len < 1 || prompt_len > row_len) {
    throw input_error("similarity", "rows/lse sizes do not match [H, T] / [H] and 1 <= P <= T");
  }
  // softmax_j(max_h log(p[h,j]) + lse[h]) = M_j / sum M with M_j = max_h p[h,j] e^(lse[h] - c):
  // no log or exp per key. c = the largest lse, so every weight is at most 1.
  const float c = *std::max_element(lse.begin(), lse.end());
  std::vector<float> a(prompt_len, 0.0f);  // [P]
  for (int h = 0; h < n_heads; ++h) {
    const float w = std::exp(lse[h] - c);
    const float* row = rows.data() + (size_t)h * row_len;
    for (int j = 0; j < prompt_len; ++j) a[j] = std::max(a[j], row[j] * w);
  }
  double sum = 0.0;
  for (float v : a) sum += v;
  if (!(sum > 0.0)) return std::vector<float>(prompt_len, 0.0f);
  const float inv = static_cast<float>(1.0 / sum);
  for (float& v : a) v *= inv;
  return a;
}

std::vector<int> top_k_positions(std::span<const float> a, int k) {
  k = std::clamp(k, 0, (int)a.size());
  if (k == 0) return {};
  // The set in linear time: the k-th largest value by selection over a copy of the values (an
  // index selection comparing a[x] with a[y] cost 3x more), then every position above it and the
  // first ones equal to it; ranked afterwards. The same positions, in the same order, as ranking
  // all of them by (value descending, position ascending).
  std::vector<float> values(a.begin(), a.end());  // [n]
  std::nth_element(values.begin(), values.begin() + (k - 1), values.end(), std::greater<float>());
  const float kth = values[k - 1];
  int above = 0;
  for (float v : a) above += v > kth;
  std::vector<int> idx;  // [k]
  idx.reserve(k);
  int ties = k - above;  // positions equal to kth that make the set
  for (int j = 0; j < (int)a.size(); ++j) {
    if (a[j] > kth || (a[j] == kth && ties-- > 0)) idx.push_back(j);
  }
  std::sort(idx.begin(), idx.end(), [&](int x, int y) { return a[x] > a[y] || (a[x] == a[y] && x < y); });
  return idx;
}

std::vector<float> step_similarity(std::span<const float> rows, std::span<const float> lse,
                                   int n_layers, int n_heads, int row_len, int prompt_len, int k) {
  const size_t layer_rows = (size_t)n_heads * row_len;
  if (rows.size() != layer_rows * n_layers || lse.size() != (size_t)n_layers * n_heads) {
    throw input_error("similarity", "rows/lse sizes do not match [L, H, T] / [L, H]");
  }
  if (prompt_len < 1 || prompt_len > row_len) {
    throw input_error("similarity", "prompt length outside the attention rows");
  }
  std::vector<std::vector<float>> a(n_layers);  // [L][P]
  for (int l = 0; l < n_layers; ++l) {
    a[l] = head_max_attention(rows.subspan(l * layer_rows, layer_rows),
                              lse.subspan((size_t)l * n_heads, n_heads), n_heads, row_len,
                              prompt_len);
  }
  std::vector<float> sim((size_t)n_layers * n_layers);  // [L, L]
  for (int l1 = 0; l1 < n_layers; ++l1) {
    const std::vector<int> top = top_k_positions(a[l1], k);
    for (int l2 = 0; l2 < n_layers; ++l2) {
      float s = 0.0f;
      for (int j : top) s += a[l2][j];
      sim[(size_t)l1 * n_layers + l2] = s;
    }
  }
  return sim;
}

namespace {

void check_dims(const std::string& what, int n_layers, int n_heads, int row_len, int prompt_len) {
  if (n_layers <= 0 || n_heads <= 0) throw input_error(what, "no layers or heads");
  if (prompt_len <= 0 || prompt_len > row_len) {
    throw input_error(what, "prompt length " + std::to_string(prompt_len) +
                                " outside the attention rows (1.." + std::to_string(row_len) + ")");
  }
}

int resolve_k(int k, int prompt_len) {
  return k <= 0 ? default_similarity_k(prompt_len) : std::min(k, prompt_len);
}

// Adds one step's matrix to the result and to its running mean.
void add_step(SimilarityResult& r, const std::vector<float>& sim) {
  r.per_step.insert(r.per_step.end(), sim.begin(), sim.end());
  for (size_t i = 0; i < sim.size(); ++i) r.mean[i] += sim[i];
  ++r.n_steps;
}

void finish_mean(SimilarityResult& r) {
  for (float& v : r.mean) v /= (float)r.n_steps;
}

}  // namespace

SimilarityResult trace_similarity(const TraceReader& trace, int k) {
  const TraceMeta& meta = trace.meta();
  const int L = meta.shape.n_layers, H = meta.shape.n_heads, T = meta.total_len();
  check_dims(trace.path(), L, H, T, meta.prompt_len);
  if (meta.n_steps <= 0) throw input_error(trace.path(), "no decode steps to compare layers on");
  SimilarityResult r;
  r.n_layers = L;
  r.k = resolve_k(k, meta.prompt_len);
  r.mean.assign((size_t)L * L, 0.0f);
  std::vector<float> rows, lse;  // [L, H, T], [L, H]
  for (int s = 0; s < meta.n_steps; ++s) {
    trace.read_decode_step(s, rows, lse);
    add_step(r, step_similarity(rows, lse, L, H, T, meta.prompt_len, r.k));
  }
  finish_mean(r);
  return r;
}

SimilarityResult similarity_from_rows(std::span<const float> rows, std::span<const float> lse,
                                      int n_steps, int n_layers, int n_heads, int row_len,
                                      int prompt_len, int k) {
  check_dims("similarity", n_layers, n_heads, row_len, prompt_len);
  const size_t step_rows = (size_t)n_layers * n_heads * row_len;
  const size_t step_lse = (size_t)n_layers * n_heads;
  if (n_steps <= 0) throw input_error("similarity", "no decode steps to compare layers on");
  if (rows.size() != step_rows * n_steps || lse.size() != step_lse * n_steps) {
    throw input_error("similarity", "rows/lse sizes do not match [steps, L, H, T] / [steps, L, H]");
  }
  SimilarityResult r;
  r.n_layers = n_layers;
  r.k = resolve_k(k, prompt_len);
  r.mean.assign((size_t)n_layers * n_layers, 0.0f);
  for (int s = 0; s < n_steps; ++s) {
    add_step(r, step_similarity(rows.subspan(s * step_rows, step_rows),
                                lse.subspan(s * step_lse, step_lse), n_layers, n_heads, row_len,
                                prompt_len, r.k));
  }
  finish_mean(r);
  return r;
}

}  // namespace kvs
