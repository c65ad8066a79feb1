// StepAnalyses: the per-step analyses `kvscope record` computes as a recording's decode steps
// stream by (head statistics and OmniKV's inter-layer similarity), fed the recorder's assembled
// rows (TraceRecorder::on_step) and written into the trace once the recording ends.
#pragma once
#include <span>
#include <vector>

#include "analysis/head_stats.h"
#include "analysis/shape.h"

namespace kvs {

class TraceWriter;

class StepAnalyses {
 public:
  StepAnalyses(const ModelShape& shape, int prompt_len);
  // rows: [L, H, row_len] decode rows of the query at q_pos (zeros past it); lse: [L, H].
  void add(int q_pos, std::span<const float> rows, std::span<const float> lse);
  // /heads/{sink_mass,locality,entropy} and /layers/similarity, means over the steps added;
  // nothing when no step was.
  void write(TraceWriter& w) const;

 private:
  ModelShape shape_;
  int prompt_len_, k_;
  HeadStatsAccumulator heads_;
  std::vector<double> sim_sum_;  // [L, L]
  int steps_ = 0;
};

}  // namespace kvs
