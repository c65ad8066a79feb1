// One line per run (or a JSON array): the means of its per-step metrics and its scalars.
#pragma once
#include <vector>

#include "analysis/trace.h"

namespace kvs {

void print_run_summaries(const std::vector<RunData>& runs, bool json);

}  // namespace kvs
