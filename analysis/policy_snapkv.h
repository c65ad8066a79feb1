// SnapKV (POLICIES.md §4): prefill-once, per KV head, top (B - w) prefix positions by the pooled
// observation-window score plus the w window tokens. Its family (PyramidKV, Ada-KV) derives from
// WindowScorePolicy, which holds what the three share: the window settings, their scores and the
// cut of the prompt.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "analysis/json_writer.h"
#include "analysis/policy.h"
#include "analysis/policy_params.h"
#include "analysis/policy_util.h"

namespace kvs {

// The observation-window settings of the SnapKV family: window w, pooling kernel and kind, GQA
// reduction of a KV head's query heads.
struct WindowSettings {
  int window = 32, kernel = 5;
  Pool pool = Pool::Avg;
  GqaReduce gqa = GqaReduce::Mean;
};

// A policy that cuts the prompt once, at prefill end, by the observation-window score, and keeps
// every decode token.
class WindowScorePolicy : public Policy {
 public:
  // Reads window, kernel, pool and gqa from p (`defaults` where absent); throws p.error on a bad one.
  WindowScorePolicy(const PolicySpec& spec, const ModelShape& shape, const ParamReader& p, WindowSettings defaults);
  // With a window of at least the budget (and a prompt longer than it) no prompt position is
  // chosen by score; a window longer than the observation rows the evidence held (64 in
  // KVScope's traces and live runs) was cut to them (known once the prompt was cut).
  std::string caveat(int prompt_len) const override;
  void begin(const PolicyContext& ctx) override {
    ctx_ = ctx;
    rows_held_ = 0;
  }
  void before_attention(int, int, KvSlots&) override {}
  void after_attention(int, int, std::span<const AttentionBlock>, KvSlots&) override {}
  bool needs_decode_rows(int) const override { return false; }

 protected:
  // window, kernel, pool and gqa added to j.
  JsonObject& add_settings(JsonObject& j) const;
  // The window w to cut a P-token prompt with: the setting capped to the recorded window, to P
  // and to B; none when P fits the budget (nothing to cut). Throws InputError("--policy NAME:
  // ...") when the evidence holds no window rows for the prompt. Notes a cap to the recorded
  // window for caveat().
  std::optional<int> cut_window(int P);
  // Pooled window score of KV head (layer, g): [P - w]. Rows are summed (mean_rows = false) or
  // averaged, the group reduced, then pooled (reduce first, then pool).
  std::vector<float> scores(int layer, int kv_head, int w, bool mean_rows) const;
  // Keeps, in (layer, g), the prefix positions (< P - w) at `keep_prefix` indices into the
  // prefix, every position >= P - w, and evicts the other prefix positions.
  static void keep_prefix_and_window(KvSlots& kv, int layer, int kv_head, int P, int w,
                                     std::span<const int> keep_prefix);

  ModelShape shape_;
  PolicyContext ctx_;
  WindowSettings settings_;
  int rows_held_ = 0;  // observation rows the evidence held, where they cut the window (cut_window)
};

std::unique_ptr<Policy> make_snapkv_policy(const PolicySpec& spec, const ModelShape& shape);

}  // namespace kvs
