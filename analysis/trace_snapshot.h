// What the app keeps in memory of an open trace: everything small (meta, tokens, head and layer
// statistics, run summaries and metrics) loaded at open, and the data of one decode step
// (attention rows, each run's kept sets) loaded lazily when the step changes.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "analysis/trace.h"

namespace kvs {

// Names of the per-head statistics the app looks for under /heads, in display order.
const std::vector<std::string>& head_stat_names();

struct TraceSnapshot {
  std::string path;
  TraceMeta meta;
  std::vector<int32_t> token_ids;         // [T]
  std::vector<std::string> token_texts;   // [T]
  std::vector<int32_t> query_pos;         // [n_steps] position of each decode query
  std::vector<NamedArray> head_stats;     // "/heads/<name>" arrays found, [L, H] or [L, Hkv]
  std::vector<std::string> head_stat_sources;  // [head_stats] each one's "source" attribute, "" without one
  NamedArray similarity;                  // [L, L]; dims empty when the trace has none
  std::vector<RunData> runs;              // attributes, metrics, tokens, text (kept not loaded)
  std::string generated_text;             // decoded continuation of the recorded run

  int total_len() const { return (int)token_ids.size(); }
  int n_steps() const { return meta.n_steps; }
  const RunData* run(const std::string& name) const;
  // Position of step s's query (prompt_len + s when the trace lacks the dataset).
  int q_pos(int step) const;
};

// One decode step: the recorded attention rows and each run's kept sets at that step.
struct StepSnapshot {
  int step = -1;
  int q_pos = 0;
  std::vector<float> rows;                // [L, H, T]
  std::vector<std::vector<uint8_t>> kept; // per run of TraceSnapshot::runs: [L, Hkv, T]
  std::vector<std::vector<uint8_t>> kept_prev;  // the same at step - 1 (empty at step 0)
};

// Reads a snapshot; throws InputError as TraceReader does.
std::shared_ptr<TraceSnapshot> load_trace_snapshot(const TraceReader& reader);

// A token's text as it reads in running text. Token texts hold their characters (a newline token
// is a newline); traces written before that held SentencePiece byte tokens of ASCII control
// characters as the escape text "\x0A", which becomes the character again.
std::string running_text(const std::string& token_text);

// The text of consecutive tokens read together: running_text of each, with the "\xNN" escapes of
// a character split across byte tokens joined back into the character (bytes still not valid
// UTF-8 stay "\xNN").
std::string joined_text(std::span<const std::string> token_texts);

// A token's text for one line of display (labels, tooltips, tables, CSV): running_text with
// control characters written as escape text: newline as the two characters \n, tab \t, CR \r,
// the others \xNN.
std::string token_label(const std::string& token_text);

// Reads one step (rows and every run's kept set at step and step-1).
std::shared_ptr<StepSnapshot> load_step_snapshot(const TraceReader& reader, const TraceSnapshot& snap,
                                                 int step);

// Reduces a per-step metric array [n_steps, ...] to one value per step (mean over the rest).
std::vector<float> per_step_series(const NamedArray& metric);

}  // namespace kvs
