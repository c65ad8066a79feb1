// PrefillProgress: layer-by-layer prefill reports and stopping (run_progress.h).
#include "analysis/run_progress.h"

#include "inference/model.h"

namespace kvs {

void PrefillProgress::on_begin(const ModelConfig& config, std::span<const int>) { n_layers_ = config.n_layers; }

void PrefillProgress::on_attention(const AttentionBlock& b) {
  if (!b.decode && b.head == 0 && b.q_pos0 == 0) layer_begins(b.layer);
}

void PrefillProgress::on_prefill_summary(const PrefillSummary& s) {
  if (s.head == 0) layer_begins(s.layer);
}

void PrefillProgress::on_prefill_end(int) {
  if (report_) report_(n_layers_, n_layers_);
}

void PrefillProgress::layer_begins(int layer) {
  if (cancelled_ && cancelled_()) throw RunCancelled{};
  if (report_) report_(layer, n_layers_);
}

}  // namespace kvs
