// Device twin of kernels/softcap.cu against ops::softcap: tanhf on the device and std::tanh on the
// host may differ by an ulp or two, so 2e-6 relative + 1e-6 absolute; a cap of 0 leaves the values
// untouched, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/softcap.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

TEST(CudaSoftcap, MatchesCpuTwin) {
  KVS_REQUIRE_GPU();
  const long n = 70000;  // several blocks, the last part-filled
  const auto x = test::random_vec(n, 70, -120.0f, 120.0f);  // [n] logits well past the cap
  std::vector<float> want = x;
  ops::softcap(want.data(), n, 30.0f);
  auto dx = upload(x);
  softcap(dx.get(), n, 30.0f, nullptr);
  test::sync("softcap");
  const std::vector<float> got = download(dx);
  EXPECT_TRUE(test::all_close(got, want, 2e-6, 1e-6));
  for (float v : got) ASSERT_LE(std::abs(v), 30.0f);

  auto dy = upload(x);
  softcap(dy.get(), n, 0.0f, nullptr);
  test::sync("softcap 0");
  EXPECT_EQ(download(dy), x);
}

}  // namespace
}  // namespace kvs::cuda
