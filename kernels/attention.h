// Scaled dot-product attention: scores = q.k / sqrt(d) (soft-capped where the model caps them:
// ops::Scoring), softmax, weighted sum of values.
// attend_rows takes one query row, attend_rows_part / _merge one KV head's queries over a key
// range and the ranges' combination (single-threaded: decode parallelises over ranges);
// attend_causal_block takes a block of consecutive prompt queries of one head (prefill) against
// keys packed in panels (pack_key_panels), on the OpenMP threads.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/softcap.h"

namespace kvs::ops {

// One query over the rows listed in rows[n_keys] (indices into contiguous [*, head_dim]
// keys/values). Writes probs[n_keys] and out[head_dim]; returns the log-sum-exp of the scores.
// (attend_rows_part over all keys, then attend_rows_merge.)
float attend_rows(float* out, float* probs, const float* q, const float* keys,
                  const float* values, const int32_t* rows, int n_keys, int head_dim, Scoring score);

// The element type of cached key or value rows: fp32, or 16 bits widened to fp32 exactly as
// they are read (kernels/half.h), so that a 16-bit cache gives the same results as fp32 rows
// holding the same numbers, from half the bytes.
enum class RowType : uint8_t { F32, F16, BF16 };
// Rows of one element type from `data`.
struct RowData {
  const void* data;
  RowType type;
};

// Decode attention split over key ranges, for the n_q query heads that share one KV head: the
// range's keys and values come from memory once and from cache for the other heads.
// For query i (q + i * head_dim) over listed rows j in [j0, j1):
//   probs[i * probs_stride + j] = exp(score(q_i.k_j) - m[i * stat_stride]),
//   m[i * stat_stride] = the largest score in the range, l[i * stat_stride] = the sum of
//   those exps, part_out[i * out_stride .. + head_dim] = sum_j probs * v_j (unnormalized).
// keys and values: rows of head_dim elements, both of one type or fp32 keys over 16-bit values
// (a cache whose keys are rotated into an fp32 copy); other pairs throw std::logic_error.
// next_keys (may be null): where the keys the caller reads next start (its next range's first
// key row; rows of head_dim elements of the keys' type follow it), asked for ahead while this
// range's last values are read, as this range's first values are while its last keys are, so
// that the thread's streams run on from range to range.
void attend_rows_part(float* part_out, long out_stride, float* probs, long probs_stride, float* m, float* l,
                      long stat_stride, const float* q, int n_q, RowData keys, RowData values,
                      const int32_t* rows, int j0, int j1, int head_dim, Scoring score,
                      const void* next_keys = nullptr);
// The same over fp32 rows.
inline void attend_rows_part(float* part_out, long out_stride, float* probs, long probs_stride, float* m, float* l,
                             long stat_stride, const float* q, int n_q, const float* keys, const float* values,
                             const int32_t* rows, int j0, int j1, int head_dim, Scoring score,
                             const float* next_keys = nullptr) {
  attend_rows_part(part_out, out_stride, probs, probs_stride, m, l, stat_stride, q, n_q,
                   RowData{keys, RowType::F32}, RowData{values, RowType::F32}, rows, j0, j1, head_dim, score,
                   next_keys);
}

// Combines one query's n_parts ranges of seg_keys keys each (the last one shorter; part p covers
// keys [p * seg_keys, ...) of n_keys) from attend_rows_part: part_out [n_parts, head_dim], m, l
// [n_parts]. Writes out[head_dim], rescales probs[n_keys] to the softmax; returns the log-sum-exp.
float attend_rows_merge(float* out, float* probs, int n_keys, int seg_keys, const float* part_out, const float* m,
                        const float* l, int n_parts, int head_dim);

// Causal attention of the nq queries at positions q0..q0+nq-1 of one head, query q over keys
// lo(q)..q, lo(q) = window > 0 ? max(0, q - window + 1) : 0.
//   q:      [nq] rows of head_dim floats, q_stride apart
//   keys_p: the head's keys packed in panels of kPanelKeys: component d of key j at
//           keys_p[(j / kPanelKeys * head_dim + d) * kPanelKeys + j % kPanelKeys], for
//           j < round_up(q0 + nq, kPanelKeys) (pack_key_panels writes it; padding keys are 0)
//   values: value rows of head_dim floats, v_stride apart
//   out:    [nq] rows of head_dim floats, out_stride apart
//   probs:  the softmax rows (0 outside each row's keys) in blocks of `block` rows (0: one block
//           of nq), one after another: block s, rows s * block .. s * block + n_s - 1, is an
//           [n_s, q0 + s * block + n_s] matrix at probs + causal_block_offset(q0, block, s), the
//           rows an observer receives as one prefill AttentionBlock. Without blocks, [nq, q0 + nq].
//   lse:    [nq]
// Several blocks in one call give more threads work: groups of kCausalGroupRows rows are dealt
// to the OpenMP threads.
void attend_causal_block(float* out, long out_stride, float* probs, float* lse, const float* q, long q_stride,
                         const float* keys_p, const float* values, long v_stride, int q0, int nq, int head_dim,
                         int window, Scoring score, int block = 0);

// Where block s of attend_causal_block's probs starts: the blocks before it are full, block t
// holding block * (q0 + (t + 1) * block) floats.
inline long causal_block_offset(int q0, int block, int s) {
  return static_cast<long>(block) * (static_cast<long>(s) * q0 + static_cast<long>(block) * s * (s + 1) / 2);
}

// Keys per panel of attend_causal_block's packed keys.
constexpr int kPanelKeys = 16;

// Query rows per group of attend_causal_block: a group is one thread's work, and its rows share
// every chunk of keys and values read. Blocks of a multiple of it (and of the thread count) keep
// the threads evenly loaded.
constexpr int kCausalGroupRows = 18;

// Observer blocks of `block` rows per attend_causal_block call over a P-key prompt on `threads`
// threads: at least two groups per thread, and as many blocks as fit kCallProbBytes of
// probabilities, so that a prompt's threads are woken once per call, not once per block (the
// engine's observers run between calls on its thread; a worker idle that long goes to sleep:
// a 1,751-token SmolLM2 record switched context 22,000 times with one block per call, 10,000
// with these).
constexpr std::size_t kCallProbBytes = std::size_t{8} << 20;
inline int causal_blocks_per_call(int block, int P, int threads) {
  const std::size_t fit = kCallProbBytes / (sizeof(float) * static_cast<std::size_t>(block) * P);
  return std::max({1, 2 * threads * kCausalGroupRows / block, static_cast<int>(fit)});
}

// Floats of n keys in panels: round_up(n, kPanelKeys) * head_dim.
inline long key_panel_floats(int n, int head_dim) {
  return static_cast<long>((n + kPanelKeys - 1) / kPanelKeys) * kPanelKeys * head_dim;
}

// keys_p[key_panel_floats(n, head_dim)] <- the n key rows of head_dim floats at keys
// (k_stride apart), in attend_causal_block's panel layout, padded with zero keys.
void pack_key_panels(float* keys_p, const float* keys, long k_stride, int n, int head_dim);

}  // namespace kvs::ops
