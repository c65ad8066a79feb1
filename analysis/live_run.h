// The second policy driver: a policy enforced inside the engine while it decodes (real eviction),
// compared step by step with a full-cache reference run of the same prompt.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "analysis/policy.h"
#include "analysis/prefill_evidence.h"
#include "analysis/run_progress.h"
#include "analysis/trace.h"
#include "inference/engine.h"
#include "inference/generate.h"
#include "inference/tokenizer.h"

namespace kvs {

// A prompt processed once for all the runs that start from it: the engine's state after the
// reference run's prefill, and what the prompt's attention tells policies.
struct SharedPrefill {
  // Engine::snapshot_prefill of the reference's engine; null when memory for it could not be had
  std::shared_ptr<const PrefillSnapshot> snapshot;
  PrefillEvidence evidence;  // reduced with `window` rows; a run lends it its KVzip scores
  int window = 0;
  AttentionObserver* watched_by = nullptr;  // an observer that saw this prefill (run_reference's prompt_observer)
};

// The full-cache run the policy runs are measured against.
struct ReferenceRun {
  std::vector<int> prompt;     // [P] tokens, BOS included
  std::vector<int> tokens;     // [S] generated tokens, each fed back (the trace's decode tokens)
  std::vector<float> logits;   // [S, vocab] logits of decode step s (query at P+s)
  std::vector<int> next;       // [S] token the reference chooses from logits of step s
  std::size_t peak_kv_bytes = 0;
  std::vector<std::size_t> kv_bytes;  // [S] bytes the full cache holds after each decode step
  // Set when run_reference shared its prefill: live_run on the same engine starts from it instead
  // of processing the prompt again (where it has a snapshot).
  std::shared_ptr<SharedPrefill> prefill;
};

struct LiveRunOptions {
  std::string mode = "forced";   // forced: fed the reference tokens; free: samples its own
  SamplingOptions sampling;      // free mode (and the reference run)
  bool keep_attention = true;    // store the run's own decode rows in the RunData
  int window_request = 64;       // prefill window rows collected for prefill-once policies
  std::vector<float> key_scores;  // [L, Hkv, P] KVzip scores for policies that need them
  AttentionObserver* observer = nullptr;  // also sees the run (e.g. a TraceRecorder)
  RunProgress progress;           // the run's prefill layers and steps; stopping it
};

// Runs the model with a full cache: prefill `prompt`, then `steps` decode steps fed either the
// given `forced` tokens or sampled ones, reporting to `progress`. With share_window > 0 it also
// reduces the prompt's attention for policies (LiveRunOptions::window_request = share_window) and
// keeps a snapshot of the engine after the prefill in ReferenceRun::prefill, unless memory for it
// cannot be had; then `prompt_observer`, when given, watches that prefill (the prompt's tokens and
// attention, not the reference's decode) for the live run it will watch (LiveRunOptions::observer),
// which then shows it the run's decode alone. Throws InputError on bad input, RunCancelled when
// progress.cancelled stopped it.
ReferenceRun run_reference(Engine& engine, const std::vector<int>& prompt, int steps,
                           const std::vector<int>& forced, const SamplingOptions& sampling,
                           const RunProgress& progress = {}, int share_window = 0,
                           AttentionObserver* prompt_observer = nullptr);

// Enforces `policy` live (the engine's options decide RoPE positions: original, or inside the
// cache with EngineOptions::rope_in_cache). `context` carries alpha / shape; its prefill evidence is filled here.
// The run starts from the reference's shared prefill when there is a snapshot of one for
// options.window_request and options.observer, if any, saw it (SharedPrefill::watched_by); else it
// prefills the prompt itself. Either way it gives the same numbers. A policy with a
// prefill_chunk shorter than the prompt has the run feed it in chunks (GenerateRequest::
// prefill_chunk), never from the shared prefill; its evidence is then the first chunk's, and an
// observer must have watched the reference's prefill (std::logic_error otherwise).
// Returns /runs/<name> data with eviction="real": kept [S, L, Hkv, T], the run's tokens, text,
// own attention and metrics (kl, top1_agree, ref_logprob [S]; kv_bytes [S, L, Hkv] from the kept
// sets, as the simulator counts them) and scalars: perplexity of the reference continuation
// under the run and (full_perplexity) under the full cache over the same steps,
// first_divergence (the first step whose choice of the next token differs: forced, its top-1;
// free, the token it generated, at the last step its top-1; -1 = none), peak_kv_bytes (the prompt
// held whole during prefill included) and its ratio to full's over the same steps,
// mean_kv_ratio (bytes held after each step over the full cache's, averaged over the steps).
// Free mode compares logits only while the run's text agrees
// with the reference (steps 0..first_divergence, whose logits come after the same tokens): later
// kl / top1_agree / ref_logprob are NaN, and perplexity and the scalar compared_steps cover the
// compared steps.
// Throws RunCancelled when options.progress.cancelled stopped it.
RunData live_run(Engine& engine, Policy& policy, PolicyContext context, const ReferenceRun& reference,
                 const Tokenizer& tokenizer, const LiveRunOptions& options);

}  // namespace kvs
