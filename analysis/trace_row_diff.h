// How far apart the decode attention rows of two traces of one model and prompt are: the same
// story recorded twice (on the CPU and on the GPU, in fp16 and in fp32, before and after a
// change). Step by step while both traces fed the same tokens: the largest |a - b| over every
// layer, head and key, where it is, and how many (step, layer, head) rows lie within a tolerance
// — what tests/python/compare_traces.py prints, for the app's Compare view.
#pragma once
#include <string>
#include <vector>

namespace kvs {

class TraceReader;

struct RowDiff {
  std::string why_not;          // non-empty: the rows cannot be compared, and why
  long tokens_part = -1;        // the first position where the token ids differ; -1: they do not
  std::vector<float> step_max;  // [steps()] the largest difference at each decode step compared
                                // (while tokens 0..query agree in both)
  float max = 0.0f;             // the largest over the compared steps
  int worst_step = -1, worst_layer = -1, worst_head = -1, worst_key = -1;  // where it is
  long rows = 0;                // (step, layer, head) rows compared
  long rows_within = 0;         // those whose largest difference is at most tol
  float tol = 0.0f;

  int steps() const { return static_cast<int>(step_max.size()); }  // decode steps compared
};

// Compares the decode rows of a and b over each row's keys 0..query, from step 0 until the first
// step whose query is past the first position where the token ids differ (or either trace ends).
// Traces of different shapes or prompt lengths are not compared: why_not names the difference.
// Throws what TraceReader throws for a damaged step.
RowDiff diff_decode_rows(const TraceReader& a, const TraceReader& b, float tol = 1e-3f);

}  // namespace kvs
