// Device twins of kernels/kv_cache.cu against direct host loops, for fp16, bf16 and fp32 caches:
// kv_append (fp32 rounded to the cache type at each head's listed rows, other rows untouched) and
// gather_rows, exact; rope_append (decode's RoPE of q and k, then the append of k and v) against
// ops::rope_apply and the same rounding, 1e-6 (the device may fuse the rotation's multiply-adds),
// with Qwen3's QK-norm first against ops::rmsnorm_rows, 1e-5.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

template <class T>
class CudaKvCache : public ::testing::Test {};
TYPED_TEST_SUITE(CudaKvCache, test::StoreTypes, test::StoreNames);

// Row t of KV head g to rows[g * rows_stride + t]: each head's own list (rows an eviction freed,
// out of order), or one list shared by every head (rows_stride 0, as prefill's 0..n-1).
template <class T>
void check_append(const std::vector<int32_t>& rows, long rows_stride, uint64_t seed) {
  const int n_kv = 3, hd = 64, cap = 40, n = 5;
  const long head_stride = static_cast<long>(cap) * hd + 16;
  const long src_stride = static_cast<long>(n_kv) * hd + 10;  // rows of a fused projection
  const auto k_src = test::random_vec(n * src_stride, seed, -3.0f, 3.0f);      // [n, src_stride]
  const auto v_src = test::random_vec(n * src_stride, seed + 1, -3.0f, 3.0f);  // [n, src_stride]
  const std::vector<T> init(n_kv * head_stride, test::from_float<T>(-5.0f));  // [n_kv, head_stride]
  std::vector<T> want_k = init, want_v = init;
  for (int g = 0; g < n_kv; ++g) {
    for (int t = 0; t < n; ++t) {
      for (int i = 0; i < hd; ++i) {
        const long dst = g * head_stride + static_cast<long>(rows[g * rows_stride + t]) * hd + i;
        want_k[dst] = test::from_float<T>(k_src[t * src_stride + g * hd + i]);
        want_v[dst] = test::from_float<T>(v_src[t * src_stride + g * hd + i]);
      }
    }
  }
  auto dk = upload(init), dv = upload(init);
  auto dksrc = upload(k_src), dvsrc = upload(v_src);
  auto drows = upload(rows);
  kv_append(dk.get(), dv.get(), head_stride, dksrc.get(), dvsrc.get(), src_stride, n, n_kv, hd, drows.get(),
            rows_stride, nullptr);
  test::sync("kv_append");
  EXPECT_TRUE(test::same_bits(download(dk), want_k));
  EXPECT_TRUE(test::same_bits(download(dv), want_v));
}

TYPED_TEST(CudaKvCache, AppendWritesRoundedRowsAtEachHeadsListedRows) {
  KVS_REQUIRE_GPU();
  check_append<TypeParam>({0, 1, 2, 3, 4, 12, 3, 39, 8, 9, 35, 36, 37, 38, 0}, 5, 80);  // [3, 5] per head
  check_append<TypeParam>({0, 1, 2, 3, 4, 99}, 0, 82);  // one list for every head
}

// H query heads and n_kv KV heads of head_dim hd at position pos, RMS-normalised first where
// qk_norm (Qwen3), rotated with `pairing` (or not at all), appended at slot0.
template <class T>
void check_rope_append(int H, int n_kv, int hd, bool rotate, ops::RopePairing pairing, uint64_t seed,
                       bool qk_norm = false) {
  const int pos = 9, cap = 12;
  const long head_stride = static_cast<long>(cap) * hd;
  std::vector<int32_t> slot0(n_kv);  // [n_kv]
  for (int g = 0; g < n_kv; ++g) slot0[g] = (3 * g + 1) % cap;
  const auto qkv = test::random_vec(static_cast<std::size_t>(H + 2 * n_kv) * hd, seed, -3.0f, 3.0f);  // [H + 2 n_kv, hd]
  ops::RopeTable table(ops::rope_inv_freq(hd, 10000.0f));
  table.reserve(pos + 1);
  std::vector<float> want_qkv = qkv;
  const auto q_norm = test::random_vec(hd, seed + 7, 0.5f, 2.0f), k_norm = test::random_vec(hd, seed + 8, 0.5f, 2.0f);
  const float eps = 1e-6f;
  if (qk_norm) {
    ops::rmsnorm_rows(want_qkv.data(), want_qkv.data(), q_norm.data(), H, hd, eps);
    ops::rmsnorm_rows(want_qkv.data() + H * hd, want_qkv.data() + H * hd, k_norm.data(), n_kv, hd, eps);
  }
  if (rotate) ops::rope_apply(want_qkv.data(), H + n_kv, hd, table.cos(pos), table.sin(pos), pairing);
  const std::vector<T> init(n_kv * head_stride, test::from_float<T>(-5.0f));  // [n_kv, head_stride]
  std::vector<T> want_k = init, want_v = init;
  for (int g = 0; g < n_kv; ++g) {
    for (int i = 0; i < hd; ++i) {
      const long dst = g * head_stride + static_cast<long>(slot0[g]) * hd + i;
      want_k[dst] = test::from_float<T>(want_qkv[(H + g) * hd + i]);
      want_v[dst] = test::from_float<T>(want_qkv[(H + n_kv + g) * hd + i]);
    }
  }
  auto dk = upload(init), dv = upload(init);
  auto dqkv = upload(qkv);
  auto dslot = upload(slot0);
  auto dpos = upload(std::vector<int32_t>{pos});
  const int half = hd / 2;
  auto dcos = upload(std::vector<float>(table.cos(0), table.cos(0) + (pos + 1) * half));
  auto dsin = upload(std::vector<float>(table.sin(0), table.sin(0) + (pos + 1) * half));
  auto dq_norm = upload(q_norm), dk_norm = upload(k_norm);
  const HeadNorms norms = qk_norm ? HeadNorms{dq_norm.get(), dk_norm.get(), eps} : HeadNorms{};
  rope_append(dk.get(), dv.get(), head_stride, dqkv.get(), H, n_kv, hd, dpos.get(), rotate ? dcos.get() : nullptr,
              rotate ? dsin.get() : nullptr, pairing == ops::RopePairing::Interleaved, dslot.get(), nullptr, norms);
  test::sync("rope_append");
  const std::vector<float> got_qkv = download(dqkv);
  // The norm's sum of squares is reduced in another order on the device: a few float steps.
  const double tol = qk_norm ? 1e-5 : 1e-6;
  for (std::size_t i = 0; i < qkv.size(); ++i) {
    ASSERT_TRUE(test::near(got_qkv[i], want_qkv[i], tol, tol)) << "qkv[" << i << "]";
  }
  const std::vector<T> got_k = download(dk), got_v = download(dv);
  for (std::size_t i = 0; i < got_k.size(); ++i) {
    ASSERT_TRUE(test::near(test::widen(got_k[i]), test::widen(want_k[i]), 1e-2, 1e-6)) << "key value " << i;
    ASSERT_TRUE(test::near(test::widen(got_v[i]), test::widen(want_v[i]), 0.0, 0.0)) << "value " << i;
  }
}

TYPED_TEST(CudaKvCache, RopeAppendRotatesQAndKThenAppendsKAndV) {
  KVS_REQUIRE_GPU();
  check_rope_append<TypeParam>(8, 2, 64, true, ops::RopePairing::RotateHalf, 100);   // GQA, HF pairs
  check_rope_append<TypeParam>(6, 6, 8, true, ops::RopePairing::Interleaved, 101);   // stories260K
  check_rope_append<TypeParam>(4, 1, 256, true, ops::RopePairing::Interleaved, 102);  // more pairs than threads
  check_rope_append<TypeParam>(8, 2, 64, false, ops::RopePairing::RotateHalf, 103);   // keys cached before RoPE
  check_rope_append<TypeParam>(8, 2, 128, true, ops::RopePairing::RotateHalf, 104, true);  // Qwen3's QK-norm
  check_rope_append<TypeParam>(4, 1, 256, false, ops::RopePairing::RotateHalf, 105, true);  // QK-norm, no RoPE
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
