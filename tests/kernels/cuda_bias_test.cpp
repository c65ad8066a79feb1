// Device twin of kernels/bias.cu against ops::add_bias: one fp32 addition per element, so exact.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/matmul.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

TEST(CudaBias, MatchesCpuTwinExactly) {
  KVS_REQUIRE_GPU();
  const int n = 7, dim = 300;
  const auto y = test::random_vec(static_cast<std::size_t>(n) * dim, 50, -3.0f, 3.0f);  // [n, dim]
  const auto b = test::random_vec(dim, 51, -1.0f, 1.0f);                                 // [dim]
  std::vector<float> want = y;
  ops::add_bias(want.data(), b.data(), n, dim);
  auto dy = upload(y), db = upload(b);
  add_bias(dy.get(), db.get(), n, dim, nullptr);
  test::sync("add_bias");
  EXPECT_EQ(download(dy), want);
}

}  // namespace
}  // namespace kvs::cuda
