// Device twin of kernels/matmul.cu: matvec against ops::matvec on the same weights rounded to the
// storage type (fp16 and bf16), for row lengths that take the 16-byte path and ones that do not,
// row counts that leave a block part-full, and beta = 1 accumulation. Tolerance 1e-5 relative +
// 1e-5 absolute (the two sum in different orders).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/matmul.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

template <class T>
void check_matvec(int rows, int cols, float beta, uint64_t seed) {
  const auto w = test::random_vec(static_cast<std::size_t>(rows) * cols, seed, -0.5f, 0.5f);  // [rows, cols]
  const auto x = test::random_vec(cols, seed + 1, -2.0f, 2.0f);                                // [cols]
  const auto y0 = test::random_vec(rows, seed + 2, -1.0f, 1.0f);                               // [rows]
  const std::vector<T> w16 = test::to_store<T>(w);
  std::vector<float> want(rows);  // [rows]
  ops::matvec(want.data(), test::to_float(w16).data(), x.data(), rows, cols);
  for (int r = 0; r < rows; ++r) want[r] += beta * y0[r];
  auto dw = test::upload(w16);
  auto dx = test::upload(x);
  auto dy = test::upload(y0);
  matvec(dy.get(), dw.get(), dx.get(), rows, cols, beta, nullptr);
  test::sync("matvec");
  const std::vector<float> got = test::download(dy);
  for (int r = 0; r < rows; ++r) {
    ASSERT_TRUE(test::near(got[r], want[r], 1e-5, 1e-5))
        << "rows " << rows << " cols " << cols << " row " << r << ": " << got[r] << " vs " << want[r];
  }
}

template <class T>
class CudaMatvec : public ::testing::Test {};
TYPED_TEST_SUITE(CudaMatvec, test::StoreTypes, test::StoreNames);

TYPED_TEST(CudaMatvec, SixteenByteRowsMatchTheCpuTwin) {
  KVS_REQUIRE_GPU();
  check_matvec<TypeParam>(576, 576, 0.0f, 1);   // SmolLM2's projections
  check_matvec<TypeParam>(1003, 2048, 0.0f, 2);  // a part-full last block
  check_matvec<TypeParam>(64, 8, 0.0f, 3);       // one 16-byte load per row
  check_matvec<TypeParam>(96, 2304, 0.0f, 8);    // eight loads in flight, then one more per lane
}

TYPED_TEST(CudaMatvec, OtherRowLengthsTakeTheScalarPath) {
  KVS_REQUIRE_GPU();
  check_matvec<TypeParam>(64, 172, 0.0f, 4);  // stories260K's down projection
  check_matvec<TypeParam>(37, 3, 0.0f, 5);
}

TYPED_TEST(CudaMatvec, BetaOneAccumulatesIntoY) {
  KVS_REQUIRE_GPU();
  check_matvec<TypeParam>(768, 768, 1.0f, 6);
  check_matvec<TypeParam>(64, 172, 1.0f, 7);
}

}  // namespace
}  // namespace kvs::cuda
