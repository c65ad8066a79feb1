// PassProgress reports and their one-line description (pass_progress.h).
#include "app/cli/pass_progress.h"

#include <algorithm>

namespace kvs {

RunProgress pass_progress(const PassReport& report, const std::string& pass, int index, int count,
                          const std::function<bool()>& cancelled) {
  RunProgress out;
  out.cancelled = cancelled;
  if (!report) return out;
  out.on_prefill_layer = [report, pass, index, count](int layer, int n_layers) {
    report({pass, index, count, false, layer, n_layers});
  };
  out.on_step = [report, pass, index, count](int step, int total) {
    report({pass, index, count, true, step + 1, total});
  };
  return out;
}

std::string describe(const PassProgress& p) {
  const int shown = p.decode ? p.done : std::min(p.done + 1, p.total);  // the layer running, from 1
  return "pass " + std::to_string(p.index + 1) + " of " + std::to_string(p.count) + ", " + p.pass + ": " +
         (p.decode ? "step " : "prefill, layer ") + std::to_string(shown) + " of " + std::to_string(p.total);
}

}  // namespace kvs
