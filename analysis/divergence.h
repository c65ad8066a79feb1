// Where two generated sequences (token ids or texts) first differ: for Compare's "first
// divergence" marker.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

namespace kvs {

// Index of the first element where a and b differ; min(size) when one is a prefix of the other;
// -1 when they are equal.
template <class Seq>
long first_divergence(const Seq& a, const Seq& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return (long)i;
  return a.size() == b.size() ? -1 : (long)n;
}

// The same for UTF-8 text, moved back to the start of the character it falls in.
long first_text_divergence(const std::string& a, const std::string& b);

}  // namespace kvs
