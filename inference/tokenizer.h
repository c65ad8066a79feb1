// Tokenizer interface: SentencePiece-style BPE (llama2.c tokenizer.bin, GGUF "llama") and
// byte-level BPE (GGUF "gpt2", HF tokenizer.json) behind one API.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvs {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int> encode(std::string_view text, bool add_bos) const = 0;
  // The text `token` contributes when it follows `prev` in a decoded string (byte tokens become
  // their bytes; the space a SentencePiece tokenizer adds after BOS is dropped).
  virtual std::string decode_piece(int prev, int token) const = 0;
  // Text of one token for /tokens/text of a trace (docs/trace-format.md): its bytes as decoded
  // mid-text (see token_text_of_bytes); control and unknown tokens give their piece, e.g. "<s>".
  virtual std::string token_text(int token) const = 0;
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;   // -1 when none
  virtual int eos_id() const = 0;   // -1 when none
  virtual bool add_bos() const = 0; // whether prompts get BOS by default
  virtual std::string kind() const = 0;  // e.g. "sentencepiece-bpe", "byte-level-bpe/smollm"

  std::string decode(std::span<const int> ids) const;
};

// A token's decoded bytes as token_text gives them: unchanged where they are valid UTF-8 (a newline
// stays a newline), "\xNN" for each byte that is not (half of a character split across byte
// tokens) and for NUL (an HDF5 string ends at it).
std::string token_text_of_bytes(std::string_view bytes);

}  // namespace kvs
