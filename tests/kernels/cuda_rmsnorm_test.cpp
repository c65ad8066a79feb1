// Device twin of kernels/rmsnorm.cu against ops::rmsnorm_rows (and, for add_rmsnorm_rows, an add
// after it). Only the order of the fp32 sum of squares differs: tolerance 1e-5 relative + 1e-6
// absolute.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/rmsnorm.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

constexpr double kRtol = 1e-5, kAtol = 1e-6;

TEST(CudaRmsnorm, MatchesCpuTwinForSeveralWidths) {
  KVS_REQUIRE_GPU();
  for (const int dim : {8, 67, 288, 2048, 5000}) {
    SCOPED_TRACE(dim);
    const int n = 5;
    const float eps = 1e-5f;
    const auto x = test::random_vec(static_cast<std::size_t>(n) * dim, 10 + dim, -2.0f, 2.0f);  // [n, dim]
    const auto w = test::random_vec(dim, 20 + dim, 0.5f, 1.5f);                                  // [dim]
    std::vector<float> want(x.size());
    ops::rmsnorm_rows(want.data(), x.data(), w.data(), n, dim, eps);

    auto dx = upload(x), dw = upload(w);
    DeviceBuffer<float> dout(x.size(), "out");     // [n, dim]
    rmsnorm_rows(dout.get(), dx.get(), dw.get(), n, dim, eps, nullptr);
    test::sync("rmsnorm_rows");
    const std::vector<float> got = download(dout);
    EXPECT_TRUE(test::all_close(got, want, kRtol, kAtol));

    // In place (out aliases x): the same values.
    rmsnorm_rows(dx.get(), dx.get(), dw.get(), n, dim, eps, nullptr);
    test::sync("rmsnorm_rows in place");
    EXPECT_EQ(download(dx), got);
  }
}

// A block's output y added to the residual x through its norm: x + rmsnorm(y) from the CPU ops.
TEST(CudaRmsnorm, AddRmsnormRowsAddsTheNormedRows) {
  KVS_REQUIRE_GPU();
  for (const int dim : {8, 640, 2304}) {
    SCOPED_TRACE(dim);
    const int n = 3;
    const float eps = 1e-6f;
    const auto x = test::random_vec(static_cast<std::size_t>(n) * dim, 30 + dim, -2.0f, 2.0f);  // [n, dim]
    const auto y = test::random_vec(static_cast<std::size_t>(n) * dim, 40 + dim, -9.0f, 9.0f);  // [n, dim]
    const auto w = test::random_vec(dim, 50 + dim, 0.5f, 1.5f);                                  // [dim]
    std::vector<float> want(x.size());
    ops::rmsnorm_rows(want.data(), y.data(), w.data(), n, dim, eps);
    for (std::size_t i = 0; i < want.size(); ++i) want[i] += x[i];

    auto dx = upload(x), dy = upload(y), dw = upload(w);
    add_rmsnorm_rows(dx.get(), dy.get(), dw.get(), n, dim, eps, nullptr);
    test::sync("add_rmsnorm_rows");
    EXPECT_TRUE(test::all_close(download(dx), want, kRtol, kAtol));
  }
}

}  // namespace
}  // namespace kvs::cuda
