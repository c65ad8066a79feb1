// Text read from a file (a trace's model name, a path) made safe to print to a terminal.
#pragma once
#include <string>

namespace kvs {

// Control characters (a hostile trace could carry escape sequences) become '?', bytes that are
// not UTF-8 "\xNN".
std::string printable(const std::string& text);

}  // namespace kvs
