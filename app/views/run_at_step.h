// What a run has at the step shown: a free live run whose text ended before the step has no
// cache there (every key absent), which a lane would otherwise draw as every key evicted; past
// its first divergence the keys it holds are its own tokens, not the recording's.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/trace_snapshot.h"

namespace kvs {

// kept: one step of a run, [L, Hkv, T] (1 attended, 2 inactive, 0 absent).
inline bool run_holds_keys(const std::vector<uint8_t>& kept) {
  return std::any_of(kept.begin(), kept.end(), [](uint8_t k) { return k != 0; });
}

// In place of such a run's lane.
inline std::string run_ended_note(int step) {
  return "its text ended before step " + std::to_string(step) + ": no cache to show";
}

// For a hover over position i of a run's lane: the run's own token there where it differs from
// the recording's ("own token here: \"cat\" (id 512)"; the text where the recording has that
// id somewhere), else "".
inline std::string run_own_token_note(const TraceSnapshot& t, const RunData& run, int i) {
  if (i < 0 || i >= (int)run.tokens.size() || i >= t.total_len() || run.tokens[i] == t.token_ids[i]) return "";
  const int32_t id = run.tokens[i];
  std::string text;
  for (size_t j = 0; j < t.token_ids.size() && text.empty(); ++j)
    if (t.token_ids[j] == id) text = '"' + token_label(t.token_texts[j]) + "\" ";
  return "own token here: " + text + "(id " + std::to_string(id) + ")";
}

}  // namespace kvs
