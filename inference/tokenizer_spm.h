// SentencePiece-style BPE tokenizer (llama2.c tokenizer.bin, GGUF "llama", tokenizer.json BPE
// with byte fallback): spaces become "▁", a "▁" prefix is added, unknown characters fall back
// to <0xXX> byte tokens, and pieces merge by score (or by merge rank when ranks are given).
#pragma once
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inference/bpe_merge.h"
#include "inference/tokenizer.h"
#include "inference/unicode_normalize.h"

namespace kvs {

// Token types as GGUF numbers them (tokenizer.ggml.token_type).
enum TokenType : int {
  kTokenNormal = 1,
  kTokenUnknown = 2,
  kTokenControl = 3,
  kTokenUserDefined = 4,
  kTokenUnused = 5,
  kTokenByte = 6,
};

struct SpmVocab {
  std::vector<std::string> pieces;  // [vocab] pieces with "▁" for a space
  std::vector<float> scores;        // [vocab] merge scores (higher merges first)
  std::vector<int> types;           // [vocab] TokenType; when missing, "<0xXX>" = byte, else normal
  // Ranked merges (tokenizer.json); they decide merges instead of the scores when non-empty or
  // when merges_only is set (tokenizer.json: an empty list merges nothing, as in Hugging Face).
  std::vector<std::pair<std::string, std::string>> merges;
  bool merges_only = false;
  int bos_id = 1;
  int eos_id = 2;
  int unk_id = 0;
  bool add_bos = true;
  bool add_space_prefix = true;      // prepend "▁" to the text (see prefix_after_special)
  bool prefix_after_special = true;  // also prefix text that follows a special token
  bool split_words = false;          // BPE each "▁word" separately (Metaspace split)
  bool match_special = true;         // match control / user-defined tokens' text in the input
  bool match_control = true;         // ... control tokens' too (the sentencepiece library: no)
  bool collapse_whitespace = false;  // SentencePiece's remove_extra_whitespaces: text between
                                     // special tokens loses leading/trailing spaces, runs become one
  UnicodeForm normalization = UnicodeForm::None;  // applied to text between special tokens first
};

class SpmTokenizer : public Tokenizer {
 public:
  explicit SpmTokenizer(SpmVocab vocab);

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  // Drops control tokens, turns "▁" into spaces and byte tokens into their byte; the first piece
  // after BOS (or at the start, prev < 0) loses its leading space.
  std::string decode_piece(int prev, int token) const override;
  std::string token_text(int token) const override;
  int vocab_size() const override { return static_cast<int>(vocab_.pieces.size()); }
  int bos_id() const override { return vocab_.bos_id; }
  int eos_id() const override { return vocab_.eos_id; }
  bool add_bos() const override { return vocab_.add_bos; }
  std::string kind() const override { return "sentencepiece-bpe"; }

  const SpmVocab& vocab() const { return vocab_; }

 private:
  void encode_fragment(std::string_view text, bool prefix, std::vector<int>& out) const;
  int byte_token(unsigned char byte) const;
  // The bytes a non-control token stands for mid-text: a byte token's byte, else "▁" as spaces.
  std::string piece_bytes(int token) const;

  SpmVocab vocab_;
  std::unordered_map<std::string, int> piece_to_id_;
  MergeRanks merge_ranks_;
  std::vector<std::pair<std::string, int>> specials_;  // matched before tokenization
  int byte_ids_[256];                                  // id of <0xXX>, -1 when absent
};

// Value of a "<0xXX>" byte piece, or -1.
int parse_byte_piece(const std::string& piece);

}  // namespace kvs
