// Head statistics over decode rows (sink mass, locality, entropy) and the trace-profiled
// DuoAttention gate; sums in double, reported as float means.
#include "analysis/head_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "analysis/parallel_for.h"
#include "analysis/trace.h"
#include "inference/errors.h"
#include "kernels/log8.h"
#include "kernels/simd.h"

namespace kvs {

namespace {

double range_mass(const float* row, int lo, int hi) {  // sum of row[lo..hi)
  double s = 0.0;
  for (int j = std::max(lo, 0); j < hi; ++j) s += row[j];
  return s;
}

// -sum of p log p over row[0..n), zeros (and subnormals, whose terms are below 1e-36) skipped;
// eight lanes at a time (ops::log8), the terms widened to double and summed in eight double lanes
// (one running double took a dependent add per term: 4x slower, a third of a recorded step's
// analyses at SmolLM2's 3.6K keys).
double row_entropy(const float* row, int n) {
  using ops::f32x8;
  using f64x4 = double __attribute__((vector_size(32)));
  f64x4 lo{}, hi{};  // the terms of lanes 0-3 and 4-7
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const f32x8 p = ops::load_as<f32x8>(row + j);
    const auto normal = p >= std::numeric_limits<float>::min();
    const f32x8 safe = normal ? p : f32x8{} + 1.0f;  // log8 needs normal inputs; log(1) = 0
    const f32x8 t = safe * ops::log8(safe);
    lo += __builtin_convertvector(__builtin_shufflevector(t, t, 0, 1, 2, 3), f64x4);
    hi += __builtin_convertvector(__builtin_shufflevector(t, t, 4, 5, 6, 7), f64x4);
  }
  const f64x4 both = lo + hi;
  double h = -((both[0] + both[1]) + (both[2] + both[3]));
  for (; j < n; ++j) {
    if (row[j] >= std::numeric_limits<float>::min()) h -= (double)row[j] * std::log((double)row[j]);
  }
  return h;
}

void check_step(const ModelShape& shape, size_t rows_size, int row_len, int q_pos) {
  if (row_len <= 0 || rows_size != (size_t)shape.n_layers * shape.n_heads * row_len) {
    throw input_error("attention rows", "size does not match [L, H, T]");
  }
  if (q_pos < 0 || q_pos >= row_len) {
    throw input_error("attention rows", "query position " + std::to_string(q_pos) +
                                            " outside the row (0.." + std::to_string(row_len - 1) + ")");
  }
}

// Mean over each KV head's group of query heads: [L, H] -> [L, Hkv].
std::vector<float> group_mean(const ModelShape& shape, const std::vector<float>& per_head) {
  const int G = shape.group();
  std::vector<float> out((size_t)shape.n_layers * shape.n_kv_heads, 0.0f);  // [L, Hkv]
  for (int l = 0; l < shape.n_layers; ++l) {
    for (int h = 0; h < shape.n_heads; ++h) {
      out[(size_t)l * shape.n_kv_heads + h / G] += per_head[(size_t)l * shape.n_heads + h] / G;
    }
  }
  return out;
}

}  // namespace

HeadStatsAccumulator::HeadStatsAccumulator(const ModelShape& shape, HeadStatsOptions options)
    : shape_(shape), options_(options) {
  if (options_.sinks < 0) throw input_error("--sinks", "must be >= 0");
  if (options_.local_window < 1) throw input_error("--local-window", "must be >= 1");
  const size_t n = (size_t)shape.n_layers * shape.n_heads;
  sink_.assign(n, 0.0);
  local_.assign(n, 0.0);
  entropy_.assign(n, 0.0);
}

void HeadStatsAccumulator::add_step(std::span<const float> rows, int row_len, int q_pos) {
  check_step(shape_, rows.size(), row_len, q_pos);
  // Rows in parallel (on the OpenMP threads): a recording runs this on the engine's thread between
  // decode steps, while the decode team waits.
  const int n = shape_.n_layers * shape_.n_heads;
  parallel_for(n, [&](int i) {
    const float* row = rows.data() + (size_t)i * row_len;
    sink_[i] += range_mass(row, 0, std::min(options_.sinks, q_pos + 1));
    local_[i] += range_mass(row, q_pos - options_.local_window + 1, q_pos + 1);
    entropy_[i] += row_entropy(row, q_pos + 1);
  });
  ++n_steps_;
}

HeadStats HeadStatsAccumulator::finish() const {
  if (n_steps_ == 0) throw input_error("head statistics", "no decode steps");
  HeadStats out;
  out.shape = shape_;
  out.n_steps = n_steps_;
  out.options = options_;
  auto mean = [&](const std::vector<double>& sums) {
    std::vector<float> m(sums.size());  // [L, H]
    for (size_t i = 0; i < sums.size(); ++i) m[i] = (float)(sums[i] / n_steps_);
    return m;
  };
  out.sink_mass = mean(sink_);
  out.locality = mean(local_);
  out.entropy = mean(entropy_);
  out.kv_sink_mass = group_mean(shape_, out.sink_mass);
  out.kv_locality = group_mean(shape_, out.locality);
  out.kv_entropy = group_mean(shape_, out.entropy);
  return out;
}

HeadStats head_stats(const TraceReader& trace, const HeadStatsOptions& options) {
  const TraceMeta& meta = trace.meta();
  if (meta.n_steps <= 0) throw input_error(trace.path(), "no decode steps for head statistics");
  HeadStatsAccumulator acc(meta.shape, options);
  std::vector<int32_t> qpos = trace.decode_query_pos();  // [n_steps]
  std::vector<float> rows, lse;                          // [L, H, T], [L, H]
  for (int s = 0; s < meta.n_steps; ++s) {
    trace.read_decode_step(s, rows, lse);
    acc.add_step(rows, meta.total_len(), qpos.at(s));
  }
  return acc.finish();
}

namespace {

// Adds, per (layer, KV head), the step's mean-over-group mass outside sink + recent.
void add_outside_mass(const ModelShape& shape, const float* rows, int row_len, int q_pos,
                      int sink, int recent, std::vector<double>& sums) {
  const int G = shape.group();
  const int hi = q_pos - recent;  // first recent key
  for (int l = 0; l < shape.n_layers; ++l) {
    for (int h = 0; h < shape.n_heads; ++h) {
      const float* row = rows + ((size_t)l * shape.n_heads + h) * row_len;
      sums[(size_t)l * shape.n_kv_heads + h / G] += range_mass(row, sink, hi) / G;
    }
  }
}

std::vector<float> clipped_mean(const std::vector<double>& sums, int n_steps) {
  std::vector<float> alpha(sums.size());  // [L, Hkv]
  for (size_t i = 0; i < sums.size(); ++i) {
    alpha[i] = (float)std::clamp(sums[i] / n_steps, 0.0, 1.0);
  }
  return alpha;
}

void check_window(int sink, int recent) {
  if (sink < 0) throw input_error("sink", "must be >= 0");
  if (recent < 0) throw input_error("recent", "must be >= 0");
}

}  // namespace

AlphaAccumulator::AlphaAccumulator(const ModelShape& shape, int sink, int recent)
    : shape_(shape), sink_(sink), recent_(recent), sums_((size_t)shape.n_layers * shape.n_kv_heads, 0.0) {
  check_window(sink, recent);
}

void AlphaAccumulator::add_step(std::span<const float> rows, int row_len, int q_pos) {
  check_step(shape_, rows.size(), row_len, q_pos);
  add_outside_mass(shape_, rows.data(), row_len, q_pos, sink_, recent_, sums_);
  ++n_steps_;
}

std::vector<float> AlphaAccumulator::alpha() const {
  if (n_steps_ == 0) throw input_error("attention rows", "no decode steps to profile alpha on");
  return clipped_mean(sums_, n_steps_);
}

std::vector<float> profile_alpha(const TraceReader& trace, int sink, int recent) {
  const TraceMeta& meta = trace.meta();
  AlphaAccumulator acc(meta.shape, sink, recent);
  if (meta.n_steps <= 0) throw input_error(trace.path(), "no decode steps to profile alpha on");
  std::vector<int32_t> qpos = trace.decode_query_pos();  // [n_steps]
  std::vector<float> rows, lse;                          // [L, H, T], [L, H]
  for (int s = 0; s < meta.n_steps; ++s) {
    trace.read_decode_step(s, rows, lse);
    acc.add_step(rows, meta.total_len(), qpos.at(s));
  }
  return acc.alpha();
}

std::vector<float> profile_alpha_from_rows(const ModelShape& shape, std::span<const float> rows,
                                           int row_len, std::span<const int> q_pos, int sink,
                                           int recent) {
  AlphaAccumulator acc(shape, sink, recent);
  const size_t step = (size_t)shape.n_layers * shape.n_heads * row_len;
  if (rows.size() != step * q_pos.size()) throw input_error("attention rows", "size does not match [steps, L, H, T]");
  for (size_t s = 0; s < q_pos.size(); ++s) acc.add_step(rows.subspan(s * step, step), row_len, q_pos[s]);
  return acc.alpha();
}

}  // namespace kvs
