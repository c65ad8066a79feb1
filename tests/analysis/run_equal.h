// Test support: two runs of a trace (RunData) alike field by field, metrics matched by name and
// compared bit for bit (a free run's uncompared steps are NaN, which == would call unequal).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "analysis/trace.h"

namespace kvs::testing {

// with_bulk: `got` was read with its kept sets, attention rows and lse; else it must hold no kept sets.
inline void expect_same_run(const RunData& got, const RunData& want, bool with_bulk) {
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.policy, want.policy);
  EXPECT_EQ(got.params_json, want.params_json);
  EXPECT_EQ(got.budget, want.budget);
  EXPECT_EQ(got.eviction, want.eviction);
  EXPECT_EQ(got.mode, want.mode);
  EXPECT_EQ(got.device, want.device);
  EXPECT_EQ(got.device_dtype, want.device_dtype);
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.tokens, want.tokens);
  ASSERT_EQ(got.metrics.size(), want.metrics.size());
  for (const NamedArray& w : want.metrics) {
    const auto g = std::find_if(got.metrics.begin(), got.metrics.end(), [&](const NamedArray& a) { return a.name == w.name; });
    if (g == got.metrics.end()) {
      ADD_FAILURE() << "metric " << w.name << " missing";
      continue;
    }
    EXPECT_EQ(g->dims, w.dims) << w.name;
    EXPECT_TRUE(g->data.size() == w.data.size() &&
                std::memcmp(g->data.data(), w.data.data(), w.data.size() * sizeof(float)) == 0)
        << w.name;
  }
  auto got_scalars = got.scalars, want_scalars = want.scalars;
  std::sort(got_scalars.begin(), got_scalars.end());
  std::sort(want_scalars.begin(), want_scalars.end());
  EXPECT_EQ(got_scalars, want_scalars);
  if (with_bulk) {
    EXPECT_EQ(got.kept, want.kept);
    EXPECT_EQ(got.attention, want.attention);
    EXPECT_EQ(got.lse, want.lse);
  } else {
    EXPECT_TRUE(got.kept.empty());
  }
}

}  // namespace kvs::testing
