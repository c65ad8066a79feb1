// Policy construction and the extra inputs some policies need, shared by simulate and rerun.
#include "app/cli/policy_setup.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "analysis/kvzip_scores.h"
#include "analysis/policy_omnikv.h"
#include "analysis/simulator.h"
#include "app/cli/device_flag.h"
#include "inference/errors.h"
#include "inference/loader.h"

namespace kvs {

bool takes_budget_flag(const std::string& policy_text) { return own_budget(policy_text).empty(); }

std::string own_budget(const std::string& policy_text) {
  const PolicySpec own = parse_policy_spec(policy_text, 0);
  if (own.name == "full") return "full keeps every token";
  if (own.budget > 0) return "its spec gives budget=" + std::to_string(own.budget);
  if (omnikv_budget_from_frac(own)) return "OmniKV's frac= sets its budget from the prompt";
  return {};
}

std::vector<std::unique_ptr<Policy>> build_policies(const Args& args, const TraceReader& trace) {
  const ModelShape shape = trace.meta().shape;
  require_decode_steps(trace);
  const auto specs = args.all("--policy");
  if (specs.empty()) throw input_error("--policy", "is required (e.g. --policy streamingllm)");
  const int budget = args.integer("--budget", 0, 1, 1 << 30);  // 0 when absent
  std::vector<std::unique_ptr<Policy>> out;
  std::set<std::string> names;
  bool budget_used = false;  // by a policy that has a budget and gives none of its own
  bool alpha_used = false;   // by a duoattention spec that gives no gates of its own
  for (const auto& text : specs) {
    budget_used |= takes_budget_flag(text);
    PolicySpec spec = parse_policy_spec(text, budget);
    // --budget may be left out for `full` and for a spec with its own budget=N or frac=F.
    if (!args.has("--budget") && takes_budget_flag(text))
      throw input_error("--budget", "is required (tokens kept per head) for --policy " + text);
    resolve_omnikv_spec(spec, trace);
    alpha_used |= spec.name == "duoattention" && !spec.params.count("pattern") && !spec.params.count("gates");
    choose_duo_gates(spec, trace, args.str("--alpha", ""));
    auto p = make_policy(spec, shape);
    if (!names.insert(spec.run_name()).second)
      throw input_error("--policy " + text, "given twice (run name " + spec.run_name() + ")");
    out.push_back(std::move(p));
  }
  if (args.has("--budget") && !budget_used)
    throw input_error("--budget", "no --policy uses it (full keeps every token; budget=N or OmniKV's frac=F in a spec is that policy's own)");
  if (args.has("--alpha") && std::none_of(out.begin(), out.end(), [](const auto& p) { return p->spec().name == "duoattention"; }))
    throw input_error("--alpha", "gives DuoAttention's gates, and no --policy duoattention is given");
  if (args.has("--alpha") && !alpha_used)
    throw input_error("--alpha", "is not used: every --policy duoattention gives its own gates (pattern= or gates=)");
  return out;
}

std::string model_path_for(const Args& args, const TraceMeta& meta, const std::string& why) {
  if (args.has("--model")) return args.str("--model");
  if (meta.model_path.empty() || !std::filesystem::exists(meta.model_path))
    throw input_error(why, "needs the model: pass --model (the trace's model path '" + meta.model_path +
                               "' is not there)");
  return meta.model_path;
}

std::string tokenizer_path_for(const Args& args, const TraceMeta& meta) {
  if (args.has("--tokenizer")) return args.str("--tokenizer");
  if (args.has("--model")) return "";
  return meta.tokenizer_path;
}

void check_model_matches(const Model& model, const TraceMeta& meta) {
  const ModelConfig& c = model.config;
  const ModelShape& t = meta.shape;
  auto describe = [](int layers, int heads, int kv_heads, int head_dim) {
    return std::to_string(layers) + " layers, " + std::to_string(heads) + " heads (" + std::to_string(kv_heads) +
           " KV), head size " + std::to_string(head_dim);
  };
  if (c.n_layers != t.n_layers || c.n_heads != t.n_heads || c.n_kv_heads != t.n_kv_heads || c.head_dim != t.head_dim)
    throw input_error(model.path, "model shape differs from the trace's (model: " +
                                      describe(c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim) +
                                      "; trace: " + describe(t.n_layers, t.n_heads, t.n_kv_heads, t.head_dim) + ")");
}

DuoGates trace_duo_gates(const TraceReader& trace) {
  if (!trace.has_array("/heads/alpha")) return {};
  const ModelShape& s = trace.meta().shape;
  NamedArray a = trace.read_array("/heads/alpha");
  if (a.dims != std::vector<uint64_t>{(uint64_t)s.n_layers, (uint64_t)s.n_kv_heads})
    throw input_error(trace.path(), "/heads/alpha is not [" + std::to_string(s.n_layers) + ", " +
                                        std::to_string(s.n_kv_heads) + "] (layers, KV heads)");
  const std::string source = trace.has_attr("/heads/alpha", "source") ? trace.read_string_attr("/heads/alpha", "source") : "";
  return {std::move(a.data), "trace /heads/alpha" + (source.empty() ? "" : " (" + source + ")")};
}

void choose_duo_gates(PolicySpec& spec, const TraceReader& trace, const std::string& alpha_dir) {
  if (spec.name != "duoattention" || spec.params.count("pattern")) return;
  if (auto g = spec.params.find("gates"); g != spec.params.end()) {
    // gates=profiled on a trace without /heads/alpha is what plain duoattention runs: one name.
    if (g->second == "profiled" && alpha_dir.empty() && !trace.has_array("/heads/alpha")) spec.params.erase(g);
    return;
  }
  if (!alpha_dir.empty()) spec.params["pattern"] = alpha_dir;
  else if (trace.has_array("/heads/alpha")) spec.params["gates"] = "estimated";
}

std::vector<float> kvzip_scores_for_trace(const Model& model, const Tokenizer& tokenizer, const TraceReader& trace,
                                          const EngineOptions& engine, const RunProgress& progress, Engine* on,
                                          const PrefillSnapshot* from) {
  const auto ids = trace.token_ids();
  const std::vector<int> context(ids.begin(), ids.begin() + trace.meta().prompt_len);
  KvzipOptions o;
  o.engine = engine;
  o.progress = progress;
  o.on = on;
  o.from = from;
  return kvzip_key_scores(model, tokenizer, context, o);
}

std::vector<float> kvzip_scores_for_trace(const std::string& model_path, const std::string& tokenizer_path,
                                          const TraceReader& trace, int n_threads, const RunProgress& progress) {
  const Model model = load_model(model_path);
  check_model_matches(model, trace.meta());
  const auto tokenizer = load_tokenizer(model, tokenizer_path);
  EngineOptions engine;
  engine.n_threads = n_threads;
  engine.kv_dtype = recorded_storage(trace.meta()).kv;
  return kvzip_scores_for_trace(model, *tokenizer, trace, engine, progress);
}

bool any_needs_key_scores(const std::vector<std::unique_ptr<Policy>>& policies) {
  for (const auto& p : policies)
    if (p->needs_key_scores()) return true;
  return false;
}

std::vector<std::string> policy_caveats(const std::vector<std::unique_ptr<Policy>>& policies, int prompt_len) {
  std::vector<std::string> out;
  for (const auto& p : policies) {
    const std::string c = p->caveat(prompt_len);
    if (!c.empty()) out.push_back(p->spec().run_name() + ": " + c);
  }
  return out;
}

std::string recorded_under_caveat(const TraceMeta& meta) {
  if (meta.recorded_under.empty()) return {};
  return "the trace was recorded under " + meta.recorded_under +
         ": its rows cover only the keys that policy kept, so what is measured against them is relative to "
         "that run, not to a full cache";
}

void note_recorded_under(const TraceMeta& meta) {
  const std::string caveat = recorded_under_caveat(meta);
  if (!caveat.empty()) print_caveats({caveat});
}

void print_caveats(const std::vector<std::string>& caveats) {
  for (const std::string& c : caveats) std::fprintf(stderr, "kvscope: note: %s\n", c.c_str());
}

}  // namespace kvs
