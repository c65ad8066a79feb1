// Inter-layer attention similarity as OmniKV defines it (POLICIES.md §9): for each decode step,
// how much of layer l2's head-maxed attention over the prompt falls on layer l1's top-K keys.
#pragma once
#include <span>
#include <vector>

namespace kvs {

class TraceReader;

// OmniKV's default selection size: 6.7% of the prompt, at least 1, at most P.
int default_similarity_k(int prompt_len);

// Head-maxed attention of one layer over the prompt, a_l = softmax_j(max_h z[h,j]) with
// z[h,j] = log(p[h,j]) + lse[h] (the scaled logit; p == 0 gives -inf), for j < prompt_len.
// rows: [H, row_len] one decode row per query head; lse: [H]. Returns a [prompt_len]; all zeros
// when every logit is -inf.
std::vector<float> head_max_attention(std::span<const float> rows, std::span<const float> lse,
                                      int n_heads, int row_len, int prompt_len);

// The k largest entries of a, as positions in rank order; equal values rank the lower position
// first. k is capped at a.size().
std::vector<int> top_k_positions(std::span<const float> a, int k);

// Similarity of one decode step. rows: [L, H, row_len], lse: [L, H]. Returns [L, L] where
// entry (l1, l2) = sum over j in TopK(a_l1) of a_l2(j): row l1 is the selecting (filter) layer,
// column l2 the layer that reuses its selection. The same formula defines l1 > l2, so the matrix
// is full and not symmetric; the diagonal is layer l's own top-K mass.
std::vector<float> step_similarity(std::span<const float> rows, std::span<const float> lse,
                                   int n_layers, int n_heads, int row_len, int prompt_len, int k);

struct SimilarityResult {
  int n_layers = 0;
  int k = 0;                      // top-K size used
  int n_steps = 0;                // decode steps averaged
  std::vector<float> per_step;    // [n_steps, L, L]
  std::vector<float> mean;        // [L, L] average over the steps
};

// Similarity of every decode step of a trace (read one step at a time) and their mean.
// k <= 0 selects default_similarity_k(prompt_len); a larger k is capped at the prompt length.
// Throws InputError when the trace has no decode steps.
SimilarityResult trace_similarity(const TraceReader& trace, int k = 0);

// The same over in-memory steps: rows [n_steps, L, H, row_len], lse [n_steps, L, H].
SimilarityResult similarity_from_rows(std::span<const float> rows, std::span<const float> lse,
                                      int n_steps, int n_layers, int n_heads, int row_len,
                                      int prompt_len, int k = 0);

}  // namespace kvs
