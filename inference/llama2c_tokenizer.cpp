// llama2.c tokenizer.bin reader: int32 max_token_length, then for each token
// float32 score, int32 byte length, the piece's bytes.
#include "inference/llama2c_tokenizer.h"

#include <cstdint>
#include <cstring>

#include "inference/errors.h"
#include "inference/mapped_file.h"

namespace kvs {

std::unique_ptr<SpmTokenizer> load_llama2c_tokenizer(const std::string& path) {
  MappedFile file(path);
  if (file.size() < 4) throw input_error(path, "not a llama2.c tokenizer (file too short)");
  int32_t max_len = 0;
  std::memcpy(&max_len, file.data(), 4);
  if (max_len <= 0 || max_len > 4096) {
    throw input_error(
        path, "not a llama2.c tokenizer (max_token_length " + std::to_string(max_len) + ")");
  }
  SpmVocab v;
  uint64_t off = 4;
  while (off < file.size()) {
    const std::string what = "token " + std::to_string(v.pieces.size());
    const uint8_t* rec = file.range(off, 8, what);
    float score;
    int32_t len;
    std::memcpy(&score, rec, 4);
    std::memcpy(&len, rec + 4, 4);
    if (len < 0 || len > max_len) {
      throw input_error(path, "not a llama2.c tokenizer (" + what + " has length " +
                                  std::to_string(len) + ", max_token_length is " +
                                  std::to_string(max_len) + ")");
    }
    const uint8_t* bytes = file.range(off + 8, static_cast<uint64_t>(len), what);
    std::string piece(reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(len));
    // llama2.c's export wrote SentencePiece's "▁" as a plain space; restore it.
    std::string restored;
    for (char c : piece) restored += c == ' ' ? std::string("\xe2\x96\x81") : std::string(1, c);
    v.pieces.push_back(std::move(restored));
    v.scores.push_back(score);
    off += 8 + static_cast<uint64_t>(len);
  }
  if (v.pieces.size() < 3)
    throw input_error(path, "not a llama2.c tokenizer (fewer than 3 tokens)");
  // run.c's convention: 0 = <unk>, 1 = BOS, 2 = EOS (exported as "\n<s>\n" and "\n</s>\n").
  v.pieces[1] = "<s>";
  v.pieces[2] = "</s>";
  v.types.assign(v.pieces.size(), kTokenNormal);
  v.types[0] = kTokenUnknown;
  v.types[1] = v.types[2] = kTokenControl;
  for (std::size_t i = 3; i < v.pieces.size(); ++i) {
    if (parse_byte_piece(v.pieces[i]) >= 0) v.types[i] = kTokenByte;
  }
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.add_bos = true;
  v.add_space_prefix = true;
  v.match_special = false;  // run.c never parses special tokens out of the text
  return std::make_unique<SpmTokenizer>(std::move(v));
}

}  // namespace kvs
