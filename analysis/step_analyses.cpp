// StepAnalyses: head statistics and the OmniKV similarity summed step by step, then written as
// their means.
#include "analysis/step_analyses.h"

#include <string>

#include "analysis/similarity.h"
#include "analysis/trace.h"

namespace kvs {

StepAnalyses::StepAnalyses(const ModelShape& shape, int prompt_len)
    : shape_(shape), prompt_len_(prompt_len), k_(default_similarity_k(prompt_len)), heads_(shape, {}),
      sim_sum_(static_cast<size_t>(shape.n_layers) * shape.n_layers, 0.0) {}

void StepAnalyses::add(int q_pos, std::span<const float> rows, std::span<const float> lse) {
  const int row_len = (int)(rows.size() / ((size_t)shape_.n_layers * shape_.n_heads));  // > q_pos, zeros after it
  heads_.add_step(rows, row_len, q_pos);
  const auto s = step_similarity(rows, lse, shape_.n_layers, shape_.n_heads, row_len, prompt_len_, k_);
  for (size_t i = 0; i < s.size(); ++i) sim_sum_[i] += s[i];
  ++steps_;
}

void StepAnalyses::write(TraceWriter& w) const {
  if (steps_ == 0) return;
  const uint64_t L = shape_.n_layers, H = shape_.n_heads;
  const HeadStats st = heads_.finish();
  w.write_array("/heads/sink_mass", {"sink_mass", {L, H}, st.sink_mass},
                {{"definition", "mean decode-row mass on keys [0, 4)"}});
  w.write_array("/heads/locality", {"locality", {L, H}, st.locality},
                {{"definition", "mean decode-row mass on the last 32 keys"}});
  w.write_array("/heads/entropy", {"entropy", {L, H}, st.entropy}, {{"definition", "mean decode-row entropy, nats"}});
  NamedArray sim{"similarity", {L, L}, std::vector<float>(sim_sum_.size())};
  for (size_t i = 0; i < sim_sum_.size(); ++i) sim.data[i] = static_cast<float>(sim_sum_[i] / steps_);
  w.write_array("/layers/similarity", sim,
                {{"definition", "OmniKV inter-layer similarity (docs/analyses.md), mean over decode steps"},
                 {"k", std::to_string(k_)}});
}

}  // namespace kvs
