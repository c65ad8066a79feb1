// Tokenizer helpers shared by every tokenizer kind.
#include "inference/tokenizer.h"

#include "inference/bpe_merge.h"

namespace kvs {

std::string Tokenizer::decode(std::span<const int> ids) const {
  std::string text;
  int prev = -1;
  for (int id : ids) {
    text += decode_piece(prev, id);
    prev = id;
  }
  return text;
}

std::string token_text_of_bytes(std::string_view bytes) {
  std::string out;
  for (char c : escape_invalid_utf8(bytes)) {
    if (c == '\0') out += "\\x00";
    else out += c;
  }
  return out;
}

}  // namespace kvs
