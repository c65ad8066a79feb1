// First divergence of two UTF-8 texts at a character boundary.
#include "analysis/divergence.h"

namespace kvs {

long first_text_divergence(const std::string& a, const std::string& b) {
  long i = first_divergence(a, b);
  while (i > 0 && ((unsigned char)a[(size_t)i] & 0xC0) == 0x80) --i;  // continuation byte
  return i;
}

}  // namespace kvs
