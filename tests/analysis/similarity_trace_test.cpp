// Inter-layer similarity read from an HDF5 trace equals the in-memory computation.
#include <gtest/gtest.h>

#include <cstdio>

#include "analysis/similarity.h"
#include "analysis/trace.h"
#include "decode_trace_fixture.h"

namespace kvs {
namespace {

TEST(SimilarityTraceTest, TraceMatchesInMemoryRows) {
  const std::string path = ::testing::TempDir() + "similarity_trace_test.h5";
  test::DecodeTrace t = test::write_decode_trace(path, 4, 3, 1, 40, 5, 21);
  TraceReader reader(path);
  for (int k : {0, 3, 40, 100}) {
    SimilarityResult a = trace_similarity(reader, k);
    SimilarityResult b = similarity_from_rows(t.rows, t.lse, t.n_steps, 4, 3, t.total_len(), t.prompt_len, k);
    EXPECT_EQ(a.k, k == 0 ? default_similarity_k(40) : std::min(k, 40));
    EXPECT_EQ(a.n_steps, 5);
    EXPECT_EQ(a.per_step, b.per_step);
    EXPECT_EQ(a.mean, b.mean);
    for (float v : a.mean) {
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 1.0f + 1e-5f);
    }
  }
  // K = P covers everything.
  for (float v : trace_similarity(reader, 40).mean) EXPECT_NEAR(v, 1.0f, 1e-5f);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kvs
