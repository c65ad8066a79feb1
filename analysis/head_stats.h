// Per-head statistics of decode attention: sink mass, locality, entropy (per query head and per
// KV head), and the trace-profiled DuoAttention gate (mass outside sink + recent per KV head).
#pragma once
#include <span>
#include <vector>

#include "analysis/shape.h"

namespace kvs {

class TraceReader;

struct HeadStatsOptions {
  int sinks = 4;           // sink mass: keys [0, sinks)
  int local_window = 32;   // locality: keys [q - local_window + 1, q], the query's own included
};

struct HeadStats {
  ModelShape shape;
  int n_steps = 0;
  HeadStatsOptions options;
  std::vector<float> sink_mass;     // [L, H] mean over steps of the row mass on the sinks
  std::vector<float> locality;      // [L, H] mean mass on the last local_window keys
  std::vector<float> entropy;       // [L, H] mean Shannon entropy of the row, nats
  std::vector<float> kv_sink_mass;  // [L, Hkv] mean of the group's query heads
  std::vector<float> kv_locality;   // [L, Hkv]
  std::vector<float> kv_entropy;    // [L, Hkv]
};

// Sums per-step row statistics; usable over a trace or over rows computed elsewhere.
class HeadStatsAccumulator {
 public:
  HeadStatsAccumulator(const ModelShape& shape, HeadStatsOptions options);
  // rows: [L, H, row_len] decode rows of the query at q_pos (keys past q_pos are 0).
  void add_step(std::span<const float> rows, int row_len, int q_pos);
  HeadStats finish() const;  // throws InputError when no step was added
 private:
  ModelShape shape_;
  HeadStatsOptions options_;
  int n_steps_ = 0;
  std::vector<double> sink_, local_, entropy_;  // [L, H] sums over steps
};

// Statistics over every decode step of a trace (read one step at a time).
HeadStats head_stats(const TraceReader& trace, const HeadStatsOptions& options = {});

// Accumulates the trace-profiled DuoAttention gates step by step (see profile_alpha).
class AlphaAccumulator {
 public:
  // Throws InputError for negative sink/recent.
  AlphaAccumulator(const ModelShape& shape, int sink, int recent);
  // rows: [L, H, row_len] decode rows of the query at q_pos.
  void add_step(std::span<const float> rows, int row_len, int q_pos);
  std::vector<float> alpha() const;  // [L, Hkv]; throws InputError when no step was added
 private:
  ModelShape shape_;
  int sink_, recent_, n_steps_ = 0;
  std::vector<double> sums_;  // [L, Hkv] outside mass summed over steps
};

// Trace-profiled DuoAttention gates: per (layer, KV head), the mean over decode steps and over
// the group's query heads of the attention mass outside [0, sink) ∪ [q - recent, q] (the keys a
// streaming head with `sink` sinks and `recent` carried recent keys attends), clipped to [0, 1].
// Returns [L, Hkv]. Throws InputError on a trace without decode steps or negative sink/recent.
std::vector<float> profile_alpha(const TraceReader& trace, int sink, int recent);
// The same over in-memory steps: rows [n_steps, L, H, row_len], q_pos [n_steps].
std::vector<float> profile_alpha_from_rows(const ModelShape& shape, std::span<const float> rows,
                                           int row_len, std::span<const int> q_pos, int sink,
                                           int recent);

}  // namespace kvs
