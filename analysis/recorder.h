// TraceRecorder: the AttentionObserver that turns a generation into an HDF5 trace — prefill
// reductions (and the full map within a memory budget), one dense decode row per (layer, head)
// per step written and flushed as each step completes, and the token ids fed. Writing
// (compression, I/O) runs on a background thread so that it overlaps the next step's compute.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "analysis/prefill_evidence.h"
#include "analysis/serial_worker.h"
#include "analysis/trace.h"
#include "inference/hooks.h"

namespace kvs {

inline constexpr std::size_t kDefaultCaptureBudget = 256u << 20;  // bytes of fp32 prefill map
inline constexpr int kDefaultPrefillWindow = 64;

class TraceRecorder : public AttentionObserver {
 public:
  // `meta` must carry the model shape and prompt_len (the caller has tokenized the prompt), plus
  // whatever descriptive fields it knows (model, paths, prompt text, sampling, decode_dtype).
  // Creates the temporary trace file now, so an unwritable output fails before any compute:
  // throws InputError("<out_path>: cannot create trace (...)"). A recording the host has too
  // little memory for (its prefill evidence and decode rows) is refused first, with nothing made:
  // InputError("prompt (N tokens): needs ... of host memory for ...").
  TraceRecorder(const std::string& out_path, const TraceMeta& meta, int max_steps,
                std::size_t capture_budget_bytes = kDefaultCaptureBudget, int window = kDefaultPrefillWindow);
  ~TraceRecorder() override;  // without finish(): stops writing and removes the temporary file

  void on_begin(const ModelConfig& config, std::span<const int> prompt) override;
  void on_attention(const AttentionBlock& block) override;
  // A layer's decode rows: each checked and given its place in the step, then copied on several
  // threads when they are long (parallel_row_keys keys or more).
  void on_attention_heads(std::span<const AttentionBlock> heads) override;
  // Rows while the full prefill map fits the capture budget, the reductions otherwise.
  PrefillNeed prefill_need() const override;
  void on_prefill_summary(const PrefillSummary& summary) override { reducer_.on_prefill_summary(summary); }
  void on_prefill_end(int prompt_len) override;
  void on_token(int pos, int token) override;

  // Waits for pending writes, then commits the trace with the steps completed so far (fewer than
  // max_steps after EOS or a cancellation). texts[i] is the text of ids()[i]; both cover at least
  // prompt_len + steps. A write error from the background thread surfaces here, or at the next
  // observer call, as the InputError TraceWriter threw.
  void finish(const std::vector<std::string>& texts);
  void finish(const std::function<std::string(int token)>& text_of);

  // Called with each completed step, in step order: rows [L, H, W] (W = rows.size() / (L·H) >
  // q_pos: the writer's decode_row_width(); zeros where a key was not attended and past q_pos),
  // lse [L, H]. By default on the engine's thread before the step is written; with
  // on_step_in_background, on a thread of its own while the writing thread writes the step, so
  // that per-step analyses overlap both the engine and the writing where cores are free for them
  // (a GPU run; on a CPU run whose decode threads fill every core, a background thread only gets
  // them late and holds the engine up through its queue). Set both before recording starts; what
  // on_step throws in the background surfaces as a write error does. writer() and finish() wait
  // for calls still pending.
  std::function<void(int step, int q_pos, std::span<const float> rows, std::span<const float> lse)> on_step;
  bool on_step_in_background = false;
  // on_attention_heads copies a layer's rows on several threads when they have this many keys
  // or more (32 KB rows; below, waking threads costs more than the copy).
  static constexpr int kDefaultParallelRowKeys = 8192;
  int parallel_row_keys = kDefaultParallelRowKeys;

  const std::vector<int32_t>& ids() const { return ids_; }  // [positions fed so far]
  int steps_written() const { return steps_written_; }  // complete steps (written or queued)
  const TraceMeta& meta() const { return meta_; }
  TraceMeta& meta() { return meta_; }  // descriptive fields may still change before finish()
  const PrefillEvidence& prefill() const { return reducer_.evidence(); }
  const std::string& capture_note() const { return meta_.capture_note; }
  // Waits for pending writes (into the file: TraceWriter::settle) and returns the writer, e.g.
  // for write_array("/layers/similarity").
  TraceWriter& writer();

 private:
  void write_step();
  void drain();  // waits for the writing and the background on_step calls
  // A decode row in three parts, so that a layer's rows can be copied in parallel: its place in
  // the step being assembled (starting the step; checks that it belongs there), the copy of its
  // probabilities (scattered by key position when not every key was attended; touches only that
  // row), then its lse and the step's count (writing the step once every row is in).
  void check_block(const AttentionBlock& b) const;  // throws when b is outside the model
  float* claim_decode_row(const AttentionBlock& b);
  static void fill_decode_row(const AttentionBlock& b, float* row);
  void finish_decode_row(const AttentionBlock& b);

  TraceMeta meta_;
  int max_steps_;
  std::unique_ptr<TraceWriter> writer_;
  PrefillReducer reducer_;
  bool capture_map_ = false;
  std::vector<float> prefill_map_;  // [L, H, P, P] full prompt attention, when within budget
  std::vector<int32_t> ids_;        // [positions fed]
  // The decode step being assembled.
  int step_ = -1;                    // -1: none in progress
  int step_q_pos_ = 0;
  int row_width_ = 0;                // W: the writer's decode_row_width()
  std::vector<float> step_rows_;     // [L, H, W], zeros past q_pos
  // Step buffers the writing thread has finished with, reused by later steps (a fresh vector per
  // step paid its page faults and zeroing on the engine's thread: 16 MB a step at 4K keys on an
  // 8B model).
  struct RowPool {
    std::mutex mutex;
    std::vector<std::vector<float>> free;
    std::vector<float> take();
    void give(std::vector<float>&& rows);
  };
  RowPool row_pool_;
  std::vector<float> step_lse_;      // [L, H]
  std::vector<uint8_t> step_seen_;   // [L, H] 1 once that row arrived
  std::vector<float*> heads_rows_;   // [heads] on_attention_heads: each block's row in step_rows_
  int step_count_ = 0;               // rows arrived for this step
  int steps_written_ = 0;
  // Writing thread, and on_step's in the background (started with the first step); declared
  // last, so stopped before writer_ and row_pool_ go.
  std::unique_ptr<SerialWorker> pipe_;
  std::unique_ptr<SerialWorker> on_step_pipe_;
};

}  // namespace kvs
