// Device twin of kernels/rope.cu against ops::rope_apply with the same RopeTable, both pairings,
// head_dim 8 and 128, rows with padding past their heads. Tolerance 1e-5 relative + 1e-6 absolute
// (fused multiply-adds may round differently); the padding must stay untouched.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/rope.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

void check_rope(int head_dim, ops::RopePairing pairing) {
  const int n = 6, n_heads = 3, n_pos = 512;
  const long row_stride = static_cast<long>(n_heads) * head_dim + 5;  // 5 padding floats a row
  ops::RopeTable table(ops::rope_inv_freq(head_dim, 10000.0f));
  table.reserve(n_pos);
  const int half = head_dim / 2;
  const std::vector<float> cos_tab(table.cos(0), table.cos(0) + static_cast<long>(n_pos) * half);  // [n_pos, half]
  const std::vector<float> sin_tab(table.sin(0), table.sin(0) + static_cast<long>(n_pos) * half);  // [n_pos, half]
  const std::vector<int32_t> pos = {0, 1, 17, 300, 511, 17};  // [n]
  const auto x = test::random_vec(n * row_stride, 30 + head_dim, -2.0f, 2.0f);  // [n, row_stride]

  std::vector<float> want = x;
  for (int r = 0; r < n; ++r) {
    ops::rope_apply(want.data() + r * row_stride, n_heads, head_dim, table.cos(pos[r]),
                    table.sin(pos[r]), pairing);
  }
  auto dx = upload(x), dcos = upload(cos_tab), dsin = upload(sin_tab);
  auto dpos = upload(pos);
  rope_rows(dx.get(), row_stride, n, n_heads, head_dim, dpos.get(), dcos.get(), dsin.get(),
            pairing == ops::RopePairing::Interleaved, nullptr);
  test::sync("rope_rows");
  const std::vector<float> got = download(dx);
  EXPECT_TRUE(test::all_close(got, want, 1e-5, 1e-6));
  for (int r = 0; r < n; ++r) {
    for (long c = static_cast<long>(n_heads) * head_dim; c < row_stride; ++c) {
      EXPECT_EQ(got[r * row_stride + c], x[r * row_stride + c]) << "padding of row " << r;
    }
  }
}

TEST(CudaRope, InterleavedMatchesCpuTwin) {
  KVS_REQUIRE_GPU();
  check_rope(8, ops::RopePairing::Interleaved);
  check_rope(128, ops::RopePairing::Interleaved);
}

TEST(CudaRope, RotateHalfMatchesCpuTwin) {
  KVS_REQUIRE_GPU();
  check_rope(8, ops::RopePairing::RotateHalf);
  check_rope(128, ops::RopePairing::RotateHalf);
}

}  // namespace
}  // namespace kvs::cuda
