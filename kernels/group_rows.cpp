// Group rows on the host: the CPU twin of cuda::reduce_group_rows (kernels/group_rows.h).
// Built with -ffp-contract=off: a product and a sum fused into one rounding would not be the
// device's bits.
#include "kernels/group_rows.h"

#include <algorithm>
#include <cmath>

namespace kvs::ops {

float lane_sum(const float* row, long n) {
  constexpr long kLanes = kSumLanes;
  float lane[kLanes] = {};
  const long body = n - n % kLanes;
  for (long i = 0; i < body; i += kLanes)
    for (long k = 0; k < kLanes; ++k) lane[k] += row[i + k];
  for (long i = body; i < n; ++i) lane[i - body] += row[i];
  for (long half = kLanes / 2; half > 0; half /= 2)
    for (long k = 0; k < half; ++k) lane[k] += lane[k + half];
  return lane[0];
}

void reduce_group_rows(const float* const* rows, int n_rows, int n, GroupReduce how, float* out) {
  std::fill(out, out + n, how == GroupReduce::Max ? -INFINITY : 0.0f);
  for (int i = 0; i < n_rows; ++i) {
    const float* r = rows[i];
    const float s = lane_sum(r, n);
    const float inv = 1.0f / s, u = 1.0f / static_cast<float>(n);
    for (int j = 0; j < n; ++j) {
      const float v = s > 0.0f ? r[j] * inv : u;
      out[j] = how == GroupReduce::Max ? std::max(out[j], v) : out[j] + v;
    }
  }
  if (how == GroupReduce::Mean)
    for (int j = 0; j < n; ++j) out[j] /= static_cast<float>(n_rows);
}

}  // namespace kvs::ops
