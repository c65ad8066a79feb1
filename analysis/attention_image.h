// Data preparation for the attention-map view: the decode rows of one layer stacked over steps,
// a run's evicted/inactive keys over steps (or, for the prompt, as its first decode query saw
// them) for one (layer, KV head), and the prefill map of one (layer, head) (the full map; when
// the trace kept only reductions, its pooled overview or else the last-window rows).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "analysis/trace.h"

namespace kvs {

// Called with (done, total); returning false cancels (the functions then return what they have).
using ProgressFn = std::function<bool(int done, int total)>;

struct DecodeStack {
  int layer = -1;
  int n_heads = 0, n_steps = 0, T = 0;
  std::vector<float> rows;  // [H, n_steps, T] recorded decode rows of `layer`
  const float* head(int h) const { return rows.data() + (size_t)h * n_steps * T; }
};

// Reads every decode step once and keeps `layer`'s rows.
DecodeStack read_decode_stack(const TraceReader& reader, int layer, const ProgressFn& progress);

// [n_steps, T] per step and key: 0 held and attended (or not yet in the context), 1 evicted,
// 2 retained but inactive, for `run` at (layer, kv_head). q_pos: [n_steps].
std::vector<uint8_t> read_evicted_plane(const TraceReader& reader, const std::string& run, int layer, int kv_head,
                                        const std::vector<int32_t>& q_pos, const ProgressFn& progress);

// What `run` had done with each column of a prefill image (`block` prompt positions per column)
// in (layer, kv_head) when the first decode query attended: the fraction of the column's keys
// evicted and the fraction held but skipped. Both empty when the run holds no step.
struct PromptKeyFate {
  std::vector<float> evicted;   // [cols]
  std::vector<float> inactive;  // [cols]
};
PromptKeyFate read_prompt_key_fate(const TraceReader& reader, const std::string& run, int layer, int kv_head,
                                   int block);

struct PrefillImage {
  int rows = 0, cols = 0;
  int first_query = 0;      // query position of row 0
  bool full = false;        // the full causal map
  int block = 1;            // > 1: the pooled overview, each cell block x block positions
  std::vector<float> data;  // [rows, cols]
};

// The full map of (layer, head) when stored, else its pooled overview, else its last-window rows
// from the reductions. `evidence` caches read_prefill() between calls (filled on first use).
PrefillImage read_prefill_image(const TraceReader& reader, int layer, int head, PrefillEvidence& evidence);

// data [rows, cols] with each cell replaced by the largest within `half_x` columns and `half_y`
// rows of it. A map drawn on fewer pixels than it has cells samples one cell a pixel (a decode
// stack of 8K keys on ~1,500 px shows one key in five); spread by half a pixel's span each way,
// the sampled cell carries its pixel's peak, so a sink or a retrieved key is never skipped.
std::vector<float> spread_max(const float* data, int rows, int cols, int half_x, int half_y);

// The share of the cells within `half_x` columns and `half_y` rows of each cell of data [rows,
// cols] (the window clipped at the edges) that equal `value`: [rows, cols] in [0, 1]. A mask of
// evicted keys drawn on fewer pixels than it has cells is tinted by the share, so that neither a
// lone evicted key nor a lone kept one (a sink among evicted keys) is lost to sampling.
std::vector<float> spread_share(const uint8_t* data, int rows, int cols, int half_x, int half_y, uint8_t value);

}  // namespace kvs
