// Needle-in-a-haystack / passkey prompts shared by the retrieval-head score and α estimation:
// filler sentences with one needle sentence at a depth, then a question and an optional answer,
// tokenized once, with the token spans of each part.
#pragma once
#include <span>
#include <string>
#include <vector>

namespace kvs {

class Tokenizer;

struct NeedleOptions {
  int context_tokens = 256;  // target prompt length in tokens (filler is added up to it)
  double depth = 0.5;        // needle position as a fraction of the filler, 0..1
  std::string needle = "The secret passkey is 73914.";
  std::string question = "What is the secret passkey? Answer with the sentence that states it.\nAnswer:";
  std::string answer;        // appended after the question when not empty (teacher forcing)
  std::vector<std::string> filler;  // haystack sentences, cycled; empty = the built-in ones
};

struct TokenSpan {
  int begin = 0;  // first token
  int end = 0;    // one past the last token
  int size() const { return end - begin; }
};

struct NeedlePrompt {
  std::string text;         // the whole prompt text
  std::vector<int> tokens;  // [n] token ids, BOS first when the tokenizer adds one
  TokenSpan needle;         // tokens that overlap the needle sentence's characters
  TokenSpan question;       // tokens of the question
  TokenSpan answer;         // tokens of the answer (empty span when there is none)
};

// The needle sentence of a passkey prompt: "The secret passkey is <passkey>."
std::string passkey_needle(int passkey);
// A passkey in [10000, 99999] drawn deterministically from `seed`.
int passkey_for_seed(unsigned seed);

// Builds the prompt: filler sentences up to about context_tokens, the needle inserted at a
// sentence boundary at `depth`, then "\n" + question (+ " " + answer). Token spans come from the
// decoded text of each token, so they are exact for any tokenizer that round-trips the text.
// Throws InputError when the options are invalid or the tokenizer does not reproduce the text.
NeedlePrompt build_needle_prompt(const Tokenizer& tokenizer, const NeedleOptions& options);

// ROUGE-1 recall on token ids: the share of the reference's tokens (with multiplicity) that the
// candidate contains, counts clipped. 0 for an empty reference.
double unigram_recall(std::span<const int> candidate, std::span<const int> reference);

}  // namespace kvs
