// Turning --policy/--budget flags into policy objects, and finding what some policies need
// besides the trace: the model (KVzip's repeat pass) and DuoAttention gates (--alpha DIR).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "analysis/policy.h"
#include "analysis/run_progress.h"
#include "analysis/trace.h"
#include "app/cli/args.h"
#include "inference/engine.h"
#include "inference/model.h"
#include "inference/tokenizer.h"

namespace kvs {

// One policy per --policy flag, validated against the model shape (InputError on any mistake,
// before any work is done). Throws when no --policy was given. OmniKV without filters= gets the
// filter layers the optimizer chooses on the trace's /layers/similarity when it has one.
std::vector<std::unique_ptr<Policy>> build_policies(const Args& args, const TraceReader& trace);

// Whether --policy `policy_text` takes its budget from --budget: not `full` (which keeps every
// token), no budget=N of its own and no OmniKV frac=F. A --budget no policy takes is refused, not
// ignored.
bool takes_budget_flag(const std::string& policy_text);
// Why a policy takes no --budget ("full keeps every token", "its spec gives budget=8", ...); ""
// when it takes one.
std::string own_budget(const std::string& policy_text);

// --model, else the model path recorded in the trace; --tokenizer likewise.
std::string model_path_for(const Args& args, const TraceMeta& meta, const std::string& why);
std::string tokenizer_path_for(const Args& args, const TraceMeta& meta);

// Throws InputError naming the model when its shape (layers, heads, KV heads, head size) is not
// the trace's.
void check_model_matches(const Model& model, const TraceMeta& meta);

// Where a DuoAttention spec without pattern= or gates= takes its gates from, written into the
// spec so that the run's name says it (as OmniKV's chosen filters): `alpha_dir` (--alpha DIR)
// becomes pattern=DIR; else a trace holding /heads/alpha (stored by `kvscope heads trace.h5
// --model M`) gives gates=estimated; else the gates stay profiled from the trace. Runs with
// different gates thus never replace each other, and alike gates share a name: an explicit
// gates=profiled where profiled is what plain duoattention gives is dropped. Other specs are left
// as they are.
void choose_duo_gates(PolicySpec& spec, const TraceReader& trace, const std::string& alpha_dir);

// The gates gates=estimated runs take, [L, Hkv]: the trace's /heads/alpha (empty when absent).
struct DuoGates {
  std::vector<float> alpha;  // [L, Hkv]
  std::string source;
};
DuoGates trace_duo_gates(const TraceReader& trace);

// KVzip key scores [L, Hkv, P] for the trace's prompt, computed on `model` (the trace's, already
// loaded and checked by the caller) with an engine made from `engine`, reporting to `progress`
// (and stopped by it: RunCancelled). With `on`: on that engine instead, from `from`, the snapshot
// of its prefill of the prompt, when given (KvzipOptions).
std::vector<float> kvzip_scores_for_trace(const Model& model, const Tokenizer& tokenizer, const TraceReader& trace,
                                          const EngineOptions& engine, const RunProgress& progress = {},
                                          Engine* on = nullptr, const PrefillSnapshot* from = nullptr);
// The same on the model file `model_path`, loaded here and checked against the trace's shape,
// with `tokenizer_path` ("" = the model's own tokenizer), on the CPU with `n_threads` (0 = all
// cores) and the cache in the recording's type (recorded_storage).
std::vector<float> kvzip_scores_for_trace(const std::string& model_path, const std::string& tokenizer_path,
                                          const TraceReader& trace, int n_threads, const RunProgress& progress = {});

bool any_needs_key_scores(const std::vector<std::unique_ptr<Policy>>& policies);

// "run name: caveat" for each policy whose settings reduce it to something else on a prompt of
// `prompt_len` tokens (Policy::caveat), in order.
std::vector<std::string> policy_caveats(const std::vector<std::unique_ptr<Policy>>& policies, int prompt_len);

// A trace recorded under a policy holds that run's attention, not the full cache's: the caveat
// the commands that analyse its rows give ("" for other traces), and that caveat printed on
// stderr as print_caveats does.
std::string recorded_under_caveat(const TraceMeta& meta);
void note_recorded_under(const TraceMeta& meta);

// The caveats as the CLI prints them on stderr, one "kvscope: note: ..." line each.
void print_caveats(const std::vector<std::string>& caveats);

}  // namespace kvs
