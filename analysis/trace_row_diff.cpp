// diff_decode_rows: two traces' decode rows compared step by step (trace_row_diff.h).
#include "analysis/trace_row_diff.h"

#include <algorithm>
#include <cmath>

#include "analysis/divergence.h"
#include "analysis/trace.h"

namespace kvs {

RowDiff diff_decode_rows(const TraceReader& a, const TraceReader& b, float tol) {
  RowDiff d;
  d.tol = tol;
  const TraceMeta &ma = a.meta(), &mb = b.meta();
  if (ma.shape.n_layers != mb.shape.n_layers || ma.shape.n_heads != mb.shape.n_heads) {
    d.why_not = "the traces' models differ in shape (" + std::to_string(ma.shape.n_layers) + " layers x " +
                std::to_string(ma.shape.n_heads) + " heads against " + std::to_string(mb.shape.n_layers) + " x " +
                std::to_string(mb.shape.n_heads) + ")";
    return d;
  }
  if (ma.prompt_len != mb.prompt_len) {
    d.why_not = "the prompts differ in length (" + std::to_string(ma.prompt_len) + " and " +
                std::to_string(mb.prompt_len) + " tokens)";
    return d;
  }
  const std::vector<int32_t> ids_a = a.token_ids(), ids_b = b.token_ids();  // [Ta], [Tb]
  d.tokens_part = first_divergence(ids_a, ids_b);
  const long same_ids = d.tokens_part < 0 ? static_cast<long>(ids_a.size()) : d.tokens_part;  // ids both share
  const std::vector<int32_t> qa = a.decode_query_pos(), qb = b.decode_query_pos();  // [steps] each
  const int L = ma.shape.n_layers, H = ma.shape.n_heads;
  const long Ta = ma.total_len(), Tb = mb.total_len();
  std::vector<float> rows_a, rows_b, lse;  // [L, H, Ta], [L, H, Tb], [L, H]
  const int n_steps = std::min(ma.n_steps, mb.n_steps);
  for (int s = 0; s < n_steps && qa[s] == qb[s] && qa[s] < same_ids; ++s) {
    a.read_decode_step(s, rows_a, lse);
    b.read_decode_step(s, rows_b, lse);
    float step_max = 0.0f;
    for (int l = 0; l < L; ++l) {
      for (int h = 0; h < H; ++h) {
        const float* x = rows_a.data() + (static_cast<long>(l) * H + h) * Ta;  // [Ta]
        const float* y = rows_b.data() + (static_cast<long>(l) * H + h) * Tb;  // [Tb]
        float row_max = 0.0f;
        int row_worst = 0;
        for (int j = 0; j <= qa[s]; ++j) {
          const float diff = std::fabs(x[j] - y[j]);
          if (diff > row_max) {
            row_max = diff;
            row_worst = j;
          }
        }
        ++d.rows;
        d.rows_within += row_max <= tol;
        step_max = std::max(step_max, row_max);
        if (row_max > d.max) {
          d.max = row_max;
          d.worst_step = s;
          d.worst_layer = l;
          d.worst_head = h;
          d.worst_key = row_worst;
        }
      }
    }
    d.step_max.push_back(step_max);
  }
  return d;
}

}  // namespace kvs
