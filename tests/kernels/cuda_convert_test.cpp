// Device twins of kernels/convert.cu: to_half and split_half against the host's
// round-to-nearest-even conversion (kvs::fp32_to_fp16), embed_rows against kvs::fp16_to_fp32 of
// the table rows. All exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/quant.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

TEST(CudaConvert, ToHalfRoundsLikeTheHost) {
  KVS_REQUIRE_GPU();
  auto x = test::random_vec(100003, 1, -3.0f, 3.0f);  // [n]
  const float inf = std::numeric_limits<float>::infinity();
  // zeros, half subnormals, ties to even, the largest half, overflow to inf, infinities
  const std::vector<float> special = {0.0f,    -0.0f,      1e-7f,   -6e-8f,  3e-8f,   1.00048828125f,
                                      1.00146484375f, 65504.0f, 65519.0f, 65520.0f, 1e6f, -1e6f,
                                      inf,     -inf,       2049.0f, 2051.0f};
  for (std::size_t i = 0; i < special.size(); ++i) x[i * 997] = special[i];
  auto dx = upload(x);
  DeviceBuffer<__half> dout(x.size(), "out");  // [n]
  to_half(dout.get(), dx.get(), static_cast<long>(x.size()), nullptr);
  test::sync("to_half");
  EXPECT_TRUE(test::same_halves(download(dout), test::to_half(x)));
}

TEST(CudaConvert, SplitHalfIsTheRoundedValueAndItsRoundedRemainder) {
  KVS_REQUIRE_GPU();
  auto x = test::random_vec(40009, 3, -50.0f, 50.0f);  // [n]
  x[0] = 0.0f;
  x[1] = 1e-6f;                 // half subnormal range
  x[2] = 1.0f + 1.0f / 4096.0f;  // a tie of the high half
  auto dx = upload(x);
  DeviceBuffer<__half> dhi(x.size(), "hi"), dlo(x.size(), "lo");  // [n] each
  split_half(dhi.get(), dlo.get(), dx.get(), static_cast<long>(x.size()), nullptr);
  test::sync("split_half");
  const std::vector<__half> hi = download(dhi), lo = download(dlo);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const uint16_t h = fp32_to_fp16(x[i]);
    ASSERT_EQ(test::half_bits(hi[i]), h) << i;
    ASSERT_EQ(test::half_bits(lo[i]), fp32_to_fp16(x[i] - fp16_to_fp32(h))) << i;
    // Away from the subnormals the pair carries x to about 22 bits.
    if (std::fabs(x[i]) > 1e-2f) {
      const double sum = double(fp16_to_fp32(h)) + fp16_to_fp32(test::half_bits(lo[i]));
      ASSERT_LE(std::fabs(sum - x[i]), std::ldexp(std::fabs(x[i]), -21)) << i;
    }
  }
}

TEST(CudaConvert, EmbedRowsMatchesFp16ToFp32) {
  KVS_REQUIRE_GPU();
  const int vocab = 50, dim = 67;
  auto t = test::random_vec(static_cast<std::size_t>(vocab) * dim, 2, -4.0f, 4.0f);
  t[3] = 1e-6f;  // a subnormal half
  t[5] = -0.0f;
  const std::vector<__half> table = test::to_half(t);                  // [vocab, dim]
  const std::vector<int32_t> tokens = {0, 49, 7, 7, 3, 12, 0, 25, 48};  // [n]
  const int n = static_cast<int>(tokens.size());
  auto dtable = upload(table);
  auto dtokens = upload(tokens);
  DeviceBuffer<float> dx(static_cast<std::size_t>(n) * dim, "x");  // [n, dim]
  embed_rows(dx.get(), dtable.get(), dtokens.get(), n, dim, nullptr);
  test::sync("embed_rows");
  const std::vector<float> x = download(dx);
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < dim; ++c) {
      const float want = fp16_to_fp32(test::half_bits(table[static_cast<long>(tokens[i]) * dim + c]));
      const float got = x[static_cast<long>(i) * dim + c];
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << i << "," << c;
      ASSERT_EQ(got, want) << "row " << i << " col " << c;
    }
  }
}

}  // namespace
}  // namespace kvs::cuda
