// The simulator over a recorded HDF5 trace (TraceReader as a StepSource).
#include "analysis/simulator.h"

#include "inference/errors.h"

namespace kvs {
namespace {

// A trace without the prompt's reductions (an external writer's) gives an empty evidence: the
// policies that read it say so, the others (full, window, StreamingLLM, ...) run.
PrefillEvidence prefill_of(const TraceReader& t) {
  if (t.has_prefill_evidence()) return t.read_prefill();
  PrefillEvidence none;
  none.shape = t.meta().shape;
  none.prompt_len = t.meta().prompt_len;
  return none;
}

class TraceStepSource : public StepSource {
 public:
  explicit TraceStepSource(const TraceReader& t)
      : trace_(t), meta_(t.meta()), q_pos_(t.decode_query_pos()), prefill_(prefill_of(t)) {}
  ModelShape shape() const override { return meta_.shape; }
  int prompt_len() const override { return meta_.prompt_len; }
  int n_steps() const override { return meta_.n_steps; }
  int total_len() const override { return meta_.total_len(); }
  int query_pos(int s) const override { return q_pos_[s]; }
  const PrefillEvidence& prefill() const override { return prefill_; }
  void read_step(int s, std::vector<float>& rows, std::vector<float>& lse) override {
    trace_.read_decode_step(s, rows, lse);
  }

 private:
  const TraceReader& trace_;
  TraceMeta meta_;
  std::vector<int32_t> q_pos_;  // [n_steps]
  PrefillEvidence prefill_;
};

}  // namespace

std::vector<RunData> simulate(const TraceReader& trace, std::span<Policy* const> policies, const SimulateOptions& opt) {
  require_decode_steps(trace);
  TraceStepSource src(trace);
  return simulate(src, policies, opt);
}

void add_kept_set_metrics(const TraceReader& trace, std::span<RunData> runs, int block_size) {
  const std::vector<int32_t> ids = trace.token_ids();
  const int P = trace.meta().prompt_len;
  std::vector<int> until;  // [runs] the step fed the first token that differs from the trace's
  for (const RunData& run : runs) {
    int s = 0;
    while (P + s < (int)ids.size() && P + s < (int)run.tokens.size() && run.tokens[P + s] == ids[P + s]) ++s;
    until.push_back(s);
  }
  TraceStepSource src(trace);
  add_kept_set_metrics(src, runs, until, block_size);
}

void require_decode_steps(const TraceReader& trace) {
  if (trace.meta().n_steps <= 0) throw input_error(trace.path(), "no decode steps to run policies over");
}

RunData simulate(const TraceReader& trace, Policy& policy, const SimulateOptions& opt) {
  Policy* p = &policy;
  return std::move(simulate(trace, std::span<Policy* const>(&p, 1), opt).front());
}

}  // namespace kvs
