// Byte-level BPE tokenizer (GGUF "gpt2" vocabularies and Hugging Face ByteLevel tokenizer.json):
// special tokens matched first, regex pre-tokenization, bytes mapped to printable code points
// (GPT-2's bytes_to_unicode), then merges by rank.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inference/bpe_merge.h"
#include "inference/pretokenizer.h"
#include "inference/tokenizer.h"
#include "inference/unicode_normalize.h"

namespace kvs {

struct BpeVocab {
  std::vector<std::string> tokens;  // [vocab] byte-level token strings ("Ġ" = space)
  std::vector<int> types;           // [vocab] TokenType (tokenizer_spm.h); empty = all normal
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<std::pair<std::string, int>>
      specials;                           // (text, id) matched verbatim before splitting
  std::vector<std::string> pre_patterns;  // pre-tokenizer regexes, applied in turn
  std::string pre_name;                   // e.g. "smollm", "llama3"
  bool add_prefix_space = false;  // ByteLevel add_prefix_space: a space before the first piece
  bool ignore_merges = false;     // a pre-token that is a whole vocabulary entry is kept as is
  UnicodeForm normalization = UnicodeForm::None;  // applied to text between special tokens
  int bos_id = -1;
  int eos_id = -1;
  bool add_bos = false;
  std::string source;  // file it came from, for error messages
};

class ByteLevelBpeTokenizer : public Tokenizer {
 public:
  explicit ByteLevelBpeTokenizer(BpeVocab vocab);

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  std::string decode_piece(int prev, int token) const override;  // control tokens give ""
  std::string token_text(int token) const override;
  int vocab_size() const override { return static_cast<int>(vocab_.tokens.size()); }
  int bos_id() const override { return vocab_.bos_id; }
  int eos_id() const override { return vocab_.eos_id; }
  bool add_bos() const override { return vocab_.add_bos; }
  std::string kind() const override { return "byte-level-bpe/" + vocab_.pre_name; }

  const BpeVocab& vocab() const { return vocab_; }
  // Id of a token string, -1 when absent.
  int token_id(const std::string& token) const;

 private:
  void encode_word(std::string_view word, std::vector<int>& out) const;
  std::string token_bytes(int token) const;  // raw bytes a token stands for

  BpeVocab vocab_;
  PreTokenizer pre_;
  std::unordered_map<std::string, int> token_to_id_;
  MergeRanks merge_ranks_;
  std::vector<bool> is_special_;                     // [vocab] matched verbatim / kept raw
};

// GPT-2's bytes_to_unicode: the UTF-8 string that stands for byte b.
const std::string& byte_to_unicode(unsigned char b);
// Inverse: the byte a code point stands for, or -1.
int unicode_to_byte(uint32_t codepoint);

}  // namespace kvs
