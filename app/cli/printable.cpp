// printable (printable.h).
#include "app/cli/printable.h"

#include "inference/bpe_merge.h"

namespace kvs {

std::string printable(const std::string& text) {
  std::string out = escape_invalid_utf8(text);
  for (char& c : out)
    if ((unsigned char)c < 0x20 || c == 0x7f) c = '?';
  return out;
}

}  // namespace kvs
