// Device twin of kernels/matmul.cu: matvec against ops::matvec on the same weights rounded to the
// storage type (fp16, bf16 and fp32), for row lengths that take the 16-byte path and ones that do not,
// row counts that leave a block part-full, and beta = 1 accumulation; the fused forms against the
// CPU ops run one after another: ops::rmsnorm then ops::matvec then ops::add_bias, and
// ops::rmsnorm then the gate and up products then ops::swiglu. Tolerance 1e-5 relative + 1e-5
// absolute (the two sum in different orders; the device scales the finished sums by the norm),
// 1e-4 after SwiGLU. A chain of products that read each other's outputs, launched overlapped
// (kernels/cuda_launch.cuh) and plainly: the same bits both ways, and the CPU chain's values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"
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

// matvec with the RMSNorm of x (weight g) before it and a bias after it, or matvec_swiglu over
// gate/up stacked [2 rows, cols] (GeGLU where gelu). x is scaled up so that the norm's scale is far
// from 1.
template <class T>
void check_fused(int rows, int cols, bool swiglu, bool bias, uint64_t seed, bool gelu = false) {
  const int w_rows = swiglu ? 2 * rows : rows;
  const auto w = test::random_vec(static_cast<std::size_t>(w_rows) * cols, seed, -0.5f, 0.5f);  // [w_rows, cols]
  const auto x = test::random_vec(cols, seed + 1, -20.0f, 20.0f);                                // [cols]
  const auto g = test::random_vec(cols, seed + 2, 0.5f, 1.5f);                                   // [cols]
  const auto b = test::random_vec(rows, seed + 3, -1.0f, 1.0f);                                  // [rows]
  const float eps = 1e-5f;
  const std::vector<T> w16 = test::to_store<T>(w);
  std::vector<float> xn(cols), want(w_rows);  // [cols], [w_rows]
  ops::rmsnorm(xn.data(), x.data(), g.data(), cols, eps);
  ops::matvec(want.data(), test::to_float(w16).data(), xn.data(), w_rows, cols);
  if (swiglu && gelu) ops::geglu_tanh(want.data(), want.data() + rows, rows);
  else if (swiglu) ops::swiglu(want.data(), want.data() + rows, rows);
  if (bias) ops::add_bias(want.data(), b.data(), 1, rows);
  auto dw = test::upload(w16);
  auto dx = test::upload(x);
  auto dg = test::upload(g);
  auto db = test::upload(b);
  auto dy = test::upload(std::vector<float>(rows, 7.0f));
  if (swiglu) {
    matvec_swiglu(dy.get(), dw.get(), dx.get(), rows, cols, {dg.get(), eps}, nullptr, gelu);
  } else {
    matvec(dy.get(), dw.get(), dx.get(), rows, cols, 0.0f, nullptr, {dg.get(), eps}, bias ? db.get() : nullptr);
  }
  test::sync("fused matvec");
  const std::vector<float> got = test::download(dy);
  // silu(gate) * up multiplies the two sums' rounding by the other's magnitude (both ~10 here).
  const double tol = swiglu ? 1e-4 : 1e-5;
  for (int r = 0; r < rows; ++r) {
    ASSERT_TRUE(test::near(got[r], want[r], tol, tol))
        << "rows " << rows << " cols " << cols << (swiglu ? " swiglu" : "") << " row " << r << ": " << got[r]
        << " vs " << want[r];
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

TYPED_TEST(CudaMatvec, NormBeforeAndBiasAfterMatchTheCpuOps) {
  KVS_REQUIRE_GPU();
  check_fused<TypeParam>(960, 576, false, false, 10);  // SmolLM2's q, k, v stacked
  check_fused<TypeParam>(1003, 2048, false, true, 11);  // a part-full last block, with bias
  check_fused<TypeParam>(48, 172, false, true, 12);    // the scalar path
}

TYPED_TEST(CudaMatvec, GateUpWithSwigluMatchesTheCpuOps) {
  KVS_REQUIRE_GPU();
  check_fused<TypeParam>(1536, 576, true, false, 13);  // SmolLM2's FFN
  check_fused<TypeParam>(77, 2304, true, false, 14);   // four loads in flight per row, then more
  check_fused<TypeParam>(172, 64, true, false, 15);    // stories260K's FFN (one load per lane)
  check_fused<TypeParam>(9, 36, true, false, 16);      // the scalar path
  check_fused<TypeParam>(1536, 640, true, false, 17, true);  // GeGLU (Gemma)
  check_fused<TypeParam>(9, 36, true, false, 18, true);      // GeGLU, the scalar path
}

// A decode step's products read the outputs of the kernels before them and overwrite what those
// read. Step i of the chain: b = W a (i even), a = a + W b (i odd), launched back to back on one
// stream; with the overlap (on a device of compute capability 9.0 or later, and on the
// emulation) a product that read its input before the previous one finished would differ.
TYPED_TEST(CudaMatvec, ChainedProductsSeeEachOthersOutputs) {
  KVS_REQUIRE_GPU();
  using T = TypeParam;
  const int n = 1024, steps = 24;
  const float bound = std::sqrt(3.0f / n);  // W a keeps about a's size
  const std::vector<T> w16 = test::to_store<T>(test::random_vec(static_cast<std::size_t>(n) * n, 30, -bound, bound));
  const std::vector<float> wf = test::to_float(w16);                  // [n, n]
  const std::vector<float> a0 = test::random_vec(n, 31, -1.0f, 1.0f);  // [n]
  std::vector<float> a = a0, b(n), wb(n);                             // [n] each
  for (int i = 0; i < steps; ++i) {
    if (i % 2 == 0) {
      ops::matvec(b.data(), wf.data(), a.data(), n, n);
    } else {
      ops::matvec(wb.data(), wf.data(), b.data(), n, n);
      for (int r = 0; r < n; ++r) a[r] += wb[r];
    }
  }
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  auto dw = test::upload(w16);
  auto run = [&](bool overlap) {
    set_launch_overlap(overlap);
    auto da = test::upload(a0);
    auto db = test::upload(std::vector<float>(n, 0.0f));
    for (int i = 0; i < steps; ++i) {
      if (i % 2 == 0) {
        matvec(db.get(), dw.get(), da.get(), n, n, 0.0f, stream);
      } else {
        matvec(da.get(), dw.get(), db.get(), n, n, 1.0f, stream);
      }
    }
    check(cudaGetLastError(), "chained products");
    check(cudaStreamSynchronize(stream), "chained products");
    return test::download(da);
  };
  const std::vector<float> overlapped = run(true), plain = run(false);
  set_launch_overlap(true);
  cudaStreamDestroy(stream);
  float scale = 0.0f;
  for (float v : a) scale = std::max(scale, std::fabs(v));
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(overlapped[r], plain[r]) << "row " << r;
    ASSERT_TRUE(test::near(overlapped[r], a[r], 1e-4, 1e-5 * scale)) << "row " << r << ": " << overlapped[r] << " vs " << a[r];
  }
}

}  // namespace
}  // namespace kvs::cuda
