// Needle-in-a-haystack prompt construction with exact token spans, and ROUGE-1 recall on ids.
#include "analysis/needle.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "inference/errors.h"
#include "inference/tokenizer.h"

namespace kvs {

namespace {

const std::vector<std::string>& default_filler() {
  static const std::vector<std::string> sentences = {
      "The sun was warm and the sky was blue.",
      "A little dog ran across the green grass.",
      "Tom and Lily played with a red ball in the park.",
      "Mom baked a big cake for the whole family.",
      "A bird sang a happy song in the tall tree.",
      "They walked home together when it got dark.",
      "The cat liked to sleep on the soft bed.",
      "Grandpa told a funny story about a fish.",
  };
  return sentences;
}

// Tokens overlapping the characters [cb, ce) of the decoded text; off: [n+1] char offsets.
TokenSpan span_of(const std::vector<size_t>& off, size_t cb, size_t ce) {
  TokenSpan s{-1, -1};
  const int n = (int)off.size() - 1;
  for (int i = 0; i < n; ++i) {
    if (off[i + 1] > cb && off[i] < ce) {
      if (s.begin < 0) s.begin = i;
      s.end = i + 1;
    }
  }
  return s;
}

}  // namespace

std::string passkey_needle(int passkey) {
  return "The secret passkey is " + std::to_string(passkey) + ".";
}

int passkey_for_seed(unsigned seed) {
  std::mt19937 rng(seed);
  return std::uniform_int_distribution<int>(10000, 99999)(rng);
}

NeedlePrompt build_needle_prompt(const Tokenizer& tokenizer, const NeedleOptions& options) {
  if (options.context_tokens < 1) throw input_error("needle prompt", "context length must be >= 1");
  if (!(options.depth >= 0.0 && options.depth <= 1.0)) {
    throw input_error("needle prompt", "depth must be between 0 and 1");
  }
  if (options.needle.empty()) throw input_error("needle prompt", "empty needle");
  if (options.question.empty()) throw input_error("needle prompt", "empty question");
  const std::vector<std::string>& filler = options.filler.empty() ? default_filler() : options.filler;
  for (const std::string& s : filler) {
    if (s.empty()) throw input_error("needle prompt", "empty filler sentence");
  }

  // Fixed parts first, then whole filler sentences while they fit the target length.
  std::string tail = "\n" + options.question + (options.answer.empty() ? "" : " " + options.answer);
  int used = (int)tokenizer.encode(options.needle + tail, tokenizer.add_bos()).size();
  std::vector<int> cost(filler.size());  // [sentences] tokens of " " + sentence
  for (size_t i = 0; i < filler.size(); ++i) {
    cost[i] = std::max(1, (int)tokenizer.encode(" " + filler[i], false).size());
  }
  std::vector<const std::string*> hay;
  for (size_t i = 0; used + cost[i % filler.size()] <= options.context_tokens; ++i) {
    used += cost[i % filler.size()];
    hay.push_back(&filler[i % filler.size()]);
  }
  const size_t at = (size_t)std::lround(options.depth * (double)hay.size());

  NeedlePrompt p;
  size_t needle_begin = 0, needle_end = 0;
  for (size_t i = 0; i <= hay.size(); ++i) {
    if (i == at) {
      if (!p.text.empty()) p.text += ' ';
      needle_begin = p.text.size();
      p.text += options.needle;
      needle_end = p.text.size();
    }
    if (i == hay.size()) break;
    if (!p.text.empty()) p.text += ' ';  // no leading space: SentencePiece models that remove extra
    p.text += *hay[i];                   // whitespace (tok512.model) would drop it from the tokens
  }
  p.text += '\n';
  const size_t question_begin = p.text.size();
  p.text += options.question;
  const size_t question_end = p.text.size();
  size_t answer_begin = question_end, answer_end = question_end;
  if (!options.answer.empty()) {
    p.text += ' ';
    answer_begin = p.text.size();
    p.text += options.answer;
    answer_end = p.text.size();
  }

  p.tokens = tokenizer.encode(p.text, tokenizer.add_bos());
  std::vector<size_t> off(p.tokens.size() + 1, 0);  // [n+1] char offset of each token in `decoded`
  std::string decoded;
  int prev = -1;
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    off[i] = decoded.size();
    decoded += tokenizer.decode_piece(prev, p.tokens[i]);
    prev = p.tokens[i];
  }
  off[p.tokens.size()] = decoded.size();
  const size_t shift = decoded.find(p.text);
  if (shift == std::string::npos) {
    throw input_error("needle prompt", "the tokenizer (" + tokenizer.kind() + ") does not reproduce the prompt text");
  }
  p.needle = span_of(off, shift + needle_begin, shift + needle_end);
  p.question = span_of(off, shift + question_begin, shift + question_end);
  if (answer_end > answer_begin) {
    p.answer = span_of(off, shift + answer_begin, shift + answer_end);
  } else {
    p.answer = TokenSpan{(int)p.tokens.size(), (int)p.tokens.size()};
  }
  return p;
}

double unigram_recall(std::span<const int> candidate, std::span<const int> reference) {
  if (reference.empty()) return 0.0;
  std::map<int, int> have;
  for (int t : candidate) ++have[t];
  int hit = 0;
  for (int t : reference) {
    auto it = have.find(t);
    if (it != have.end() && it->second > 0) { --it->second; ++hit; }
  }
  return (double)hit / (double)reference.size();
}

}  // namespace kvs
