// Shared core of both tokenizer families: greedy pairwise merging of symbols (BPE), and the
// splitting of text around special tokens that are matched verbatim before tokenization.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvs {

// Priority of merging `left` and `right` into one symbol; nullopt when they cannot merge.
// Higher merges first (SentencePiece: score of the merged piece; ranked merges: -rank).
using PairPriority = std::function<std::optional<double>(std::string_view, std::string_view)>;

// Repeatedly merges the adjacent pair with the highest priority (the leftmost one on ties) until
// no pair can merge; returns the final symbols. Equivalent to llama2.c's quadratic loop, in
// O(n log n) with a priority queue.
std::vector<std::string> bpe_merge(std::vector<std::string> symbols, const PairPriority& priority);

// Ranked merges (GPT-2 merges.txt, tokenizer.json's "merges"): a pair merges when it is listed,
// earlier ones first.
class MergeRanks {
 public:
  MergeRanks() = default;
  explicit MergeRanks(const std::vector<std::pair<std::string, std::string>>& merges);  // in rank order
  bool empty() const { return rank_.empty(); }
  // Priority -rank of a listed pair, nullopt for others. Valid while this object lives.
  PairPriority priority() const;

 private:
  std::unordered_map<std::string, int> rank_;  // left + '\xff' + right -> rank
};

// Splits a UTF-8 string into code points (invalid bytes become one-byte symbols).
std::vector<std::string> utf8_chars(std::string_view text);

// Length of the UTF-8 sequence starting with byte `lead` (1 for invalid lead bytes).
int utf8_length(unsigned char lead);

// One piece of text after special-token matching: plain text, or a special token's id.
struct TextPart {
  std::string_view text;
  int special_id = -1;  // -1 for plain text
};

// Splits `text` at every occurrence of a special token's text (longest match first, scanning left
// to right). `specials` holds (text, id) pairs.
std::vector<TextPart> split_special(std::string_view text,
                                    const std::vector<std::pair<std::string, int>>& specials);

// Replaces bytes that are not valid UTF-8 with "\xNN" escapes, one a byte: those of a truncated
// character, stray continuation bytes, overlong forms (C0 80 for NUL), UTF-16 surrogates
// (ED A0 80) and anything past U+10FFFF, which a strict decoder (Python's, h5py's asstr()) refuses.
std::string escape_invalid_utf8(std::string_view bytes);

}  // namespace kvs
