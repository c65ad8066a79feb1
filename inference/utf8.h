// UTF-8 text as code points and back, for code that indexes or rebuilds text by character (JSON
// escapes, the byte-level BPE alphabet, the Jinja subset's Python strings).
#pragma once
#include <string>
#include <vector>

namespace kvs {

// Appends code point c (below U+110000) as UTF-8.
void append_utf8(std::string& out, char32_t c);

// The code points of `text`; a byte that starts no valid sequence stands for itself.
std::vector<char32_t> code_points(const std::string& text);

// cps[begin, end) as UTF-8.
std::string utf8(const std::vector<char32_t>& cps, std::size_t begin = 0, std::size_t end = std::string::npos);

}  // namespace kvs
