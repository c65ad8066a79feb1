// Choosing OmniKV filter layers from an inter-layer similarity matrix: the exact dynamic program
// of POLICIES.md §9 (a proposal of this project, not OmniKV's), and the score of a given choice.
#pragma once
#include <span>
#include <string>
#include <vector>

namespace kvs {

enum class LayerRole { Dense, Filter, Wait, Sparse };

// A choice of filter layers and what it retains. With F = {f_1 < ... < f_k} and `wait` dense
// layers after each filter, segment s holds the sparse layers f_s+wait+1 .. f_{s+1}-1 (up to
// L-1 for the last); layers below f_1, filter and wait layers are dense and cost nothing.
// Objective (maximized): retained = sum_s sum_{j in seg(f_s)} sim(f_s, j).
struct FilterPlan {
  int n_layers = 0;
  int wait = 0;
  std::vector<int> filters;            // [k] ascending
  std::vector<double> segment_retained;  // [k] sum of sim(f_s, j) over the segment
  std::vector<int> segment_layers;     // [k] sparse layers in the segment
  double retained = 0.0;               // the objective
  double lost = 0.0;                   // sum over sparse layers of 1 - sim(f_s, j)
  int n_sparse = 0;
  std::vector<LayerRole> roles;        // [L]
  std::vector<int> source;             // [L] filter layer a sparse layer reuses, else -1
};

// Exact maximum of the objective over all k-subsets of the L layers, O(k L^2).
// sim: [L, L] (row = selecting layer). Equal objectives keep the first choice the scan finds.
// Throws InputError when k is outside 1..L, wait < 0 or sim is not L x L.
FilterPlan optimize_filter_layers(std::span<const float> sim, int n_layers, int k, int wait);

// The objective and breakdown of a given choice (any order, no duplicates, each in 0..L-1).
FilterPlan evaluate_filter_layers(std::span<const float> sim, int n_layers,
                                  std::vector<int> filters, int wait);

// What to say about a plan with filters that serve no sparse layer (an optimum must place k
// filters; past the useful ones they go where they cost nothing, e.g. below the first useful
// one). Removing such a filter never lowers the objective. "" when every filter serves a layer
// or none does.
std::string idle_filters_note(const FilterPlan& plan);

// Parses "2,8,18" into layer indices checked against n_layers. `what` names the flag or file in
// errors.
std::vector<int> parse_filter_layers(const std::string& text, int n_layers,
                                     const std::string& what = "--filters");

const char* layer_role_name(LayerRole role);  // "dense" | "filter" | "wait" | "sparse"

}  // namespace kvs
