// Byte-level BPE: GPT-2 byte<->unicode mapping, rank-ordered merges via the shared bpe_merge core.
#include "inference/tokenizer_bpe.h"

#include <array>

#include "inference/bpe_merge.h"
#include "inference/errors.h"
#include "inference/tokenizer_spm.h"
#include "inference/utf8.h"

namespace kvs {
namespace {

// Code point of a 1-3 byte UTF-8 character (the byte-level alphabet is below U+0800).
uint32_t decode_utf8(std::string_view s) {
  const auto b = [&](std::size_t i) {
    return static_cast<uint32_t>(static_cast<unsigned char>(s[i]));
  };
  if (s.size() == 1) return b(0);
  if (s.size() == 2) return ((b(0) & 0x1f) << 6) | (b(1) & 0x3f);
  if (s.size() == 3) return ((b(0) & 0x0f) << 12) | ((b(1) & 0x3f) << 6) | (b(2) & 0x3f);
  return 0xffffffffu;
}

struct ByteTable {
  std::array<std::string, 256> to_unicode;
  std::array<uint32_t, 256> codepoint;
  std::array<int, 256 + 68> byte_of;  // code point -> byte, -1 when unused (68 bytes move up)
  ByteTable() {
    byte_of.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      codepoint[b] = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++);
      append_utf8(to_unicode[b], codepoint[b]);
      byte_of[codepoint[b]] = b;
    }
  }
};

const ByteTable& table() {
  static const ByteTable t;
  return t;
}

}  // namespace

const std::string& byte_to_unicode(unsigned char b) { return table().to_unicode[b]; }

int unicode_to_byte(uint32_t cp) { return cp < table().byte_of.size() ? table().byte_of[cp] : -1; }

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(BpeVocab vocab)
    : vocab_(std::move(vocab)), pre_(vocab_.pre_patterns, vocab_.source) {
  const int n = static_cast<int>(vocab_.tokens.size());
  if (!vocab_.types.empty() && static_cast<int>(vocab_.types.size()) != n) {
    throw input_error(vocab_.source, "token type list has " + std::to_string(vocab_.types.size()) +
                                         " entries for " + std::to_string(n) + " tokens");
  }
  for (int i = 0; i < n; ++i) token_to_id_.emplace(vocab_.tokens[i], i);
  is_special_.assign(n, false);
  for (const auto& [text, id] : vocab_.specials) {
    if (id >= 0 && id < n) is_special_[id] = true;
  }
  merge_ranks_ = MergeRanks(vocab_.merges);
}

int ByteLevelBpeTokenizer::token_id(const std::string& token) const {
  auto it = token_to_id_.find(token);
  return it == token_to_id_.end() ? -1 : it->second;
}

void ByteLevelBpeTokenizer::encode_word(std::string_view word, std::vector<int>& out) const {
  std::string mapped;  // the word's bytes in the byte-level alphabet
  for (unsigned char c : word) mapped += byte_to_unicode(c);
  if (vocab_.ignore_merges) {
    if (const int id = token_id(mapped); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  for (const std::string& sym : bpe_merge(utf8_chars(mapped), merge_ranks_.priority())) {
    if (const int id = token_id(sym); id >= 0) {
      out.push_back(id);
      continue;
    }
    // A merge result missing from the vocabulary: its bytes one by one. A byte whose symbol the
    // vocabulary lacks is left out, as llama.cpp and HF tokenizers leave it out: StarCoder's has
    // none for 0xF1 (which leads U+40000-U+7FFFF), SmolLM2's none for 0xF1, 0xF2 and six control
    // bytes (0x04, 0x06, 0x13, 0x14, 0x16, 0x1D).
    for (const std::string& ch : utf8_chars(sym)) {
      if (const int id = token_id(ch); id >= 0) out.push_back(id);
    }
  }
}

std::vector<int> ByteLevelBpeTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> out;
  if (add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  for (const TextPart& part : split_special(text, vocab_.specials)) {
    if (part.special_id >= 0) {
      out.push_back(part.special_id);
      continue;
    }
    std::string prefixed;
    const std::string normalized = unicode_normalize(part.text, vocab_.normalization);
    std::string_view plain = normalized;
    if (vocab_.add_prefix_space && plain[0] != ' ') {  // per text segment, as Hugging Face does
      prefixed.reserve(plain.size() + 1);
      prefixed += ' ';
      prefixed += plain;
      plain = prefixed;
    }
    for (std::string_view word : pre_.split(plain)) encode_word(word, out);
  }
  return out;
}

std::string ByteLevelBpeTokenizer::token_bytes(int token) const {
  const std::string& s = vocab_.tokens[token];
  if (is_special_[token]) return s;
  std::string bytes;
  for (const std::string& ch : utf8_chars(s)) {
    const int b = unicode_to_byte(decode_utf8(ch));
    if (b >= 0) {
      bytes += static_cast<char>(b);
    } else {
      bytes += ch;  // not in the byte alphabet (e.g. a user-defined token): keep as written
    }
  }
  return bytes;
}

std::string ByteLevelBpeTokenizer::decode_piece(int prev, int token) const {
  if (token < 0 || token >= vocab_size()) return "";
  if (!vocab_.types.empty() && vocab_.types[token] == kTokenControl) return "";
  return token_bytes(token);
}

std::string ByteLevelBpeTokenizer::token_text(int token) const {
  if (token < 0 || token >= vocab_size()) return "";
  return token_text_of_bytes(token_bytes(token));
}

}  // namespace kvs
