// OmniKV inter-layer similarity (POLICIES.md §9): head-maxed softmax per layer, top-K sets, and
// the L x L matrix per decode step and averaged over steps.
#include "analysis/similarity.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "analysis/parallel_for.h"
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

namespace {

// The k-th largest of `a` (1 <= k <= a.size()). For values >= 0 (attention) a float's bits order
// them as the values do: a histogram of the top 12 bits finds the bucket holding the k-th largest
// and a selection among that bucket's few values finishes (nth_element over all 3.6K prompt keys
// of SmolLM2, once per layer and step, was most of a recorded step's similarity). Other values
// (negative, -0, NaN) take the plain selection.
float kth_largest(std::span<const float> a, int k) {
  constexpr int kBuckets = 1 << 12;
  std::vector<int> hist(kBuckets, 0);  // [kBuckets] values per top-12-bit prefix
  bool nonnegative = true;
  for (float v : a) {
    nonnegative = nonnegative && v >= 0.0f && !std::signbit(v);
    ++hist[std::bit_cast<uint32_t>(v) >> 20];
  }
  std::vector<float> in;  // the candidates: every value, or the bucket's
  int rank = k;           // of the k-th largest among them
  if (nonnegative) {
    uint32_t b = kBuckets - 1;
    while (rank > hist[b]) rank -= hist[b--];
    in.reserve(hist[b]);
    for (float v : a)
      if ((std::bit_cast<uint32_t>(v) >> 20) == b) in.push_back(v);
  } else {
    in.assign(a.begin(), a.end());
  }
  std::nth_element(in.begin(), in.begin() + (rank - 1), in.end(), std::greater<float>());
  return in[rank - 1];
}

// The positions of the k largest entries of a in position order: every one above the k-th largest
// value and the first ones equal to it (k capped at a.size()).
std::vector<int> top_k_set(std::span<const float> a, int k) {
  k = std::clamp(k, 0, (int)a.size());
  if (k == 0) return {};
  const float kth = kth_largest(a, k);
  int above = 0;
  for (float v : a) above += v > kth;
  std::vector<int> idx;  // [k]
  idx.reserve(k);
  int ties = k - above;  // positions equal to kth that make the set
  for (int j = 0; j < (int)a.size(); ++j) {
    if (a[j] > kth || (a[j] == kth && ties-- > 0)) idx.push_back(j);
  }
  return idx;
}

}  // namespace

std::vector<int> top_k_positions(std::span<const float> a, int k) {
  // Linear-time selection, then only the k chosen ranked: the same positions in the same order
  // as ranking all of them by (value descending, position ascending).
  std::vector<int> idx = top_k_set(a, k);
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
  // Layers in parallel (on the OpenMP threads): a recording runs this on the engine's thread
  // between decode steps, while the decode team waits.
  std::vector<std::vector<float>> a(n_layers);  // [L][P]
  parallel_for(n_layers, [&](int l) {
    a[l] = head_max_attention(rows.subspan(l * layer_rows, layer_rows),
                              lse.subspan((size_t)l * n_heads, n_heads), n_heads, row_len, prompt_len);
  });
  std::vector<float> sim((size_t)n_layers * n_layers);  // [L, L]
  parallel_for(n_layers, [&](int l1) {
    const std::vector<int> top = top_k_set(a[l1], k);  // the sums need the set, not its ranking
    for (int l2 = 0; l2 < n_layers; ++l2) {
      float s = 0.0f;
      for (int j : top) s += a[l2][j];
      sim[(size_t)l1 * n_layers + l2] = s;
    }
  });
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
