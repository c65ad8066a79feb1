// Round-number axis ticks.
#include "app/gui/axis_ticks.h"

#include <algorithm>
#include <cmath>

namespace kvs {

std::vector<int> axis_ticks(double lo, double hi, int max_ticks) {
  std::vector<int> out;
  if (!(hi >= lo) || !std::isfinite(lo) || !std::isfinite(hi)) return out;
  max_ticks = std::max(max_ticks, 1);
  long step = 1;
  for (long base = 1; base < 1000000000L; base *= 10) {
    bool found = false;
    for (long mult : {1L, 2L, 5L}) {
      step = base * mult;
      if (std::floor((hi - lo) / (double)step) + 1.0 <= (double)max_ticks) {
        found = true;
        break;
      }
    }
    if (found) break;
  }
  const long first = (long)std::ceil(lo / (double)step) * step;
  for (long v = first; (double)v <= hi; v += step) out.push_back((int)v);
  return out;
}

}  // namespace kvs
