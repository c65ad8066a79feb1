// The eviction-policy interface: every policy is one CacheController, driven either by the
// simulator over a recorded trace or by the engine live (DESIGN.md "one policy, two drivers").
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/prefill_evidence.h"
#include "analysis/shape.h"
#include "inference/hooks.h"

namespace kvs {

// Parsed "name:key=value,key=value" plus the budget (tokens per head, cache size carried
// between steps).
struct PolicySpec {
  std::string name;                          // CLI name: full, window, streamingllm, ...
  std::map<std::string, std::string> params; // raw key=value pairs
  int budget = 0;                            // 0 for full, which holds everything
  std::string run_name() const;              // name used under /runs, e.g. "h2o_b64"
};

// Throws InputError("--policy <text>: ...") on a malformed spec.
PolicySpec parse_policy_spec(const std::string& text, int budget);

// Inputs a policy may need beyond the attention evidence the drivers feed it.
struct PolicyContext {
  ModelShape shape;
  int prompt_len = 0;
  const PrefillEvidence* prefill = nullptr;  // complete by the time after_prefill runs
  // Per-(layer, KV head) gates for DuoAttention, [L, Hkv]; empty = profile from the evidence.
  std::vector<float> alpha;
  std::string alpha_source;
};

// Role of a held position at a step, for display (bit flags).
enum TokenRole : uint8_t { kRoleSink = 1, kRoleRecent = 2, kRoleScored = 4 };

class Policy : public CacheController {
 public:
  const PolicySpec& spec() const { return spec_; }
  virtual std::string params_json() const = 0;  // resolved parameters, defaults included
  // Called once per sequence before prefill.
  virtual void begin(const PolicyContext& context) = 0;
  // Whether the policy needs KVzip-style key scores in PrefillEvidence::key_scores.
  virtual bool needs_key_scores() const { return false; }
  // Score-selected ("heavy hitter") sets: the positions of (layer, kv_head) that the last
  // eviction kept by score rather than by a positional rule (sinks, recent window), read from
  // what `kv` holds after it (a part of kv.held: nothing is stored for a run that reads none).
  // Policies without such sets return false / empty; metrics use them for set turnover between
  // steps.
  virtual bool has_scored_sets() const { return false; }
  virtual std::span<const int32_t> scored_set(int layer, int kv_head, const KvSlots& kv) const { return {}; }
  // One line on what this policy's settings make of a prompt of `prompt_len` tokens when they are
  // not what they say (SnapKV's window covering the whole budget: a plain recent window; a given
  // value cut to fit the budget); empty when they are. The drivers' callers show it beside the run.
  virtual std::string caveat(int prompt_len) const { return {}; }
  // Live runs: the prompt goes into the engine in chunks of this many tokens (GenerateRequest::
  // prefill_chunk), the policy compressing the cache between them; 0: in one prefill. The trace
  // driver replays one whole prefill either way.
  virtual int prefill_chunk() const { return 0; }
 protected:
  explicit Policy(PolicySpec spec) : spec_(std::move(spec)) {}
  PolicySpec spec_;
};

// Registry: builds a policy from its spec, checking parameters against the model shape.
// Throws InputError naming the policy and the problem (unknown name/parameter, budget <= 0,
// filter layer beyond the last layer, alpha of the wrong shape, ...).
std::unique_ptr<Policy> make_policy(const PolicySpec& spec, const ModelShape& shape);
std::vector<std::string> policy_names();

// The parameters `spec` resolves to on this shape, its defaults included, as spec text
// "key=value,..." (lists as comma-separated values). Only what a spec may set: values the run
// derives or resolves later from other inputs are left out. Throws what make_policy throws.
std::string resolved_params_text(const PolicySpec& spec, const ModelShape& shape);

}  // namespace kvs
