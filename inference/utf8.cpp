// UTF-8 encoding and decoding by code point.
#include "inference/utf8.h"

#include <algorithm>

namespace kvs {

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::vector<char32_t> code_points(const std::string& s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (std::size_t k = 0; k < s.size();) {
    const auto c = static_cast<unsigned char>(s[k]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    int used = 1;
    for (; used < n && k + used < s.size() && (static_cast<unsigned char>(s[k + used]) >> 6) == 2; ++used)
      cp = (cp << 6) | (static_cast<unsigned char>(s[k + used]) & 0x3F);
    out.push_back(used == n ? cp : c);  // a broken sequence: its first byte as it is
    k += used == n ? n : 1;
  }
  return out;
}

std::string utf8(const std::vector<char32_t>& cps, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t k = begin; k < std::min(end, cps.size()); ++k) append_utf8(out, cps[k]);
  return out;
}

}  // namespace kvs
