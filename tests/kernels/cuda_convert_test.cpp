// Device twins of kernels/convert.cu, for fp16, bf16 and fp32: to_store and split_store (two fp16,
// three bf16 parts or one fp32, as the prefill uses) against the host's round-to-nearest-even
// conversions (kvs::fp32_to_fp16 / fp32_to_bf16; fp32 kept bit for bit), embed_rows against
// kvs::fp16_to_fp32 / bf16_to_fp32 of the table rows (times a scale). All exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/quant.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

// The host's own conversions (kernels/quant.h), independent of CUDA's headers; fp32's bits as
// they are.
template <class T>
test::Bits<T> host_bits(float f) {
  if constexpr (std::is_same_v<T, __half>) {
    return fp32_to_fp16(f);
  } else if constexpr (std::is_same_v<T, float>) {
    return test::bits(f);
  } else {
    return fp32_to_bf16(f);
  }
}

template <class T>
float host_widen(test::Bits<T> b) {
  if constexpr (std::is_same_v<T, __half>) {
    return fp16_to_fp32(b);
  } else if constexpr (std::is_same_v<T, float>) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  } else {
    return bf16_to_fp32(b);
  }
}

// Parts the backend splits activations into, and the bits of x their sum keeps (away from
// fp16's subnormals): two fp16 parts, three bf16 ones, one fp32 (all of x).
template <class T>
constexpr int kParts = test::kSplitParts<T>;
template <class T>
constexpr int kSplitBits = std::is_same_v<T, __half> ? 21 : std::is_same_v<T, float> ? 24 : 23;

template <class T>
class CudaConvert : public ::testing::Test {};
TYPED_TEST_SUITE(CudaConvert, test::StoreTypes, test::StoreNames);

TYPED_TEST(CudaConvert, ToStoreRoundsLikeTheHost) {
  KVS_REQUIRE_GPU();
  using T = TypeParam;
  auto x = test::random_vec(100003, 1, -3.0f, 3.0f);  // [n]
  const float inf = std::numeric_limits<float>::infinity();
  // zeros, fp16 subnormals, fp16 and bf16 ties to even, the largest half, fp16 overflow, bf16's
  // largest finite and its overflow, infinities
  const std::vector<float> special = {0.0f,    -0.0f,      1e-7f,   -6e-8f,  3e-8f,   1.00048828125f,
                                      1.00146484375f, 65504.0f, 65519.0f, 65520.0f, 1e6f, -1e6f,
                                      inf,     -inf,       2049.0f, 2051.0f, 1.00390625f, 1.01171875f,
                                      257.0f,  3.3895314e38f, 3.4028235e38f, 1e-40f};
  for (std::size_t i = 0; i < special.size(); ++i) x[i * 997] = special[i];
  auto dx = upload(x);
  DeviceBuffer<T> dout(x.size(), "out");  // [n]
  to_store(dout.get(), dx.get(), static_cast<long>(x.size()), nullptr);
  test::sync("to_store");
  const std::vector<T> got = download(dout);
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(test::bits(got[i]), host_bits<T>(x[i])) << i << ": " << x[i];
  }
}

TYPED_TEST(CudaConvert, SplitPartsAreTheRoundedValueAndItsRoundedRemainders) {
  KVS_REQUIRE_GPU();
  using T = TypeParam;
  auto x = test::random_vec(40009, 3, -50.0f, 50.0f);  // [n]
  x[0] = 0.0f;
  x[1] = 1e-6f;                  // fp16 subnormal range
  x[2] = 1.0f + 1.0f / 4096.0f;  // a tie of fp16's high part
  x[3] = 1.0f + 1.0f / 256.0f;   // a tie of bf16's high part
  auto dx = upload(x);
  const std::size_t n = x.size(), stride = n + 5;
  DeviceBuffer<T> dparts(kParts<T> * stride, "parts");  // [parts, stride]
  split_store(dparts.get(), static_cast<long>(stride), kParts<T>, dx.get(), static_cast<long>(n), nullptr);
  test::sync("split_store");
  const std::vector<T> parts = download(dparts);
  for (std::size_t i = 0; i < n; ++i) {
    float rest = x[i];
    double sum = 0;
    for (int p = 0; p < kParts<T>; ++p) {
      const auto want = host_bits<T>(rest);
      ASSERT_EQ(test::bits(parts[p * stride + i]), want) << "part " << p << " of " << i;
      rest -= host_widen<T>(want);
      sum += host_widen<T>(want);
    }
    if (std::fabs(x[i]) > 1e-2f) {
      ASSERT_LE(std::fabs(sum - x[i]), std::ldexp(std::fabs(x[i]), -kSplitBits<T>)) << i;
    }
  }
}

TYPED_TEST(CudaConvert, EmbedRowsWidensExactly) {
  KVS_REQUIRE_GPU();
  using T = TypeParam;
  const int vocab = 50, dim = 67;
  auto t = test::random_vec(static_cast<std::size_t>(vocab) * dim, 2, -4.0f, 4.0f);
  t[3] = 1e-6f;  // a subnormal half
  t[5] = -0.0f;
  const std::vector<T> table = test::to_store<T>(t);                    // [vocab, dim]
  const std::vector<int32_t> tokens = {0, 49, 7, 7, 3, 12, 0, 25, 48};  // [n]
  const int n = static_cast<int>(tokens.size());
  auto dtable = upload(table);
  auto dtokens = upload(tokens);
  DeviceBuffer<float> dx(static_cast<std::size_t>(n) * dim, "x");  // [n, dim]
  // Plain, and scaled as Gemma scales its embeddings (the CPU's row times the same float).
  for (const float scale : {1.0f, std::sqrt(640.0f)}) {
    embed_rows(dx.get(), dtable.get(), dtokens.get(), n, dim, nullptr, scale);
    test::sync("embed_rows");
    const std::vector<float> x = download(dx);
    for (int i = 0; i < n; ++i) {
      for (int c = 0; c < dim; ++c) {
        const float want = host_widen<T>(test::bits(table[static_cast<long>(tokens[i]) * dim + c])) * scale;
        const float got = x[static_cast<long>(i) * dim + c];
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << i << "," << c;
        ASSERT_EQ(got, want) << "row " << i << " col " << c << " scale " << scale;
      }
    }
  }
}

}  // namespace
}  // namespace kvs::cuda
