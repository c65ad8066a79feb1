// Progress reports and stopping for the engine runs that recording and the live policy drivers
// make: a long prompt's prefill (a minute on two cores at 8K tokens) reports each layer and can be
// stopped at the next one; decode reports each step and stops between steps.
#pragma once
#include <exception>
#include <functional>
#include <span>
#include <utility>

#include "inference/hooks.h"

namespace kvs {

struct RunProgress {
  // Layer `layer` of `n_layers` has begun its prompt attention (the layers before it are done);
  // (n_layers, n_layers) once the prompt is through.
  std::function<void(int layer, int n_layers)> on_prefill_layer;
  std::function<void(int step, int total)> on_step;  // decode step `step` (0-based) of `total` done
  std::function<bool()> cancelled;                   // true = stop at the next layer or step
};

// Thrown by a run that `cancelled` stopped; the run's results are incomplete and not returned.
struct RunCancelled : std::exception {
  const char* what() const noexcept override { return "cancelled"; }
};

// Reports prefill progress by layer from the attention evidence as it streams by: a layer's first
// block of rows (or, on a GPU, its first summary). Asks for no rows of its own. At each layer it
// also polls `cancelled` and throws RunCancelled through the engine.
class PrefillProgress : public AttentionObserver {
 public:
  PrefillProgress(std::function<void(int, int)> report, std::function<bool()> cancelled)
      : report_(std::move(report)), cancelled_(std::move(cancelled)) {}
  void on_begin(const ModelConfig& config, std::span<const int> prompt) override;
  PrefillNeed prefill_need() const override { return {false, 0, 0}; }
  bool needs_decode_rows() const override { return false; }
  void on_attention(const AttentionBlock& b) override;
  void on_prefill_summary(const PrefillSummary& s) override;
  void on_prefill_end(int prompt_len) override;

 private:
  void layer_begins(int layer);
  std::function<void(int, int)> report_;
  std::function<bool()> cancelled_;
  int n_layers_ = 0;
};

}  // namespace kvs
