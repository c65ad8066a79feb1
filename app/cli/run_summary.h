// One line per run (or a JSON array): the means of its per-step metrics (over the steps and, for
// those stored per (layer, KV head), over them too: a heading line says so); a live run's scalars
// on lines of their own (output: perplexity beside the full cache's, first divergence; memory:
// peak and mean against the full cache); block_size, a setting, only in JSON.
#pragma once
#include <cstdio>
#include <vector>

#include "analysis/trace.h"

namespace kvs {

void print_run_summaries(const std::vector<RunData>& runs, bool json);
// A live run's scalars as print_run_summaries writes them under its line (output: perplexity
// beside the full cache's, first divergence; memory: peak and mean against the full cache's),
// to `f`; nothing for a run without them.
void print_live_scalars(const RunData& run, FILE* f);

}  // namespace kvs
