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

TEST(CudaSwiglu, MatchesCpuTwins) {
  KVS_REQUIRE_GPU();
  const long n = 100003;
  const auto gate = test::random_vec(n, 40, -12.0f, 12.0f);  // [n]
  const auto up = test::random_vec(n, 41, -2.0f, 2.0f);      // [n]
  for (const bool gelu : {false, true}) {
    SCOPED_TRACE(gelu ? "geglu_tanh" : "swiglu");
    std::vector<float> want = gate;
    if (gelu) ops::geglu_tanh(want.data(), up.data(), n);
    else ops::swiglu(want.data(), up.data(), n);
    auto dgate = upload(gate), dup = upload(up);
    if (gelu) geglu_tanh(dgate.get(), dup.get(), n, nullptr);
    else swiglu(dgate.get(), dup.get(), n, nullptr);
    test::sync("gate");
    EXPECT_TRUE(test::all_close(download(dgate), want, 1e-5, 1e-6));
  }
}

}  // namespace
}  // namespace kvs::cuda
