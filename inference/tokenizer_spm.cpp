// SentencePiece-style BPE encode/decode, matching llama2.c run.c (and llama.cpp's SPM session):
// code points looked up in the vocabulary, greedy merges of the best-scoring pair, byte fallback.
#include "inference/tokenizer_spm.h"

#include <cstdio>

#include "inference/bpe_merge.h"

namespace kvs {
namespace {

// `text` without leading or trailing spaces, each run of spaces inside it one space.
std::string collapse_spaces(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ' ') {
      out += text[i];
    } else if (!out.empty() && out.back() != ' ') {
      out += ' ';
    }
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}


const std::string kSpace = "\xe2\x96\x81";  // U+2581 "▁"

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (s.substr(i, from.size()) == from) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

}  // namespace

int parse_byte_piece(const std::string& piece) {
  unsigned int v = 0;
  char tail = 0;
  if (piece.size() == 6 && std::sscanf(piece.c_str(), "<0x%2X%c", &v, &tail) == 2 && tail == '>') {
    return static_cast<int>(v);
  }
  return -1;
}

SpmTokenizer::SpmTokenizer(SpmVocab vocab) : vocab_(std::move(vocab)) {
  const int n = static_cast<int>(vocab_.pieces.size());
  vocab_.scores.resize(n, 0.0f);
  if (vocab_.types.size() != vocab_.pieces.size()) {
    vocab_.types.resize(n);
    for (int i = 0; i < n; ++i) {
      vocab_.types[i] = parse_byte_piece(vocab_.pieces[i]) >= 0 ? kTokenByte : kTokenNormal;
    }
  }
  for (int& b : byte_ids_) b = -1;
  for (int i = 0; i < n; ++i) {
    const std::string& p = vocab_.pieces[i];
    piece_to_id_.emplace(p, i);  // first occurrence wins
    const int t = vocab_.types[i];
    if (t == kTokenByte) {
      const int b = parse_byte_piece(p);
      if (b >= 0 && byte_ids_[b] < 0) byte_ids_[b] = i;
    }
    const bool matched = t == kTokenUserDefined || (t == kTokenControl && vocab_.match_control);
    if (vocab_.match_special && matched && !p.empty()) {
      specials_.emplace_back(p, i);
    }
  }
  merge_ranks_ = MergeRanks(vocab_.merges);
}

int SpmTokenizer::byte_token(unsigned char byte) const {
  return byte_ids_[byte] >= 0 ? byte_ids_[byte] : vocab_.unk_id;
}

void SpmTokenizer::encode_fragment(std::string_view text, bool prefix,
                                   std::vector<int>& out) const {
  std::string plain = unicode_normalize(text, vocab_.normalization);
  if (vocab_.collapse_whitespace) {
    plain = collapse_spaces(plain);
    if (plain.empty()) return;
  }
  std::string normalized = (prefix ? kSpace : std::string()) + replace_all(plain, " ", kSpace);
  // sentencepiece trims the escaped text's end: a "▁" typed at the end goes too.
  while (vocab_.collapse_whitespace && normalized.ends_with(kSpace))
    normalized.resize(normalized.size() - kSpace.size());
  if (normalized.empty()) return;
  PairPriority priority;
  if (vocab_.merges.empty() && !vocab_.merges_only) {
    priority = [this](std::string_view a, std::string_view b) -> std::optional<double> {
      std::string joined(a);
      joined += b;
      auto it = piece_to_id_.find(joined);
      if (it == piece_to_id_.end()) return std::nullopt;
      return vocab_.scores[it->second];
    };
  } else {
    priority = merge_ranks_.priority();
  }
  // Words: the whole text, or pieces that each start at a "▁" (Metaspace split).
  std::vector<std::string_view> words;
  const std::string_view all(normalized);
  std::size_t start = 0;
  for (std::size_t at = all.find(kSpace, 1); vocab_.split_words && at != std::string_view::npos;
       at = all.find(kSpace, at + 1)) {
    words.push_back(all.substr(start, at - start));
    start = at;
  }
  if (start < all.size()) words.push_back(all.substr(start));
  for (std::string_view word : words) {
    for (const std::string& sym : bpe_merge(utf8_chars(word), priority)) {
      auto it = piece_to_id_.find(sym);
      if (it != piece_to_id_.end() && vocab_.types[it->second] != kTokenByte) {
        out.push_back(it->second);
      } else {
        for (unsigned char c : sym) out.push_back(byte_token(c));  // byte fallback
      }
    }
  }
}

std::vector<int> SpmTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> out;
  if (add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);
  bool first = true, prev_special = false;
  for (const TextPart& part : split_special(text, specials_)) {
    if (part.special_id >= 0) {
      out.push_back(part.special_id);
      prev_special = true;
      first = false;
    } else {
      const bool prefix = first || (prev_special && vocab_.prefix_after_special);
      encode_fragment(part.text, vocab_.add_space_prefix && prefix, out);
      prev_special = first = false;
    }
  }
  return out;
}

std::string SpmTokenizer::piece_bytes(int token) const {
  const std::string& piece = vocab_.pieces[token];
  if (vocab_.types[token] == kTokenByte) {
    const int b = parse_byte_piece(piece);
    return b >= 0 ? std::string(1, static_cast<char>(b)) : piece;
  }
  return replace_all(piece, kSpace, " ");
}

std::string SpmTokenizer::decode_piece(int prev, int token) const {
  if (token < 0 || token >= vocab_size()) return "";
  const int type = vocab_.types[token];
  if (type == kTokenControl) return "";
  std::string text = piece_bytes(token);
  if (type != kTokenByte && (prev < 0 || prev == vocab_.bos_id) && !text.empty() && text[0] == ' ')
    text.erase(0, 1);
  return text;
}

std::string SpmTokenizer::token_text(int token) const {
  if (token < 0 || token >= vocab_size()) return "";
  const int type = vocab_.types[token];
  if (type == kTokenControl || type == kTokenUnknown) return vocab_.pieces[token];
  return token_text_of_bytes(piece_bytes(token));
}

}  // namespace kvs
