// Strided: recent window dense, older bands at strides 2, 4, 8, ...; over budget, the oldest
// entries the stride rule rejects are evicted first, then the oldest.
#include "analysis/policy_strided.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "analysis/policy_params.h"
#include "analysis/policy_positional.h"

namespace kvs {

bool strided_rule_keeps(int64_t age, int64_t pos, int recent) {
  if (age < recent) return true;
  const uint64_t band = std::bit_width((uint64_t)(age / recent + 1)) - 1;  // floor(log2(age/R + 1))
  const int64_t stride = int64_t{1} << std::min<uint64_t>(band, 62);
  return pos % stride == 0;
}

namespace {

class StridedPolicy : public PositionalPolicy {
 public:
  explicit StridedPolicy(const PolicySpec& spec) : PositionalPolicy(spec) {
    ParamReader p(spec, {"recent"});
    recent_ = p.get_int("recent", std::max(1, spec.budget / 4));
    if (recent_ < 1) throw p.error("recent must be >= 1");
    recent_ = std::min(recent_, spec.budget);
    cut_ = p.budget_cut({{"recent", recent_}});
  }
  std::string caveat(int) const override { return cut_; }
  std::string params_json() const override { return JsonObject().add("recent", recent_).str(); }

 private:
  int capacity() const override { return spec_.budget; }
  // Over budget by `over`: evict the oldest entries the stride rule rejects, then (if still
  // over) the oldest remaining ones.
  void keep_mask(std::span<const int32_t> held, std::vector<uint8_t>& keep) const override {
    const int n = static_cast<int>(held.size());
    int over = n - spec_.budget;
    const int32_t newest = held[n - 1];
    std::fill(keep.begin(), keep.end(), 1);
    for (int i = 0; i < n && over > 0; ++i) {
      if (!strided_rule_keeps(newest - held[i], held[i], recent_)) {
        keep[i] = 0;
        --over;
      }
    }
    for (int i = 0; i < n && over > 0; ++i) {
      if (keep[i]) {
        keep[i] = 0;
        --over;
      }
    }
  }
  int recent_ = 1;
  std::string cut_;  // a given recent the budget cut, for caveat()
};

}  // namespace

std::unique_ptr<Policy> make_strided_policy(const PolicySpec& spec, const ModelShape&) {
  return std::make_unique<StridedPolicy>(spec);
}

}  // namespace kvs
