// HDF5 trace files (docs/trace-format.md): writing a recording step by step under a temporary
// name, reading it back lazily, and appending runs atomically.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "analysis/prefill_evidence.h"
#include "analysis/shape.h"

namespace kvs {

inline constexpr int kTraceSchemaVersion = 1;

struct TraceMeta {
  int schema_version = kTraceSchemaVersion;
  std::string writer_version;
  std::string created;         // ISO 8601 UTC
  std::string model;           // model name
  std::string model_path;      // file or folder the model was loaded from
  std::string tokenizer_path;  // "" when taken from the model file
  std::string arch;
  std::string device = "cpu";
  std::string device_dtype = "fp32";  // the cache's type (on cuda the weights' too): fp32 | fp16 | bf16
  ModelShape shape;
  int vocab_size = 0;
  int prompt_len = 0;          // P
  int n_steps = 0;             // decode steps recorded
  std::string prompt;          // prompt text
  float temperature = 0.0f;
  float top_p = 1.0f;
  uint64_t seed = 0;
  std::string decode_dtype = "float32";  // float32 | float16 storage of /attention/decode
  bool has_prefill_map = false;           // /attention/prefill present
  std::string capture_note;               // e.g. why the prefill map was reduced
  std::string recorded_under;             // run name of the policy enforced while recording; "" = full cache
  int total_len() const { return prompt_len + n_steps; }  // T
};

// A named float32 array with its shape (per-step metrics, head statistics, ...).
struct NamedArray {
  std::string name;
  std::vector<uint64_t> dims;
  std::vector<float> data;
};

// Block-pooled prefill map of one (layer, head): cell (a, b) is the mean over the queries
// a*block.. of their attention mass on keys b*block.. (each row sums to 1).
struct PooledMap {
  int block = 0;             // positions per cell side; 0: the trace has no pooled map
  int n = 0;                 // cells per side, ceil(P / block)
  std::vector<float> cells;  // [n, n]
};

// One /runs/<name> group.
struct RunData {
  std::string name;
  std::string policy;
  std::string params_json;
  std::string eviction = "simulated";  // simulated | real
  std::string mode;                    // live runs: forced | free
  // Live runs: where the model ran ("cpu" | "cuda") and what it stored its cache (on cuda its
  // weights too) in ("fp32", "fp16", "bf16"); empty for simulated runs and live runs written
  // before they existed.
  std::string device, device_dtype;
  int budget = 0;
  std::vector<uint8_t> kept;           // [n_steps, L, Hkv, T]: 1 attended, 2 inactive, 0 absent
  std::vector<NamedArray> metrics;     // per-step metrics, written under /runs/<name>/metrics
  // Live runs only:
  std::vector<int32_t> tokens;         // [T] the run's own tokens
  std::string text;                    // its generated text
  std::vector<float> attention;        // [n_steps, L, H, T] its own decode rows, or empty
  std::vector<float> lse;              // [n_steps, L, H]
  std::vector<std::pair<std::string, double>> scalars;  // per-run numbers as attributes
};

class TraceWriter {
 public:
  // Starts a recording that will become `final_path` on commit() (through a symbolic link: the
  // file it leads to); until then it lives under a temporary sibling name. Throws InputError when
  // the folder is not writable, or `final_path` exists and is not an HDF5 file or not a regular
  // file (a device, a FIFO, a folder, a link to nothing).
  TraceWriter(const std::string& final_path, const TraceMeta& meta, int max_steps);
  ~TraceWriter();  // removes the temporary file unless committed
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // rows: [L, H, W] with q_pos < W <= decode_row_width() (zeros past q_pos), lse: [L, H]. Rows
  // decode_row_width() wide are written as they are (float32, unpacked: no copy). Flushed step by
  // step; the bytes reach the file in the background (analysis/h5_direct_driver.h), at most a
  // step or two behind.
  void write_decode_step(int step, int q_pos, std::span<const float> rows, std::span<const float> lse);
  // The widest row write_decode_step takes: prompt_len + max_steps (its chunks' width).
  int decode_row_width() const;
  // The same for a trace of that prompt length and steps, before a writer exists.
  static int decode_row_width(int prompt_len, int max_steps) { return prompt_len + std::max(max_steps, 1); }
  // Waits until everything written so far is in the temporary file.
  void settle();
  // Reductions always; `full_map` [L, H, P, P] or empty when over the size limit.
  void write_prefill(const PrefillEvidence& evidence, std::span<const float> full_map);
  void write_array(const std::string& path, const NamedArray& array,
                   const std::vector<std::pair<std::string, std::string>>& string_attrs = {});
  void write_run(const RunData& run);
  // Writes tokens and final attributes, closes, fsyncs and renames to the final path.
  void commit(const TraceMeta& meta, std::span<const int32_t> ids, const std::vector<std::string>& texts);
  const std::string& temp_path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TraceReader {
 public:
  // Throws InputError("<path>: ...") for a file that is not HDF5, not a kvscope trace, of a newer
  // schema, or missing/truncated datasets.
  explicit TraceReader(const std::string& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  const TraceMeta& meta() const;
  const std::string& path() const;
  std::vector<int32_t> token_ids() const;          // [T]
  std::vector<std::string> token_texts() const;    // [T]
  std::vector<int32_t> decode_query_pos() const;   // [n_steps]
  // Decode rows of one step: rows [L, H, T], lse [L, H]. Reads only that step.
  void read_decode_step(int step, std::vector<float>& rows, std::vector<float>& lse) const;
  // The prompt's reductions policies read (/attention/prefill_colsum, prefill_window and its
  // prefill_window_lse; prefill_key_scores where present). Throws InputError where they are absent
  // (has_prefill_evidence: an external writer may leave them out).
  PrefillEvidence read_prefill() const;
  bool has_prefill_evidence() const;
  // Full prefill map of one (layer, head), [P, P]; empty when the trace kept only reductions.
  std::vector<float> read_prefill_map(int layer, int head) const;
  // Pooled prefill overview of one (layer, head) (/attention/prefill_pooled); block 0 when absent.
  PooledMap read_prefill_pooled(int layer, int head) const;
  bool has_array(const std::string& path) const;
  bool has_attr(const std::string& path, const std::string& attr) const;
  NamedArray read_array(const std::string& path) const;  // e.g. "/heads/alpha", "/layers/similarity"
  std::string read_string_attr(const std::string& path, const std::string& attr) const;
  std::vector<std::string> run_names() const;
  // Run attributes, metrics and tokens; kept, attention and lse (all steps) when with_kept —
  // else use read_run_kept_step / read_run_attention_step.
  RunData read_run(const std::string& name, bool with_kept) const;
  // Steps a run holds: n_steps, or fewer for a live run that stopped early (later steps read as 0).
  int run_steps(const std::string& name) const;
  void read_run_kept_step(const std::string& name, int step, std::vector<uint8_t>& kept) const;  // [L, Hkv, T]
  // A live run's own decode rows at one step: rows [L, H, T], lse [L, H]; both empty when absent.
  void read_run_attention_step(const std::string& name, int step, std::vector<float>& rows,
                               std::vector<float>& lse) const;

 private:
  struct Impl;
  TraceReader(const std::string& path, bool probe_first);
  std::unique_ptr<Impl> impl_;
};

// Adds runs to an existing trace atomically: the new file is written beside it and renamed over
// it, so a crash leaves the old complete trace. A run whose name exists is replaced. Updates of
// one trace by several processes take turns (an exclusive flock held from reading the trace to
// the rename), so none loses another's runs. Through a symbolic link the file it leads to is
// updated; the new file keeps the old one's permission bits and (where permitted) owner.
void append_runs(const std::string& path, std::span<const RunData> runs);
// Adds (or replaces) one float32 array, e.g. "/heads/alpha", in an existing trace, the same way.
void append_array(const std::string& path, const std::string& array_path, const NamedArray& array,
                  const std::vector<std::pair<std::string, std::string>>& string_attrs = {});
// Throws InputError unless appends to `path` can succeed: it must be a regular file (or a
// symbolic link to one) whose owner may write it ("is read-only" otherwise, also for root). For
// commands to check before their work; append_runs and append_array check it again.
void check_appendable(const std::string& path);

}  // namespace kvs
