// Retrieval-head score of Wu et al. (POLICIES.md §10): greedy decoding on needle prompts, counting
// per (layer, query head) the steps whose top-1 key is the needle token being copied; plus the
// published JSON format {"<layer>-<head>": [score per kept trial, ...]}.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "analysis/needle.h"
#include "inference/engine.h"
#include "inference/hooks.h"

namespace kvs {

class Tokenizer;

// Collects, at each decode step, the top-1 key position of every (layer, query head) row
// (the lower position on ties). Prefill blocks are ignored.
class ArgmaxObserver : public AttentionObserver {
 public:
  ArgmaxObserver(int n_layers, int n_heads);
  PrefillNeed prefill_need() const override { return {false, 1}; }  // decode rows only
  void on_attention(const AttentionBlock& block) override;
  const std::vector<int>& argmax() const { return argmax_; }  // [L, H] of the latest step
 private:
  int n_heads_;
  std::vector<int> argmax_;  // [L, H]
};

// One trial's bookkeeping: tokens [n] of the prompt, needle span [s, e).
class RetrievalTally {
 public:
  RetrievalTally(int n_layers, int n_heads, std::span<const int> tokens, TokenSpan needle);
  // argmax: [L, H] top-1 key positions of this step's rows; emitted: the token this step chose.
  // Each head whose top-1 key lies in the needle and holds the emitted token gains 1/(e-s).
  void add_step(std::span<const int> argmax, int emitted);
  const std::vector<float>& scores() const { return scores_; }  // [L, H]
 private:
  std::vector<int> tokens_;
  TokenSpan needle_;
  std::vector<float> scores_;  // [L, H]
};

struct RetrievalOptions {
  std::vector<int> context_tokens = {200, 400};          // prompt lengths tried
  std::vector<double> depths = {0.1, 0.3, 0.5, 0.7, 0.9};  // needle depths tried
  int max_steps = 50;                                      // greedy tokens per trial
  double min_recall = 0.5;   // a trial counts when the answer's recall of the needle exceeds this
  NeedleOptions prompt;      // needle, question, filler (context_tokens/depth are overridden)
  bool vary_passkey = true;  // replace the needle by passkey_needle(passkey_for_seed(seed + trial))
  unsigned seed = 7;
  EngineOptions engine;
};

struct RetrievalScores {
  int n_layers = 0;
  int n_heads = 0;
  int n_trials = 0;                        // trials run (0 when read from a file)
  std::vector<std::vector<float>> trials;  // [L * H] per head: its score in each kept trial
  std::vector<float> mean() const;         // [L, H] mean of each list (0 when a list is empty)
  int n_kept() const { return trials.empty() ? 0 : (int)trials[0].size(); }
};

// One trial: prefill all but the last prompt token, then decode greedily up to max_steps tokens
// (stopping after EOS or a newline). Returns the per-head scores and fills `answer` with the
// generated tokens (EOS excluded).
std::vector<float> retrieval_trial(Engine& engine, const Tokenizer& tokenizer,
                                   const NeedlePrompt& prompt, int max_steps,
                                   std::vector<int>& answer);

// Runs every (context length, depth) trial on the model and keeps those whose answer recalls the
// needle. Throws InputError when a prompt does not fit the model's context.
RetrievalScores retrieval_scores(const Model& model, const Tokenizer& tokenizer,
                                 const RetrievalOptions& options);

// {"0-0": [0.5, 0.0], "0-1": [...], ...} on one line, layers then heads in order.
std::string retrieval_scores_json(const RetrievalScores& scores);
// Parses the JSON format; every "<layer>-<head>" pair of the implied L x H grid must be present
// and all lists must have the same length. `what` names the file in errors.
RetrievalScores parse_retrieval_scores(const std::string& text, const std::string& what);
void write_retrieval_scores(const std::string& path, const RetrievalScores& scores);
RetrievalScores read_retrieval_scores(const std::string& path);

}  // namespace kvs
