// Group rows: one layer's decode rows reduced to one row per KV head, each query head's row first
// renormalized over the keys it attended. What a cache controller that scores keys by the
// attention they get (accumulated, or the last step's) reads instead of every query head's row.
// CPU twin of cuda::reduce_group_rows (kernels/group_rows.cu). Both round every operation as
// written (no fused multiply-add: this file and its twin are built without contraction), so the
// host and the device give the same bits.
#pragma once

namespace kvs::ops {

// How a KV head's query-head rows become one: element-wise mean, max or sum.
enum class GroupReduce { Mean, Max, Sum };

// Lanes of lane_sum: a block's threads on the device, vector registers' worth of independent adds
// on the host.
constexpr int kSumLanes = 256;

// The sum of row[n] in kSumLanes lanes, then the lanes pairwise: lane k adds row[k],
// row[kSumLanes + k], ... in order, the last n % kSumLanes entries going to lanes 0.. in order;
// then lane k += lane k + 128, then + 64, ..., + 1 (k below the step).
float lane_sum(const float* row, long n);

// A row renormalized over its n keys: row[j] * (1 / lane_sum(row)), or 1 / n for every key where
// that sum is not above 0.
// out[j] = reduce over the rows (in order) of renormalized(rows[i])[j], j < n; Mean divides the
// sum by n_rows. rows: n_rows >= 1 pointers to [n] each.
void reduce_group_rows(const float* const* rows, int n_rows, int n, GroupReduce how, float* out);

}  // namespace kvs::ops
