// `kvscope layers trace.h5`: the OmniKV inter-layer similarity of a trace and the filter layers
// that retain the most attention mass (the dynamic program of POLICIES.md §9).
#include <cstdio>

#include "analysis/filter_layers.h"
#include "analysis/similarity.h"
#include "analysis/trace.h"
#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/policy_setup.h"
#include "analysis/json_writer.h"
#include "inference/errors.h"

namespace kvs {

namespace {

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

JsonObject plan_json(const FilterPlan& p) {
  JsonObject o;
  std::vector<double> seg(p.segment_retained.begin(), p.segment_retained.end());
  o.add("filters", p.filters).add("wait", p.wait).add("retained", p.retained).add("lost", p.lost)
      .add("sparse_layers", p.n_sparse).add("segment_retained", seg).add("segment_layers", p.segment_layers);
  std::vector<std::string> roles;
  for (const LayerRole r : p.roles) roles.push_back(layer_role_name(r));
  o.add("roles", roles);
  return o;
}

void print_plan(const char* title, const FilterPlan& p) {
  std::printf("%s filters {", title);
  for (size_t i = 0; i < p.filters.size(); ++i) std::printf("%s%d", i ? ", " : "", p.filters[i]);
  if (p.n_sparse == 0)
    std::printf("}: no sparse layers (every layer dense, filter or wait): nothing retained or lost\n");
  else
    std::printf("}: retained %.3f over %d sparse layers (mean %.3f), lost %.3f\n", p.retained, p.n_sparse,
                p.retained / p.n_sparse, p.lost);
  for (size_t s = 0; s < p.filters.size(); ++s)
    std::printf("  filter %2d -> %d sparse layers, retained %.3f\n", p.filters[s], p.segment_layers[s],
                p.segment_retained[s]);
  const std::string idle = idle_filters_note(p);
  if (!idle.empty()) std::printf("  note: %s\n", idle.c_str());
}

}  // namespace

int cmd_layers(const ArgList& argv) {
  Args a(argv, {"--filters", "--wait", "--given", "--k"}, {"--json", "--recompute"});
  if (a.positional().size() != 1) throw input_error("layers", "expects one trace path");
  TraceReader trace(a.positional()[0]);
  note_recorded_under(trace.meta());
  const int L = trace.meta().shape.n_layers;
  const int k_filters = a.integer("--filters", std::max(1, L / 10), 1, L);
  const int wait = a.integer("--wait", 1, 0, L);
  const int k_tokens = a.integer("--k", 0, 0, 1 << 30);

  std::vector<float> sim;
  int used_k = k_tokens;
  if (!a.has("--recompute") && k_tokens == 0 && trace.has_array("/layers/similarity")) {
    NamedArray arr = trace.read_array("/layers/similarity");
    if (arr.dims.size() != 2 || arr.dims[0] != static_cast<uint64_t>(L) || arr.dims[1] != static_cast<uint64_t>(L))
      throw input_error(trace.path(), "/layers/similarity is not " + std::to_string(L) + "x" + std::to_string(L));
    sim = std::move(arr.data);
    used_k = default_similarity_k(trace.meta().prompt_len);
  } else {
    SimilarityResult r = trace_similarity(trace, k_tokens);
    sim = std::move(r.mean);
    used_k = r.k;
  }
  const FilterPlan best = optimize_filter_layers(sim, L, k_filters, wait);
  const bool given = a.has("--given");
  FilterPlan other;
  if (given) other = evaluate_filter_layers(sim, L, parse_filter_layers(a.str("--given"), L, "--given"), wait);

  if (a.has("--json")) {
    JsonObject o;
    o.add("n_layers", L).add("k_tokens", used_k).add("similarity", to_double(sim))
        .add_raw("optimal", plan_json(best).str());
    if (given) o.add_raw("given", plan_json(other).str());
    std::printf("%s\n", o.str().c_str());
    return 0;
  }
  std::printf("inter-layer similarity (OmniKV, top-%d prompt keys), %d layers; row = selecting layer\n", used_k, L);
  std::printf("     ");
  for (int j = 0; j < L; ++j) std::printf("%5d", j);
  std::printf("\n");
  for (int i = 0; i < L; ++i) {
    std::printf("%4d ", i);
    for (int j = 0; j < L; ++j) std::printf(" %.2f", sim[static_cast<size_t>(i) * L + j]);
    std::printf("\n");
  }
  print_plan("optimal", best);
  if (given) print_plan("given  ", other);
  return 0;
}

}  // namespace kvs
