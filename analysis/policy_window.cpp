// Local window: after the prompt and after every decode attention, keep the last B entries.
#include "analysis/policy_window.h"

#include <vector>

#include "analysis/policy_params.h"
#include "analysis/policy_positional.h"

namespace kvs {
namespace {

class WindowPolicy : public PositionalPolicy {
 public:
  explicit WindowPolicy(const PolicySpec& spec) : PositionalPolicy(spec) { ParamReader(spec, {}); }
  std::string params_json() const override { return "{}"; }

 private:
  int capacity() const override { return spec_.budget; }
  void keep_mask(std::span<const int32_t> held, std::vector<uint8_t>& keep) const override {
    const int n = static_cast<int>(held.size());
    for (int i = n - spec_.budget; i < n; ++i) keep[i] = 1;
  }
};

}  // namespace

std::unique_ptr<Policy> make_window_policy(const PolicySpec& spec, const ModelShape&) {
  return std::make_unique<WindowPolicy>(spec);
}

}  // namespace kvs
