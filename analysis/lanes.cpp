// Cell states of eviction lanes from a run's kept sets and parameters.
#include "analysis/lanes.h"

#include <algorithm>
#include <cstdlib>

namespace kvs {

const char* cell_state_name(CellState s) {
  switch (s) {
    case CellState::kFuture: return "not yet generated";
    case CellState::kKept: return "kept";
    case CellState::kEvictedNow: return "evicted at this step";
    case CellState::kEvictedEarlier: return "evicted earlier";
    case CellState::kSink: return "sink";
    case CellState::kRecent: return "recent window";
    case CellState::kHeavy: return "heavy hitter";
    case CellState::kInactive: return "inactive";
    default: return "?";
  }
}

double json_number(const std::string& json, const std::string& key, double fallback) {
  const std::string quoted = "\"" + key + "\"";
  size_t at = json.find(quoted);
  if (at == std::string::npos) return fallback;
  at = json.find(':', at + quoted.size());
  if (at == std::string::npos) return fallback;
  const char* begin = json.c_str() + at + 1;
  while (*begin == ' ' || *begin == '"') ++begin;
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  return end == begin ? fallback : v;
}

LaneRoles lane_roles(const RunData& run, int prompt_len) {
  LaneRoles r;
  const std::string& p = run.policy;
  // StreamingLLM calls its sinks "sinks", DuoAttention's streaming heads "sink".
  r.sinks = std::max(0, (int)json_number(run.params_json, p == "duoattention" ? "sink" : "sinks", 0));
  r.recent = std::max(0, (int)json_number(run.params_json, "recent", 0));
  if (p == "window" && r.recent == 0) r.recent = run.budget;
  r.scored = p == "h2o" || p == "tova" || p == "snapkv" || p == "pyramidkv" || p == "adakv" ||
             p == "kvzip" || p == "omnikv";
  if (p == "snapkv" || p == "pyramidkv" || p == "adakv" || p == "kvzip")
    r.recent_from = std::max(0, prompt_len - std::max(0, (int)json_number(run.params_json, "window", 0)));
  if (p == "omnikv") r.recent_from = prompt_len;  // it selects among prompt keys; decode keys are always read
  return r;
}

LaneCells build_lane(const uint8_t* kept, const uint8_t* kept_prev, const ModelShape& shape, int T,
                     int q_pos, const LaneRoles& roles, int layer, int kv_head) {
  LaneCells out;
  out.state.assign(T, (uint8_t)CellState::kFuture);
  out.held.assign(T, 0.0f);
  out.attended.assign(T, 0.0f);
  out.counts.assign((size_t)CellState::kCount, 0);
  const int L = shape.n_layers, G = shape.n_kv_heads;
  const int l0 = layer < 0 ? 0 : layer, l1 = layer < 0 ? L : layer + 1;
  const int g0 = kv_head < 0 ? 0 : kv_head, g1 = kv_head < 0 ? G : kv_head + 1;
  const int n_heads = std::max((l1 - l0) * (g1 - g0), 1);
  std::vector<int> held(T, 0), active(T, 0), held_prev(T, 0);  // [T] head counts
  for (int l = l0; l < l1; ++l)
    for (int g = g0; g < g1; ++g) {
      const size_t base = ((size_t)l * G + g) * T;
      for (int t = 0; t < T; ++t) {
        const uint8_t k = kept[base + t];
        held[t] += k != 0;
        active[t] += k == 1;
        if (kept_prev) held_prev[t] += kept_prev[base + t] != 0;
      }
    }
  for (int t = 0; t < T; ++t) {
    CellState s;
    if (t > q_pos) {
      s = CellState::kFuture;
    } else if (held[t] == 0) {
      s = held_prev[t] > 0 ? CellState::kEvictedNow : CellState::kEvictedEarlier;
    } else if (active[t] == 0) {
      s = CellState::kInactive;
    } else if (t < roles.sinks) {
      s = CellState::kSink;
    } else if ((roles.recent > 0 && t >= q_pos - roles.recent) || (roles.recent_from >= 0 && t >= roles.recent_from)) {
      s = CellState::kRecent;
    } else {
      s = roles.scored ? CellState::kHeavy : CellState::kKept;
    }
    out.state[t] = (uint8_t)s;
    out.held[t] = (float)held[t] / (float)n_heads;
    out.attended[t] = (float)active[t] / (float)n_heads;
    out.counts[(size_t)s]++;
  }
  return out;
}

std::vector<uint8_t> lane_difference(const LaneCells& a, const LaneCells& b) {
  const size_t T = std::min(a.held.size(), b.held.size());
  std::vector<uint8_t> d(T, 0);  // [T]
  for (size_t t = 0; t < T; ++t) d[t] = (uint8_t)((a.held[t] > 0 ? 1 : 0) | (b.held[t] > 0 ? 2 : 0));
  return d;
}

}  // namespace kvs
