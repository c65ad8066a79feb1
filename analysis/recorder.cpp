// TraceRecorder: prefill reductions (+ full map within budget), decode rows step by step, token
// ids; commits the trace on finish().
#include "analysis/recorder.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "analysis/parallel_for.h"
#include "inference/host_memory.h"
#include "inference/model.h"

namespace kvs {

namespace {

constexpr std::size_t kQueuedSteps = 4;  // completed steps that may wait for the writing thread

// "300.0 MiB", or "1.1 KiB" below a tenth of a MiB.
std::string size_text(uint64_t bytes) {
  char buf[32];
  const double mib = (double)bytes / (1024.0 * 1024.0);
  if (mib >= 0.1)
    std::snprintf(buf, sizeof buf, "%.1f MiB", mib);
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", (double)bytes / 1024.0);
  return buf;
}

uint64_t prefill_map_bytes(const TraceMeta& m) {
  const uint64_t L = m.shape.n_layers, H = m.shape.n_heads, P = m.prompt_len;
  return L * H * P * P * 4;
}

// Pooled overview when the full map is over budget: at most a quarter of the budget.
int overview_block(const TraceMeta& m, std::size_t budget) {
  if (prefill_map_bytes(m) <= budget) return 0;
  return pool_block_for(m.prompt_len, m.shape.n_layers, m.shape.n_heads, budget / 4);
}

// Host memory a recording holds at its peak: the prompt's evidence (column sums, the last W rows,
// the pooled overview), the full map when it fits the budget, and the decode step buffers (one
// being assembled, those queued for the writing and the background on_step, one running in each).
uint64_t recording_host_bytes(const TraceMeta& m, int max_steps, bool full_map, const PrefillReducer& reducer) {
  const uint64_t step = static_cast<uint64_t>(m.shape.n_layers) * m.shape.n_heads *
                        TraceWriter::decode_row_width(m.prompt_len, max_steps) * sizeof(float);
  return reducer.bytes_for(m.prompt_len) + (full_map ? prefill_map_bytes(m) : 0) + (2 * kQueuedSteps + 3) * step;
}

constexpr const char* kRecordingPurpose = "the recording's prefill evidence and decode rows on this model";

std::string prompt_text(const TraceMeta& m) { return "prompt (" + std::to_string(m.prompt_len) + " tokens)"; }

}  // namespace

TraceRecorder::TraceRecorder(const std::string& out_path, const TraceMeta& meta, int max_steps,
                             std::size_t capture_budget_bytes, int window)
    : meta_(meta), max_steps_(max_steps), reducer_(meta.shape, window, overview_block(meta, capture_budget_bytes)) {
  const uint64_t map_bytes = prefill_map_bytes(meta);
  capture_map_ = map_bytes <= capture_budget_bytes;
  meta_.has_prefill_map = capture_map_;
  meta_.n_steps = 0;
  if (!capture_map_) {
    const int W = std::min<int>(window, meta.prompt_len);
    const int block = reducer_.prefill_need().pool_block;
    meta_.capture_note = "prefill map of " + size_text(map_bytes) + " exceeds the capture budget of " +
                         size_text(capture_budget_bytes) + "; kept column sums, the last " + std::to_string(W) +
                         " rows and the map pooled in " + std::to_string(block) + " x " + std::to_string(block) +
                         " blocks";
  }
  // Refused before the file is made, rather than by the out-of-memory killer partway through.
  require_host_memory(prompt_text(meta), recording_host_bytes(meta, max_steps, capture_map_, reducer_),
                      kRecordingPurpose);
  writer_ = std::make_unique<TraceWriter>(out_path, meta_, max_steps);
  row_width_ = writer_->decode_row_width();
  pipe_ = std::make_unique<SerialWorker>(kQueuedSteps);
}

TraceRecorder::~TraceRecorder() {
  on_step_pipe_.reset();
  pipe_.reset();
}

void TraceRecorder::drain() {
  pipe_->drain();
  if (on_step_pipe_) on_step_pipe_->drain();
}

TraceWriter& TraceRecorder::writer() {
  drain();
  writer_->settle();
  return *writer_;
}

void TraceRecorder::on_begin(const ModelConfig& config, std::span<const int> prompt) {
  const ModelShape& s = meta_.shape;
  if (config.n_layers != s.n_layers || config.n_heads != s.n_heads || config.n_kv_heads != s.n_kv_heads ||
      (int)prompt.size() != meta_.prompt_len)
    throw std::invalid_argument("TraceRecorder: the model or prompt differs from the trace's meta");
  if (steps_written_ > 0 || !ids_.empty()) throw std::logic_error("TraceRecorder: records one sequence only");
  try {
    reducer_.on_begin(config, prompt);
    if (capture_map_)
      prefill_map_.assign((size_t)s.n_layers * s.n_heads * meta_.prompt_len * meta_.prompt_len, 0.0f);
  } catch (const std::bad_alloc&) {  // memory taken since the constructor's check
    throw host_memory_error(prompt_text(meta_),
                            recording_host_bytes(meta_, max_steps_, capture_map_, reducer_),
                            kRecordingPurpose, host_memory_available());
  }
}

PrefillNeed TraceRecorder::prefill_need() const {
  PrefillNeed need = reducer_.prefill_need();
  need.rows = capture_map_;
  return need;
}

void TraceRecorder::check_block(const AttentionBlock& b) const {
  if (b.layer < 0 || b.layer >= meta_.shape.n_layers || b.head < 0 || b.head >= meta_.shape.n_heads)
    throw std::logic_error("TraceRecorder: attention block outside the model's layers/heads");
}

void TraceRecorder::on_attention(const AttentionBlock& b) {
  const int H = meta_.shape.n_heads, P = meta_.prompt_len;
  check_block(b);
  if (!b.decode) {
    reducer_.on_attention(b);
    if (prefill_map_.empty()) return;
    float* map = prefill_map_.data() + ((size_t)b.layer * H + b.head) * P * P;  // [P, P]
    for (int r = 0; r < b.n_q; ++r) {
      const int q = b.q_pos0 + r;
      if (q < 0 || q >= P) continue;
      for (int j = 0; j < b.n_keys; ++j) {
        const int k = b.key(j);
        if (k >= 0 && k < P) map[(size_t)q * P + k] = b.probs[(size_t)r * b.n_keys + j];
      }
    }
    return;
  }
  float* row = claim_decode_row(b);
  fill_decode_row(b, row);
  finish_decode_row(b);
}

void TraceRecorder::on_attention_heads(std::span<const AttentionBlock> heads) {
  if (heads.empty() || !heads[0].decode) {
    for (const AttentionBlock& b : heads) on_attention(b);
    return;
  }
  heads_rows_.resize(heads.size());
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const AttentionBlock& b = heads[i];
    check_block(b);
    if (!b.decode) throw std::logic_error("TraceRecorder: a prefill block among a layer's decode rows");
    heads_rows_[i] = claim_decode_row(b);
  }
  // Long rows are copied on several threads: at 32K keys an 8B model's step is 134 MB, more than
  // one thread copies while the GPU computes the step.
  const bool wide = heads[0].n_keys >= parallel_row_keys;
  parallel_for(static_cast<int>(heads.size()), [&](int i) { fill_decode_row(heads[i], heads_rows_[i]); }, wide);
  for (const AttentionBlock& b : heads) finish_decode_row(b);
}

float* TraceRecorder::claim_decode_row(const AttentionBlock& b) {
  const int L = meta_.shape.n_layers, H = meta_.shape.n_heads, P = meta_.prompt_len;
  const int q = b.q_pos0;
  const int step = q - P;
  if (b.n_q != 1 || step < 0 || step >= max_steps_)
    throw std::logic_error("TraceRecorder: decode block at position " + std::to_string(q) + " outside the recording");
  if (step_ != step) {
    if (step_ != -1 || step != steps_written_)
      throw std::logic_error("TraceRecorder: decode step " + std::to_string(step) + " began before step " +
                             std::to_string(step_ == -1 ? steps_written_ : step_) + " completed");
    step_ = step;
    step_q_pos_ = q;
    // Rows as wide as the writer's chunks, which it then writes as they are. Past q they hold
    // zeros: a fresh buffer's, or a reused one's from an earlier step of this recording, whose
    // rows were shorter.
    step_rows_ = row_pool_.take();
    step_rows_.resize((size_t)L * H * row_width_);
    step_lse_.assign((size_t)L * H, 0.0f);
    step_seen_.assign((size_t)L * H, 0);
    step_count_ = 0;
  }
  const size_t idx = (size_t)b.layer * H + b.head;
  if (step_seen_[idx]) throw std::logic_error("TraceRecorder: a decode row arrived twice");
  step_seen_[idx] = 1;
  return step_rows_.data() + idx * row_width_;  // [row_width_], keys 0..q written here
}

void TraceRecorder::fill_decode_row(const AttentionBlock& b, float* row) {
  const int q = b.q_pos0;
  if (b.n_keys == q + 1 && b.key(0) == 0 && b.key(q) == q) {
    // Every position 0..q (held positions ascend and are distinct): the row as it came.
    std::memcpy(row, b.probs, (size_t)(q + 1) * sizeof(float));
  } else {
    std::fill(row, row + q + 1, 0.0f);  // evicted or skipped keys
    for (int j = 0; j < b.n_keys; ++j) {
      const int k = b.key(j);
      if (k < 0 || k > q) throw std::logic_error("TraceRecorder: decode key past its query");
      row[k] = b.probs[j];
    }
  }
}

void TraceRecorder::finish_decode_row(const AttentionBlock& b) {
  const int L = meta_.shape.n_layers, H = meta_.shape.n_heads;
  step_lse_[(size_t)b.layer * H + b.head] = b.lse ? b.lse[0] : 0.0f;
  if (++step_count_ == L * H) write_step();
}

std::vector<float> TraceRecorder::RowPool::take() {
  std::lock_guard<std::mutex> lock(mutex);
  if (free.empty()) return {};
  std::vector<float> rows = std::move(free.back());
  free.pop_back();
  return rows;
}

void TraceRecorder::RowPool::give(std::vector<float>&& rows) {
  std::lock_guard<std::mutex> lock(mutex);
  free.push_back(std::move(rows));
}

void TraceRecorder::write_step() {
  if (on_step && !on_step_in_background) on_step(step_, step_q_pos_, step_rows_, step_lse_);
  // The step's rows go back to the pool once both the writing and the background on_step are done.
  struct Step {
    int step, q_pos;
    std::vector<float> rows, lse;  // [L, H, W], [L, H]
  };
  const std::shared_ptr<const Step> done(new Step{step_, step_q_pos_, std::move(step_rows_), std::move(step_lse_)},
                                         [pool = &row_pool_](Step* s) {
                                           pool->give(std::move(s->rows));
                                           delete s;
                                         });
  if (on_step && on_step_in_background) {
    if (!on_step_pipe_) on_step_pipe_ = std::make_unique<SerialWorker>(kQueuedSteps, "kvs-step-stats");
    on_step_pipe_->submit([cb = &on_step, done] { (*cb)(done->step, done->q_pos, done->rows, done->lse); });
  }
  pipe_->submit([w = writer_.get(), done] { w->write_decode_step(done->step, done->q_pos, done->rows, done->lse); });
  step_rows_.clear();
  step_lse_.clear();
  ++steps_written_;
  step_ = -1;
}

void TraceRecorder::on_prefill_end(int prompt_len) {
  // The evidence is final once prefill ends (the reducer ignores decode blocks).
  pipe_->submit([w = writer_.get(), ev = &reducer_.evidence(), map = std::move(prefill_map_)] {
    w->write_prefill(*ev, map);
  });
  prefill_map_.clear();
}

void TraceRecorder::on_token(int pos, int token) {
  if (pos != (int)ids_.size())
    throw std::logic_error("TraceRecorder: token at position " + std::to_string(pos) + ", expected " +
                           std::to_string(ids_.size()));
  ids_.push_back(token);
}

void TraceRecorder::finish(const std::vector<std::string>& texts) {
  drain();
  step_ = -1;  // a step cut short by cancellation is dropped
  const size_t T = (size_t)meta_.prompt_len + steps_written_;
  if (ids_.size() < T || texts.size() < T)
    throw std::logic_error("TraceRecorder::finish: " + std::to_string(T) + " tokens and texts needed");
  meta_.n_steps = steps_written_;
  const std::vector<int32_t> ids(ids_.begin(), ids_.begin() + T);
  const std::vector<std::string> kept_texts(texts.begin(), texts.begin() + T);
  writer_->commit(meta_, ids, kept_texts);
}

void TraceRecorder::finish(const std::function<std::string(int token)>& text_of) {
  std::vector<std::string> texts;
  texts.reserve(ids_.size());
  for (int32_t id : ids_) texts.push_back(text_of(id));
  finish(texts);
}

}  // namespace kvs
