// Shared policy building blocks: top-k (older evicted first on ties), pooling, GQA reductions,
// observation-window scores and renormalization of a recorded row over kept keys.
#include "analysis/policy_util.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "inference/errors.h"

namespace kvs {

namespace {

// Index of the first of the lowest scores (n >= 1, no NaN): the lowest found in vector lanes,
// then the first block of 32 holding it (one pass and a part; a scalar search carried each
// index's comparison into the next, at 16K scores a KV head a decode step).
int first_minimum(std::span<const float> scores) {
  const int n = (int)scores.size();
  const float* x = scores.data();  // [n]
  float low = x[0];
#pragma omp simd reduction(min : low)
  for (int j = 0; j < n; ++j) low = x[j] < low ? x[j] : low;
  constexpr int kBlock = 32;
  int j = 0;
  for (; j + kBlock <= n; j += kBlock) {
    int hits = 0;
#pragma omp simd reduction(+ : hits)
    for (int l = 0; l < kBlock; ++l) hits += x[j + l] == low;
    if (hits) break;
  }
  for (; j < n; ++j)
    if (x[j] == low) return j;
  return 0;  // (NaN among the scores)
}

}  // namespace

std::vector<int> top_k_indices(std::span<const float> scores, int k) {
  const int n = (int)scores.size();
  k = std::clamp(k, 0, n);
  std::vector<int> idx;
  idx.reserve(k);
  if (k == n) {
    for (int i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  if (k == 0) return idx;
  // The k-th largest value, then everything above it plus the newest of the ties at it.
  std::vector<float> v(scores.begin(), scores.end());  // [n] scratch copy
  std::nth_element(v.begin(), v.begin() + (k - 1), v.end(), std::greater<float>());
  const float kth = v[k - 1];
  int above = 0;
  for (int i = 0; i < n; ++i) above += scores[i] > kth ? 1 : 0;
  int ties = k - above;  // taken from the newest positions down
  std::vector<uint8_t> take(n, 0);  // [n]
  for (int i = n - 1; i >= 0; --i) {
    if (scores[i] > kth) {
      take[i] = 1;
    } else if (ties > 0 && scores[i] == kth) {
      take[i] = 1;
      --ties;
    }
  }
  for (int i = 0; i < n; ++i)
    if (take[i]) idx.push_back(i);
  return idx;
}

void top_k_keep(std::span<const float> scores, int k, std::size_t n_held, std::vector<uint8_t>& keep) {
  const int n = (int)scores.size();
  keep.assign(n_held, 0);
  if (n > 0 && k == n - 1) {  // one left out: the oldest of the lowest scores, no index list
    std::fill(keep.begin(), keep.begin() + n, 1);
    keep[first_minimum(scores)] = 0;
    return;
  }
  uint8_t* mask = keep.data();  // (a raw pointer: stores to uint8_t would reload the vector's)
  for (int i : top_k_indices(scores, k)) mask[i] = 1;
}

Pool parse_pool(const std::string& policy, const std::string& value) {
  if (value == "avg" || value == "avgpool") return Pool::Avg;
  if (value == "max" || value == "maxpool") return Pool::Max;
  throw input_error("--policy " + policy, "pool must be avg or max (got '" + value + "')");
}

const char* pool_name(Pool p) { return p == Pool::Avg ? "avg" : "max"; }

std::vector<float> pool1d(std::span<const float> x, int kernel, Pool kind) {
  const int n = (int)x.size();
  const int half = kernel / 2;
  std::vector<float> out(n);
  for (int i = 0; i < n; ++i) {
    if (kind == Pool::Avg) {
      float s = 0.0f;
      for (int j = std::max(0, i - half); j <= std::min(n - 1, i + half); ++j) s += x[j];
      out[i] = s / (float)kernel;
    } else {
      float m = -std::numeric_limits<float>::infinity();
      for (int j = std::max(0, i - half); j <= std::min(n - 1, i + half); ++j) m = std::max(m, x[j]);
      out[i] = m;
    }
  }
  return out;
}

GqaReduce parse_gqa(const std::string& policy, const std::string& value) {
  if (value == "mean") return GqaReduce::Mean;
  if (value == "max") return GqaReduce::Max;
  if (value == "sum") return GqaReduce::Sum;
  throw input_error("--policy " + policy, "gqa must be mean, max or sum (got '" + value + "')");
}

const char* gqa_name(GqaReduce g) {
  return g == GqaReduce::Mean ? "mean" : g == GqaReduce::Max ? "max" : "sum";
}

void reduce_group(std::span<const float* const> rows, GqaReduce how, std::span<float> out) {
  const size_t n = out.size();
  std::fill(out.begin(), out.end(), how == GqaReduce::Max ? -std::numeric_limits<float>::infinity() : 0.0f);
  for (const float* r : rows) {
    if (how == GqaReduce::Max) {
      for (size_t j = 0; j < n; ++j) out[j] = std::max(out[j], r[j]);
    } else {
      for (size_t j = 0; j < n; ++j) out[j] += r[j];
    }
  }
  if (how == GqaReduce::Mean && !rows.empty())
    for (float& v : out) v /= (float)rows.size();
}

std::vector<float> reduce_group(std::span<const float* const> rows, int n, GqaReduce how) {
  std::vector<float> out(n);  // [n]
  reduce_group(rows, how, out);
  return out;
}

std::vector<float> window_scores(const PrefillEvidence& ev, int layer, int head, int w, bool mean) {
  const int P = ev.prompt_len;
  std::vector<float> s(P - w, 0.0f);  // [P - w]
  for (int r = ev.window - w; r < ev.window; ++r) {
    const float* row = ev.window_row(layer, head, r);
    for (int j = 0; j < P - w; ++j) s[j] += row[j];
  }
  if (mean && w > 0)
    for (float& v : s) v /= (float)w;
  return s;
}

std::vector<float> group_window_scores(const PrefillEvidence& ev, int layer, int kv_head, int w,
                                       bool mean, GqaReduce how) {
  const int G = ev.shape.group();
  std::vector<std::vector<float>> per_head;  // [G][P - w]
  std::vector<const float*> ptrs;
  for (int i = 0; i < G; ++i) per_head.push_back(window_scores(ev, layer, kv_head * G + i, w, mean));
  for (auto& v : per_head) ptrs.push_back(v.data());
  return reduce_group(ptrs, ev.prompt_len - w, how);
}

float renormalize_row(std::span<const float> full_row, float full_lse,
                      std::span<const int32_t> keys, std::span<float> out) {
  const std::span<float> kept = out.first(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) kept[i] = full_row[keys[i]];
  return renormalize_kept(kept, full_lse, kept);
}

float renormalize_kept(std::span<const float> kept, float full_lse, std::span<float> out) {
  const float s = ops::lane_sum(kept.data(), static_cast<long>(kept.size()));
  if (!(s > 0.0f)) {
    const float u = kept.empty() ? 0.0f : 1.0f / (float)kept.size();
    for (size_t i = 0; i < kept.size(); ++i) out[i] = u;
    return full_lse;
  }
  const float inv = 1.0f / s;
  for (size_t i = 0; i < kept.size(); ++i) out[i] = kept[i] * inv;
  return full_lse + std::log(s);
}

}  // namespace kvs
