// Tokenizer helpers shared by every tokenizer kind.
#include "inference/tokenizer.h"

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

}  // namespace kvs
