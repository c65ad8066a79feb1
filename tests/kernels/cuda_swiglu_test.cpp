// Device twins of kernels/swiglu.cu against ops::swiglu and ops::geglu_tanh. Tolerance 1e-5 relative + 1e-6 absolute
// (the device expf is within 2 ulp).
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
  swiglu(dgate.get(), dup.get(), n, nullptr);
  test::sync("swiglu");
  EXPECT_TRUE(test::all_close(download(dgate), want, 1e-5, 1e-6));
}

TEST(CudaSwiglu, GegluMatchesCpuTwin) {
  KVS_REQUIRE_GPU();
  const long n = 100003;
  const auto gate = test::random_vec(n, 42, -12.0f, 12.0f);  // [n]
  const auto up = test::random_vec(n, 43, -2.0f, 2.0f);      // [n]
  std::vector<float> want = gate;
  ops::geglu_tanh(want.data(), up.data(), n);

  auto dgate = upload(gate), dup = upload(up);
  geglu_tanh(dgate.get(), dup.get(), n, nullptr);
  test::sync("geglu_tanh");
  EXPECT_TRUE(test::all_close(download(dgate), want, 1e-5, 1e-6));
}

}  // namespace
}  // namespace kvs::cuda
