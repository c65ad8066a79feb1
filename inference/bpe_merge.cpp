// Greedy BPE merging with a priority queue (lazy invalidation, as in SentencePiece and
// llama.cpp), UTF-8 helpers, and special-token splitting.
#include "inference/bpe_merge.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <queue>

namespace kvs {

namespace {

std::string merge_key(std::string_view left, std::string_view right) {
  std::string key(left);
  key += '\xff';  // never inside UTF-8 text
  key += right;
  return key;
}

}  // namespace

MergeRanks::MergeRanks(const std::vector<std::pair<std::string, std::string>>& merges) {
  for (std::size_t r = 0; r < merges.size(); ++r) rank_.emplace(merge_key(merges[r].first, merges[r].second), static_cast<int>(r));
}

PairPriority MergeRanks::priority() const {
  return [this](std::string_view a, std::string_view b) -> std::optional<double> {
    auto it = rank_.find(merge_key(a, b));
    if (it == rank_.end()) return std::nullopt;
    return -static_cast<double>(it->second);
  };
}

namespace {

struct Candidate {
  double priority;
  int left;          // index of the left symbol
  std::size_t size;  // combined byte length when pushed (stale entries no longer match)
};

struct CandidateOrder {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.priority != b.priority) return a.priority < b.priority;  // highest first
    return a.left > b.left;                                        // then leftmost
  }
};

}  // namespace

int utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return 2;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return 4;
  return 1;
}

std::vector<std::string> utf8_chars(std::string_view text) {
  std::vector<std::string> out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t len = utf8_length(static_cast<unsigned char>(text[i]));
    bool valid = i + len <= text.size();
    for (std::size_t k = 1; valid && k < len; ++k) {
      valid = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    }
    if (!valid) len = 1;
    out.emplace_back(text.substr(i, len));
    i += len;
  }
  return out;
}

std::vector<std::string> bpe_merge(std::vector<std::string> symbols, const PairPriority& priority) {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return symbols;
  std::vector<int> prev(n), next(n);  // [n] linked list over live symbols; -1 = none
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto consider = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    const int right = next[left];
    if (auto p = priority(symbols[left], symbols[right])) {
      queue.push({*p, left, symbols[left].size() + symbols[right].size()});
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    const int right = next[c.left];
    if (symbols[c.left].empty() || right < 0 ||
        symbols[c.left].size() + symbols[right].size() != c.size) {
      continue;  // stale: one side was merged since this candidate was pushed
    }
    symbols[c.left] += symbols[right];
    symbols[right].clear();
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    consider(prev[c.left]);
    consider(c.left);
  }
  std::vector<std::string> out;
  for (int i = 0; i >= 0; i = next[i]) out.push_back(std::move(symbols[i]));
  return out;
}

std::vector<TextPart> split_special(std::string_view text,
                                    const std::vector<std::pair<std::string, int>>& specials) {
  std::vector<TextPart> parts;
  std::array<bool, 256> first_byte{};  // whether some special starts with this byte
  for (const auto& [s, id] : specials) {
    if (!s.empty()) first_byte[static_cast<unsigned char>(s[0])] = true;
  }
  std::size_t plain_start = 0, i = 0;
  while (i < text.size()) {
    int best = -1;
    std::size_t best_len = 0;
    if (first_byte[static_cast<unsigned char>(text[i])]) {
      for (std::size_t k = 0; k < specials.size(); ++k) {
        const std::string& s = specials[k].first;
        if (s.size() > best_len && text.substr(i, s.size()) == s) {
          best = static_cast<int>(k);
          best_len = s.size();
        }
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    if (i > plain_start) parts.push_back({text.substr(plain_start, i - plain_start), -1});
    parts.push_back({text.substr(i, best_len), specials[best].second});
    i += best_len;
    plain_start = i;
  }
  if (plain_start < text.size()) parts.push_back({text.substr(plain_start), -1});
  return parts;
}

namespace {

// The length of the well-formed UTF-8 character at bytes[i] (Unicode's table 3-7: no overlong
// forms, no surrogates, nothing past U+10FFFF), 0 where none starts there.
std::size_t scalar_length(std::string_view bytes, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(bytes[i + k]); };
  const unsigned char lead = at(0);
  if (lead < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (lead >= 0xc2 && lead <= 0xdf) len = 2;
  else if (lead >= 0xe0 && lead <= 0xef) len = 3, lo = lead == 0xe0 ? 0xa0 : 0x80, hi = lead == 0xed ? 0x9f : 0xbf;
  else if (lead >= 0xf0 && lead <= 0xf4) len = 4, lo = lead == 0xf0 ? 0x90 : 0x80, hi = lead == 0xf4 ? 0x8f : 0xbf;
  if (len == 0 || i + len > bytes.size() || at(1) < lo || at(1) > hi) return 0;
  for (std::size_t k = 2; k < len; ++k)
    if ((at(k) & 0xc0) != 0x80) return 0;
  return len;
}

}  // namespace

std::string escape_invalid_utf8(std::string_view bytes) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size();) {
    if (const std::size_t len = scalar_length(bytes, i)) {
      out.append(bytes.substr(i, len));
      i += len;
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", static_cast<unsigned char>(bytes[i++]));
    out += buf;
  }
  return out;
}

}  // namespace kvs
