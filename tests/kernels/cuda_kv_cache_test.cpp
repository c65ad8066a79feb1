// Device twins of kernels/kv_cache.cu against direct host loops, for fp16 and bf16 caches:
// kv_append (fp32 rounded to the cache type at per-head slots, other rows untouched) and
// gather_rows. Exact.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_ops.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

template <class T>
class CudaKvCache : public ::testing::Test {};
TYPED_TEST_SUITE(CudaKvCache, test::StoreTypes, test::StoreNames);

TYPED_TEST(CudaKvCache, AppendWritesRoundedRowsAtEachHeadsSlot) {
  KVS_REQUIRE_GPU();
  using T = TypeParam;
  const int n_kv = 3, hd = 64, cap = 40, n = 5;
  const long head_stride = static_cast<long>(cap) * hd + 16;
  const long src_stride = static_cast<long>(n_kv) * hd + 10;  // rows of a fused projection
  const std::vector<int32_t> slot0 = {0, 7, 35};                // [n_kv]
  const auto k_src = test::random_vec(n * src_stride, 80, -3.0f, 3.0f);  // [n, src_stride]
  const auto v_src = test::random_vec(n * src_stride, 81, -3.0f, 3.0f);  // [n, src_stride]
  const std::vector<T> init(n_kv * head_stride, test::from_float<T>(-5.0f));  // [n_kv, head_stride]
  std::vector<T> want_k = init, want_v = init;
  for (int g = 0; g < n_kv; ++g) {
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < hd; ++i) {
        const long dst = g * head_stride + static_cast<long>(slot0[g] + t) * hd + i;
        want_k[dst] = test::from_float<T>(k_src[t * src_stride + g * hd + i]);
        want_v[dst] = test::from_float<T>(v_src[t * src_stride + g * hd + i]);
      }
    }
  }
  auto dk = upload(init), dv = upload(init);
  auto dksrc = upload(k_src), dvsrc = upload(v_src);
  auto dslot = upload(slot0);
  kv_append(dk.get(), dv.get(), head_stride, dksrc.get(), dvsrc.get(), src_stride, n, n_kv, hd,
            dslot.get(), nullptr);
  test::sync("kv_append");
  EXPECT_TRUE(test::same_bits(download(dk), want_k));
  EXPECT_TRUE(test::same_bits(download(dv), want_v));
}

TYPED_TEST(CudaKvCache, GatherRowsCopiesListedRows) {
  KVS_REQUIRE_GPU();
  using T = TypeParam;
  const int hd = 8, n_src = 30;
  const auto src = test::to_store<T>(test::random_vec(n_src * hd, 90, -2.0f, 2.0f));  // [n_src, hd]
  const std::vector<int32_t> idx = {5, 0, 29, 5, 12};                                 // [n]
  const int n = static_cast<int>(idx.size());
  std::vector<T> want((n + 2) * hd, test::from_float<T>(-9.0f));  // [n + 2, hd]: 2 rows untouched
  auto ddst = upload(want);
  for (int i = 0; i < n; ++i) {
    for (int c = 0; c < hd; ++c) want[i * hd + c] = src[idx[i] * hd + c];
  }
  auto dsrc = upload(src);
  auto didx = upload(idx);
  gather_rows(ddst.get(), dsrc.get(), didx.get(), n, hd, nullptr);
  test::sync("gather_rows");
  EXPECT_TRUE(test::same_bits(download(ddst), want));
}

}  // namespace
}  // namespace kvs::cuda
