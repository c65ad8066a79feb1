// Eviction lanes: the state of every token of one run at one decode step (kept, evicted now or
// earlier, sink, recent window, heavy hitter, inactive), aggregated over (layer, KV head)s as the
// fraction of heads holding it, or for one head. Data preparation for the lanes/compare views.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/shape.h"
#include "analysis/trace.h"

namespace kvs {

enum class CellState : uint8_t {
  kFuture = 0,         // not yet in the context at this step
  kKept,               // held by a policy without positional roles
  kEvictedNow,         // held at the previous step, held by no selected head now
  kEvictedEarlier,     // held by no selected head since before this step
  kSink,               // held, among the first `sinks` positions
  kRecent,             // held, inside the recent window
  kHeavy,              // held by score (heavy hitter / selected key)
  kInactive,           // retained but not attended this step (OmniKV)
  kCount
};
const char* cell_state_name(CellState s);

// Positional roles a run's parameters give its kept tokens.
struct LaneRoles {
  int sinks = 0;         // first positions kept as sinks
  int recent = 0;        // recent window: positions [q - recent, q] (the query attends itself too)
  bool scored = false;   // kept tokens outside sinks/recent are chosen by score
  int recent_from = -1;  // prefill-once policies: positions >= this (their observation window and
                         // every decode token, appended unconditionally) count as recent; -1 none
};
// Roles from the run's policy and parameters; prompt_len places prefill-once windows.
LaneRoles lane_roles(const RunData& run, int prompt_len);

// A number stored under `key` in a flat JSON object ("" / absent -> fallback).
double json_number(const std::string& json, const std::string& key, double fallback);

struct LaneCells {
  std::vector<uint8_t> state;       // [T] CellState
  std::vector<float> held;          // [T] fraction of selected heads holding the token (1 or 2)
  std::vector<float> attended;      // [T] fraction of selected heads attending it (1 only): below
                                    // `held` where some heads keep it inactive (OmniKV's sparse layers)
  std::vector<int> counts;          // [kCount] tokens per state
};

// kept, kept_prev: [L, Hkv, T] (kept_prev may be null at step 0). layer/kv_head = -1 aggregate
// over all layers/heads; otherwise only that layer and/or KV head.
LaneCells build_lane(const uint8_t* kept, const uint8_t* kept_prev, const ModelShape& shape, int T,
                     int q_pos, const LaneRoles& roles, int layer, int kv_head);

// Token-wise difference of two lanes: 0 neither holds, 1 only A, 2 only B, 3 both.
std::vector<uint8_t> lane_difference(const LaneCells& a, const LaneCells& b);

}  // namespace kvs
