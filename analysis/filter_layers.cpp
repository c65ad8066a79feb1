// Filter-layer selection over a similarity matrix: segment values from row prefix sums, an exact
// dynamic program over (filters used, last filter), and the evaluation of a given choice.
#include "analysis/filter_layers.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "inference/errors.h"

namespace kvs {

namespace {

void check_matrix(std::span<const float> sim, int n_layers, int wait) {
  if (n_layers <= 0) throw input_error("similarity", "no layers");
  if (sim.size() != (size_t)n_layers * n_layers) {
    throw input_error("similarity", "matrix has " + std::to_string(sim.size()) +
                                        " entries, expected " + std::to_string(n_layers) + "x" +
                                        std::to_string(n_layers));
  }
  if (wait < 0) throw input_error("--wait", "must be >= 0");
}

// Segment values: value(f, next) = sum of sim(f, j) for f+wait < j < next.
class Segments {
 public:
  Segments(std::span<const float> sim, int n_layers, int wait) : L_(n_layers), wait_(wait) {
    prefix_.assign((size_t)L_ * (L_ + 1), 0.0);
    for (int f = 0; f < L_; ++f) {
      for (int j = 0; j < L_; ++j) {
        prefix_[(size_t)f * (L_ + 1) + j + 1] = prefix_[(size_t)f * (L_ + 1) + j] + sim[(size_t)f * L_ + j];
      }
    }
  }
  int first(int f) const { return std::min(L_, f + wait_ + 1); }
  // next: the following filter layer, or L for the last segment.
  double value(int f, int next) const {
    int lo = first(f);
    if (next <= lo) return 0.0;
    return prefix_[(size_t)f * (L_ + 1) + next] - prefix_[(size_t)f * (L_ + 1) + lo];
  }
 private:
  int L_, wait_;
  std::vector<double> prefix_;  // [L, L+1] row prefix sums of sim
};

}  // namespace

FilterPlan optimize_filter_layers(std::span<const float> sim, int n_layers, int k, int wait) {
  check_matrix(sim, n_layers, wait);
  if (k < 1 || k > n_layers) {
    throw input_error("--filters", "must be between 1 and the number of layers (" +
                                       std::to_string(n_layers) + ")");
  }
  const int L = n_layers;
  const double none = -std::numeric_limits<double>::infinity();
  Segments seg(sim, L, wait);
  // best[c][f]: the best value of the segments closed so far when filter c (0-based) is layer f.
  std::vector<std::vector<double>> best(k, std::vector<double>(L, none));  // [k][L]
  std::vector<std::vector<int>> prev(k, std::vector<int>(L, -1));         // [k][L]
  for (int f = 0; f < L; ++f) best[0][f] = 0.0;
  for (int c = 1; c < k; ++c) {
    for (int f = c; f < L; ++f) {
      for (int p = c - 1; p < f; ++p) {
        if (best[c - 1][p] == none) continue;
        double v = best[c - 1][p] + seg.value(p, f);
        if (v > best[c][f]) { best[c][f] = v; prev[c][f] = p; }
      }
    }
  }
  int last = -1;
  double top = none;
  for (int f = k - 1; f < L; ++f) {
    if (best[k - 1][f] == none) continue;
    double v = best[k - 1][f] + seg.value(f, L);
    if (v > top) { top = v; last = f; }
  }
  std::vector<int> filters(k);
  for (int c = k - 1, f = last; c >= 0; f = prev[c][f], --c) filters[c] = f;
  return evaluate_filter_layers(sim, L, filters, wait);
}

FilterPlan evaluate_filter_layers(std::span<const float> sim, int n_layers,
                                  std::vector<int> filters, int wait) {
  check_matrix(sim, n_layers, wait);
  const int L = n_layers;
  std::sort(filters.begin(), filters.end());
  if (filters.empty()) throw input_error("--filters", "no filter layer given");
  for (size_t i = 0; i < filters.size(); ++i) {
    if (filters[i] < 0 || filters[i] >= L) {
      throw input_error("--filters", "layer " + std::to_string(filters[i]) + " outside 0.." +
                                         std::to_string(L - 1));
    }
    if (i > 0 && filters[i] == filters[i - 1]) {
      throw input_error("--filters", "layer " + std::to_string(filters[i]) + " given twice");
    }
  }
  FilterPlan plan;
  plan.n_layers = L;
  plan.wait = wait;
  plan.filters = filters;
  plan.roles.assign(L, LayerRole::Dense);
  plan.source.assign(L, -1);
  for (size_t s = 0; s < filters.size(); ++s) {
    const int f = filters[s];
    const int next = s + 1 < filters.size() ? filters[s + 1] : L;
    plan.roles[f] = LayerRole::Filter;
    double kept = 0.0;
    int count = 0;
    for (int j = f + 1; j < next; ++j) {
      if (j <= f + wait) { plan.roles[j] = LayerRole::Wait; continue; }
      const double v = sim[(size_t)f * L + j];
      plan.roles[j] = LayerRole::Sparse;
      plan.source[j] = f;
      kept += v;
      plan.lost += 1.0 - v;
      ++count;
    }
    plan.segment_retained.push_back(kept);
    plan.segment_layers.push_back(count);
    plan.retained += kept;
    plan.n_sparse += count;
  }
  return plan;
}

std::vector<int> parse_filter_layers(const std::string& text, int n_layers, const std::string& what) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      throw input_error(what, "'" + item + "' is not a layer index");
    }
    if (used != item.size()) throw input_error(what, "'" + item + "' is not a layer index");
    if (v < 0 || v >= n_layers) {
      throw input_error(what, "layer " + item + " outside 0.." + std::to_string(n_layers - 1));
    }
    if (std::find(out.begin(), out.end(), v) != out.end()) {
      throw input_error(what, "layer " + item + " given twice");
    }
    out.push_back(v);
  }
  if (out.empty() || text.back() == ',') throw input_error(what, "expected a list like 2,8,18");
  std::sort(out.begin(), out.end());
  return out;
}

std::string idle_filters_note(const FilterPlan& plan) {
  std::string idle;
  int n_idle = 0;
  for (size_t s = 0; s < plan.filters.size(); ++s) {
    if (plan.segment_layers[s] > 0) continue;
    idle += (idle.empty() ? "" : ", ") + std::to_string(plan.filters[s]);
    ++n_idle;
  }
  const int useful = static_cast<int>(plan.filters.size()) - n_idle;
  if (n_idle == 0 || useful == 0) return "";  // useful == 0: no sparse layer at all, said elsewhere
  return "filter" + std::string(n_idle > 1 ? "s " : " ") + idle + " serve" + (n_idle > 1 ? "" : "s") +
         " no sparse layer: " + std::to_string(useful) + (useful == 1 ? " filter retains" : " filters retain") +
         " at least as much (--filters " + std::to_string(useful) + ")";
}

const char* layer_role_name(LayerRole role) {
  switch (role) {
    case LayerRole::Dense: return "dense";
    case LayerRole::Filter: return "filter";
    case LayerRole::Wait: return "wait";
    case LayerRole::Sparse: return "sparse";
  }
  return "dense";
}

}  // namespace kvs
