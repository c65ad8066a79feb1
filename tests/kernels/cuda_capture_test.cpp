// Device twins of kernels/capture.cu against the CPU twins of kernels/capture.h. The same fp32
// additions in the same order (columns summed in row order, pooled cells key by key over column sums): exact.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "kernels/capture.h"
#include "kernels/cuda_ops.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

TEST(CudaCapture, ColsumAddMatchesCpuTwinExactly) {
  KVS_REQUIRE_GPU();
  const int n_heads = 3, q0 = 290, nq = 40, n_keys = q0 + nq;  // several 256-column blocks
  const long ld = n_keys + 5, col_stride = 400;
  const auto probs = test::random_vec(n_heads * nq * ld, 60, 0.0f, 0.1f);  // [n_heads, nq, ld]
  const auto colsum0 = test::random_vec(n_heads * col_stride, 61, 0.0f, 5.0f);  // [n_heads, col_stride]
  std::vector<float> want = colsum0;
  ops::colsum_add(want.data(), col_stride, probs.data(), n_heads, nq, n_keys, ld);
  auto dprobs = upload(probs), dcolsum = upload(colsum0);
  colsum_add(dcolsum.get(), col_stride, dprobs.get(), n_heads, nq, n_keys, ld, nullptr);
  test::sync("colsum_add");
  EXPECT_EQ(download(dcolsum), want);  // columns n_keys.. untouched on both sides
}

TEST(CudaCapture, WindowRowsMatchesCpuTwinExactly) {
  KVS_REQUIRE_GPU();
  const int n_heads = 2, P = 300, W = 40;
  const auto window0 = test::random_vec(static_cast<std::size_t>(n_heads) * W * P, 70, -1.0f, 1.0f);  // [n_heads, W, P]
  const auto wlse0 = test::random_vec(static_cast<std::size_t>(n_heads) * W, 71, -1.0f, 1.0f);        // [n_heads, W]
  std::vector<float> want = window0, want_lse = wlse0;
  auto dwindow = upload(window0), dwlse = upload(wlse0);
  // Blocks before the window, straddling its start, inside it, and ending at P.
  const int blocks[][2] = {{0, 100}, {100, 170}, {270, 20}, {290, 10}};  // {q0, nq}
  uint64_t seed = 72;
  for (const auto& b : blocks) {
    const int q0 = b[0], nq = b[1], n_keys = q0 + nq;
    const long ld = n_keys + 3;
    const auto probs = test::random_vec(n_heads * nq * ld, seed++, 0.0f, 1.0f);  // [n_heads, nq, ld]
    const auto lse = test::random_vec(static_cast<std::size_t>(n_heads) * nq, seed++, 0.0f, 9.0f);  // [n_heads, nq]
    ops::window_rows(want.data(), want_lse.data(), probs.data(), lse.data(), n_heads, nq, n_keys,
                     ld, q0, P, W);
    auto dprobs = upload(probs), dlse = upload(lse);
    window_rows(dwindow.get(), dwlse.get(), dprobs.get(), dlse.get(), n_heads, nq, n_keys, ld, q0,
                P, W, nullptr);
    test::sync("window_rows");
    EXPECT_EQ(download(dwindow), want) << "after block q0=" << q0;
    EXPECT_EQ(download(dwlse), want_lse) << "after block q0=" << q0;
  }
}

TEST(CudaCapture, PoolAddMatchesCpuTwinExactly) {
  KVS_REQUIRE_GPU();
  // 300 queries pooled by 7 (43 pool rows, the last of 6 queries) and by 1 (300 pool columns:
  // two thread blocks per row); 2,600 pooled by 300 (three cells a thread block, 900 keys) and by
  // 1,100 (a cell's keys staged in three rounds, the last cell of 400); in prefill blocks that
  // straddle pool rows.
  struct Case {
    int pool, P;
    std::vector<std::pair<int, int>> blocks;  // {q0, nq}
  };
  const Case cases[] = {{7, 300, {{0, 100}, {100, 170}, {270, 30}}},
                        {1, 300, {{0, 100}, {100, 170}, {270, 30}}},
                        {300, 2600, {{0, 900}, {900, 1300}, {2200, 400}}},
                        {1100, 2600, {{0, 900}, {900, 1300}, {2200, 400}}}};
  for (const Case& c : cases) {
    const int n_heads = 2, P = c.P, pool = c.pool, nb = (P + pool - 1) / pool;
    const auto pooled0 = test::random_vec(static_cast<std::size_t>(n_heads) * nb * nb, 80, 0.0f, 1.0f);  // [n_heads, nb, nb]
    std::vector<float> want = pooled0;
    auto dpooled = upload(pooled0);
    uint64_t seed = 81;
    for (const auto& [q0, nq] : c.blocks) {
      const int n_keys = q0 + nq;
      const long ld = n_keys + 3;
      const auto probs = test::random_vec(n_heads * nq * ld, seed++, 0.0f, 0.01f);  // [n_heads, nq, ld]
      ops::pool_add(want.data(), probs.data(), n_heads, nq, n_keys, ld, q0, P, pool);
      auto dprobs = upload(probs);
      pool_add(dpooled.get(), dprobs.get(), n_heads, nq, n_keys, ld, q0, P, pool, nullptr);
      test::sync("pool_add");
      EXPECT_EQ(download(dpooled), want) << "pool " << pool << " after block q0=" << q0;
    }
  }
}

}  // namespace
}  // namespace kvs::cuda
