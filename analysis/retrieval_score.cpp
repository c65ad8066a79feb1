// Retrieval-head score (Wu et al., POLICIES.md §10): trials on needle prompts through the engine's
// public API, and the {"<layer>-<head>": [...]} JSON file (read with inference/json.h).
#include "analysis/retrieval_score.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "analysis/atomic_file.h"
#include "inference/errors.h"
#include "inference/generate.h"
#include "inference/json.h"
#include "inference/loader.h"
#include "inference/tokenizer.h"

namespace kvs {

ArgmaxObserver::ArgmaxObserver(int n_layers, int n_heads)
    : n_heads_(n_heads), argmax_((size_t)n_layers * n_heads, -1) {}

void ArgmaxObserver::on_attention(const AttentionBlock& block) {
  if (!block.decode || block.n_keys <= 0) return;
  int best = 0;
  for (int j = 1; j < block.n_keys; ++j) {
    if (block.probs[j] > block.probs[best]) best = j;
  }
  argmax_[(size_t)block.layer * n_heads_ + block.head] = block.key(best);
}

RetrievalTally::RetrievalTally(int n_layers, int n_heads, std::span<const int> tokens, TokenSpan needle)
    : tokens_(tokens.begin(), tokens.end()), needle_(needle), scores_((size_t)n_layers * n_heads, 0.0f) {
  if (needle.begin < 0 || needle.end > (int)tokens.size() || needle.size() <= 0) {
    throw input_error("needle prompt", "needle span outside the prompt");
  }
}

void RetrievalTally::add_step(std::span<const int> argmax, int emitted) {
  const float gain = 1.0f / (float)needle_.size();
  for (size_t i = 0; i < scores_.size() && i < argmax.size(); ++i) {
    const int p = argmax[i];
    if (p >= needle_.begin && p < needle_.end && tokens_[p] == emitted) scores_[i] += gain;
  }
}

std::vector<float> RetrievalScores::mean() const {
  std::vector<float> m(trials.size(), 0.0f);  // [L, H]
  for (size_t i = 0; i < trials.size(); ++i) {
    double s = 0.0;
    for (float v : trials[i]) s += v;
    if (!trials[i].empty()) m[i] = (float)(s / trials[i].size());
  }
  return m;
}

std::vector<float> retrieval_trial(Engine& engine, const Tokenizer& tokenizer,
                                   const NeedlePrompt& prompt, int max_steps,
                                   std::vector<int>& answer) {
  const ModelConfig& c = engine.model().config;
  const int n = (int)prompt.tokens.size();
  if (n < 2) throw input_error("needle prompt", "needs at least two tokens");
  if (n > c.seq_len) {
    throw input_error("needle prompt", std::to_string(n) + " tokens exceed the model's context of " +
                                           std::to_string(c.seq_len));
  }
  const int steps = std::min(max_steps, c.seq_len - n + 1);
  ArgmaxObserver argmax(c.n_layers, c.n_heads);
  RetrievalTally tally(c.n_layers, c.n_heads, prompt.tokens, prompt.needle);
  Sampler greedy(SamplingOptions{});
  engine.set_observer(nullptr);
  engine.reset();
  engine.prefill(std::span<const int>(prompt.tokens).first(n - 1));
  const EngineAttachment attached(engine, &argmax, nullptr);
  answer.clear();
  int token = prompt.tokens[n - 1];
  const std::vector<int> ends = text_end_ids(engine.model(), tokenizer);
  for (int step = 0; step < steps; ++step) {
    const int emitted = greedy.sample(engine.decode(token));
    tally.add_step(argmax.argmax(), emitted);
    if (std::find(ends.begin(), ends.end(), emitted) != ends.end()) break;  // the text ended
    answer.push_back(emitted);
    if (tokenizer.decode_piece(token, emitted).find('\n') != std::string::npos) break;
    token = emitted;
  }
  return tally.scores();
}

RetrievalScores retrieval_scores(const Model& model, const Tokenizer& tokenizer,
                                 const RetrievalOptions& options) {
  if (options.max_steps < 1) throw input_error("--steps", "must be >= 1");
  if (options.context_tokens.empty() || options.depths.empty()) {
    throw input_error("retrieval score", "no context length or depth to try");
  }
  const ModelConfig& c = model.config;
  for (int ctx : options.context_tokens) {
    if (ctx < 2 || ctx > c.seq_len) {
      throw input_error("retrieval score", "prompt length " + std::to_string(ctx) +
                                               " outside 2.." + std::to_string(c.seq_len));
    }
  }
  Engine engine(model, options.engine);
  RetrievalScores out;
  out.n_layers = c.n_layers;
  out.n_heads = c.n_heads;
  out.trials.assign((size_t)c.n_layers * c.n_heads, {});
  for (int ctx : options.context_tokens) {
    for (double depth : options.depths) {
      NeedleOptions o = options.prompt;
      o.context_tokens = ctx;
      o.depth = depth;
      if (options.vary_passkey) o.needle = passkey_needle(passkey_for_seed(options.seed + out.n_trials));
      NeedlePrompt p = build_needle_prompt(tokenizer, o);
      std::vector<int> answer;
      std::vector<float> scores = retrieval_trial(engine, tokenizer, p, options.max_steps, answer);
      ++out.n_trials;
      std::span<const int> needle(p.tokens.data() + p.needle.begin, p.needle.size());
      if (unigram_recall(answer, needle) <= options.min_recall) continue;
      for (size_t i = 0; i < scores.size(); ++i) out.trials[i].push_back(scores[i]);
    }
  }
  return out;
}

std::string retrieval_scores_json(const RetrievalScores& scores) {
  std::string out = "{";
  char buf[32];
  for (int l = 0; l < scores.n_layers; ++l) {
    for (int h = 0; h < scores.n_heads; ++h) {
      if (out.size() > 1) out += ", ";
      out += '"';
      out += std::to_string(l);
      out += '-';
      out += std::to_string(h);
      out += "\": [";
      const std::vector<float>& list = scores.trials[(size_t)l * scores.n_heads + h];
      for (size_t i = 0; i < list.size(); ++i) {
        std::snprintf(buf, sizeof buf, "%.9g", (double)list[i]);
        if (i) out += ", ";
        out += buf;
      }
      out += "]";
    }
  }
  return out + "}";
}

namespace {

constexpr size_t kMaxJsonBytes = 64u << 20;
constexpr int kMaxHeadIndex = 1 << 16;

// "<layer>-<head>" -> (layer, head), exactly as written by retrieval_scores_json.
std::pair<int, int> head_key(const std::string& key, const std::string& what) {
  int l = -1, h = -1;
  char extra = 0;
  if (std::sscanf(key.c_str(), "%d-%d%c", &l, &h, &extra) != 2 || l < 0 || h < 0 || l > kMaxHeadIndex ||
      h > kMaxHeadIndex || key != std::to_string(l) + "-" + std::to_string(h)) {
    throw input_error(what, "key \"" + key + "\" is not <layer>-<head>");
  }
  return {l, h};
}

}  // namespace

RetrievalScores parse_retrieval_scores(const std::string& text, const std::string& what) {
  if (text.size() > kMaxJsonBytes) throw input_error(what, "file larger than 64 MiB");
  const Json doc = Json::parse(text, what);
  if (!doc.is_object()) throw input_error(what, "expected an object of \"<layer>-<head>\": [scores]");
  std::map<std::pair<int, int>, std::vector<float>> lists;  // (layer, head) -> score per trial
  for (size_t i = 0; i < doc.size(); ++i) {
    const std::string& key = doc.keys()[i];
    const Json& list = doc.items()[i];
    if (!list.is_array()) throw input_error(what, "\"" + key + "\" is not a list of scores");
    std::vector<float> scores;
    for (const Json& x : list.items()) {
      if (!x.is_number() || std::fabs(x.as_number()) > FLT_MAX)
        throw input_error(what, "expected a float in the list of \"" + key + "\"");
      scores.push_back(static_cast<float>(x.as_number()));
    }
    if (!lists.emplace(head_key(key, what), std::move(scores)).second)
      throw input_error(what, "duplicate key \"" + key + "\"");
  }
  if (lists.empty()) throw input_error(what, "no head scores");
  RetrievalScores out;
  for (const auto& [key, list] : lists) {
    out.n_layers = std::max(out.n_layers, key.first + 1);
    out.n_heads = std::max(out.n_heads, key.second + 1);
  }
  if ((size_t)out.n_layers * out.n_heads != lists.size()) {
    throw input_error(what, "keys do not cover a full " + std::to_string(out.n_layers) + "x" +
                                std::to_string(out.n_heads) + " layer x head grid");
  }
  out.trials.resize(lists.size());
  const size_t trials = lists.begin()->second.size();
  for (auto& [key, list] : lists) {
    if (list.size() != trials) throw input_error(what, "score lists have different lengths");
    out.trials[(size_t)key.first * out.n_heads + key.second] = std::move(list);
  }
  return out;
}

void write_retrieval_scores(const std::string& path, const RetrievalScores& scores) {
  write_file_atomically(path, retrieval_scores_json(scores) + "\n");
}

RetrievalScores read_retrieval_scores(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw input_error(path, "cannot be opened");
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  if (size < 0 || (size_t)size > kMaxJsonBytes) throw input_error(path, "file larger than 64 MiB");
  f.seekg(0);
  std::string text((size_t)size, '\0');
  if (!f.read(text.data(), size)) throw input_error(path, "read failed");
  return parse_retrieval_scores(text, path);
}

}  // namespace kvs
