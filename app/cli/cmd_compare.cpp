// `kvscope compare A.h5 B.h5`: two traces of one model and prompt side by side — where each ran
// and in what, whether their tokens agree, and how far their decode attention rows are apart
// (analysis/trace_row_diff.h): the same story recorded on the CPU and on the GPU, in fp16 and in
// fp32, before and after a change. As the app's Compare view shows two traces.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "analysis/json_writer.h"
#include "analysis/trace.h"
#include "analysis/trace_row_diff.h"
#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/printable.h"
#include "inference/errors.h"

namespace kvs {

namespace {

// "stories260K on cpu (fp32), 5-token prompt, 100 steps", then ", rows stored in float16" where
// they are (a difference of up to ~5e-4 that no device made).
std::string describe(const TraceMeta& m) {
  return printable(m.model) + " on " + printable(m.device) +
         (m.device_dtype.empty() ? "" : " (" + printable(m.device_dtype) + ")") + ", " +
         std::to_string(m.prompt_len) + "-token prompt, " + std::to_string(m.n_steps) + " steps" +
         (m.decode_dtype == "float16" ? ", rows stored in float16" : "");
}

}  // namespace

int cmd_compare(const ArgList& argv) {
  Args a(argv, {"--tol"}, {"--json"});
  if (a.positional().size() != 2) throw input_error("compare", "expects two trace paths");
  const std::string &path_a = a.positional()[0], &path_b = a.positional()[1];
  const double tol = a.number("--tol", 1e-3, 0.0, 1.0);
  const TraceReader ra(path_a), rb(path_b);
  const RowDiff d = diff_decode_rows(ra, rb, static_cast<float>(tol));
  if (!d.why_not.empty()) throw input_error(path_b, "not comparable with " + path_a + ": " + d.why_not);
  const long parted = d.tokens_part, n_a = ra.meta().total_len(), n_b = rb.meta().total_len();
  if (a.has("--json")) {
    JsonObject o;
    o.add("a", path_a).add("b", path_b).add("device_a", ra.meta().device).add("device_b", rb.meta().device)
        .add("device_dtype_a", ra.meta().device_dtype).add("device_dtype_b", rb.meta().device_dtype)
        .add("decode_dtype_a", ra.meta().decode_dtype).add("decode_dtype_b", rb.meta().decode_dtype);
    if (parted < 0) o.add_null("tokens_differ_at");
    else o.add("tokens_differ_at", static_cast<int>(parted));
    o.add("steps_compared", d.steps());
    if (d.steps() == 0) {  // nothing compared: no difference to give, not a difference of 0
      o.add_null("largest_difference").add_null("worst");
    } else {
      o.add("largest_difference", static_cast<double>(d.max))
          .add("worst", std::vector<int>{d.worst_step, d.worst_layer, d.worst_head, d.worst_key});
    }
    o.add("rows", static_cast<double>(d.rows)).add("rows_within", static_cast<double>(d.rows_within)).add("tol", tol);
    std::printf("%s\n", o.str().c_str());
    return 0;
  }
  std::printf("A            %s: %s\n", printable(path_a).c_str(), describe(ra.meta()).c_str());
  std::printf("B            %s: %s\n", printable(path_b).c_str(), describe(rb.meta()).c_str());
  if (parted < 0) {
    std::printf("tokens       the same %ld\n", n_a);
  } else if (parted == std::min(n_a, n_b)) {  // one goes on further
    std::printf("tokens       the first %ld the same (of %ld and %ld)\n", parted, n_a, n_b);
  } else {
    std::printf("tokens       first differ at position %ld (of %ld and %ld)\n", parted, n_a, n_b);
  }
  if (d.steps() == 0) {
    std::printf("decode rows  no step with the same tokens up to its query in both\n");
  } else if (d.max == 0.0f) {
    std::printf("decode rows  %d steps compared: identical (%ld rows)\n", d.steps(), d.rows);
  } else {
    std::printf("decode rows  %d steps compared: largest difference %.3g (step %d, layer %d, head %d, key %d); "
                "%.2f%% of %ld rows within %g\n",
                d.steps(), d.max, d.worst_step, d.worst_layer, d.worst_head, d.worst_key,
                100.0 * d.rows_within / d.rows, d.rows, tol);
  }
  return 0;
}

}  // namespace kvs
