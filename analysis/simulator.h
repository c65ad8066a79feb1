// The first policy driver: replays recorded full-attention decode rows through one or more
// policies over position-only caches (DESIGN.md "one policy, two drivers"), recording the kept
// sets and per-step metrics of each run. All policies advance together, reading each step once.
#pragma once
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "analysis/policy.h"
#include "analysis/trace.h"

namespace kvs {

struct SimulateOptions {
  int block_size = 16;  // paged-allocation block (vLLM's default)
  bool metrics = true;
  // DuoAttention gates [L, Hkv] for policies with gates=estimated (those with gates=profiled,
  // the default, are profiled from the trace's decode rows: alpha_source "profiled from trace").
  std::vector<float> alpha;
  std::string alpha_source;
  // KVzip repeat-pass scores [L, Hkv, P] to use in place of the source's
  // PrefillEvidence::key_scores (e.g. computed with --model for a trace without them).
  std::vector<float> key_scores;
  // Step `step` (0-based) of `total` replayed for every policy: a trace of GBs takes minutes.
  std::function<void(int step, int total)> on_step;
};

// Where the recorded decode steps come from.
class StepSource {
 public:
  virtual ~StepSource() = default;
  virtual ModelShape shape() const = 0;
  virtual int prompt_len() const = 0;           // P
  virtual int n_steps() const = 0;
  virtual int total_len() const = 0;            // T: row length
  virtual int query_pos(int step) const = 0;    // q_s
  virtual const PrefillEvidence& prefill() const = 0;
  // rows [L, H, T] (zero past q_s, each row sums to 1), lse [L, H].
  virtual void read_step(int step, std::vector<float>& rows, std::vector<float>& lse) = 0;
};

// An in-memory recording (unit tests, benchmarks).
struct SimInput {
  ModelShape shape;
  int prompt_len = 0;
  int n_steps = 0;
  int total_len = 0;            // T
  std::vector<int32_t> q_pos;   // [n_steps]; empty = prompt_len + step
  std::vector<float> rows;      // [n_steps, L, H, T]
  std::vector<float> lse;       // [n_steps, L, H]
  PrefillEvidence prefill;
};

// Runs every policy over the source; returns one RunData per policy, in order (name, policy,
// params, budget, eviction "simulated", kept [n_steps, L, Hkv, T]: 1 attended, 2 held but
// inactive, 0 absent; metrics [n_steps, L, Hkv]). Throws InputError (before any work) when the
// source lacks what a policy needs.
std::vector<RunData> simulate(StepSource& source, std::span<Policy* const> policies, const SimulateOptions& options);
std::vector<RunData> simulate(const SimInput& input, std::span<Policy* const> policies, const SimulateOptions& options);
std::vector<RunData> simulate(const TraceReader& trace, std::span<Policy* const> policies, const SimulateOptions& options);

// The simulator's per-step metrics (recall, topk_miss, kept, evicted, inactive, kv_bytes,
// paged_bytes_freed; no hh_turnover, which needs the policy's score-selected sets) of runs that
// carry their own kept sets (live runs), measured against the source's recorded rows, and
// added to each run's metrics (replacing any of the same name) with its block_size scalar. Steps from compare_until[i] on of
// run i hold NaN recall and topk_miss: the recorded rows there belong to another text.
void add_kept_set_metrics(StepSource& source, std::span<RunData> runs, std::span<const int> compare_until,
                          int block_size);
void add_kept_set_metrics(const SimInput& input, std::span<RunData> runs, std::span<const int> compare_until,
                          int block_size);
// The same over a trace's rows; a run compares until the first position where its tokens differ
// from the trace's.
void add_kept_set_metrics(const TraceReader& trace, std::span<RunData> runs, int block_size);

// The same with no recorded rows to measure against (a live run recorded under its own policy,
// whose trace rows are its own, at query positions prompt_len + step of its tokens [T]): the
// count metrics (kept, evicted, inactive, kv_bytes, paged_bytes_freed) and block_size; recall
// and topk_miss NaN.
void add_kept_set_counts(const ModelShape& shape, int prompt_len, RunData& run, int block_size);

// Throws InputError naming the trace when it has no decode steps: every metric of a run, simulated
// or live, is a mean over them. simulate() checks it; live re-runs call it themselves.
void require_decode_steps(const TraceReader& trace);
RunData simulate(const TraceReader& trace, Policy& policy, const SimulateOptions& options);

}  // namespace kvs
