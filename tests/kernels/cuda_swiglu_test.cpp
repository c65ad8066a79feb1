// Device twin of kernels/swiglu.cu against ops::swiglu. Tolerance 1e-5 relative + 1e-6 absolute
// (the device expf is within 2 ulp); the half copy is exact.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/swiglu.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

TEST(CudaSwiglu, MatchesCpuTwin) {
  KVS_REQUIRE_GPU();
  const long n = 100003;
  const auto gate = test::random_vec(n, 40, -12.0f, 12.0f);  // [n]
  const auto up = test::random_vec(n, 41, -2.0f, 2.0f);      // [n]
  std::vector<float> want = gate;
  ops::swiglu(want.data(), up.data(), n);

  auto dgate = upload(gate), dup = upload(up);
  DeviceBuffer<__half> dgate16(n, "gate16");  // [n]
  swiglu(dgate.get(), dgate16.get(), dup.get(), n, nullptr);
  test::sync("swiglu");
  const std::vector<float> got = download(dgate);
  EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-6));
  EXPECT_TRUE(test::same_halves(download(dgate16), test::to_half(got)));

  auto dgate2 = upload(gate);
  swiglu(dgate2.get(), nullptr, dup.get(), n, nullptr);
  test::sync("swiglu without half copy");
  EXPECT_EQ(download(dgate2), got);
}

}  // namespace
}  // namespace kvs::cuda
