// Device twin of kernels/group_rows.cu against ops::reduce_group_rows: random rows over a stride
// wider than the keys, KV heads over different numbers of keys (one key, just under, at and over
// a multiple of the sum's 256 lanes, thousands), a row of zeros (taken as uniform), all three
// reductions and group sizes 1 to 4. Every value must be the twin's bits: both round each
// operation on its own in the same order (lane sums, then a product by the reciprocal, then the
// group's sum or max, then the mean's quotient).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/group_rows.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

constexpr float kSentinel = -7.0f;

// Reduces rows [n_kv * group, stride] over n_keys [n_kv] on the device and compares every value
// with the twin; out's entries past a KV head's keys stay untouched.
void check_group_rows(const std::vector<float>& rows, long stride, const std::vector<int32_t>& n_keys, int group,
                      ops::GroupReduce how) {
  const int n_kv = static_cast<int>(n_keys.size());
  int max_keys = 0;
  for (int n : n_keys) max_keys = std::max(max_keys, n);
  const long out_stride = max_keys + 5;
  SCOPED_TRACE(testing::Message() << n_kv << " KV heads of " << group << ", up to " << max_keys << " keys, reduce "
                                  << static_cast<int>(how));
  auto drows = upload(rows);
  auto dn = upload(n_keys);
  auto dout = upload(std::vector<float>(n_kv * out_stride, kSentinel));  // [n_kv, out_stride]
  DeviceBuffer<float> sums(n_kv * group, "test sums");                    // [n_kv * group]
  reduce_group_rows(dout.get(), out_stride, drows.get(), stride, dn.get(), n_kv, group, max_keys, how, sums.get(),
                    nullptr);
  test::sync("reduce_group_rows");
  const std::vector<float> got = download(dout);
  for (int g = 0; g < n_kv; ++g) {
    std::vector<const float*> group_rows;  // [group]
    for (int i = 0; i < group; ++i) group_rows.push_back(rows.data() + (g * group + i) * stride);
    std::vector<float> want(n_keys[g]);
    ops::reduce_group_rows(group_rows.data(), group, n_keys[g], how, want.data());
    for (int j = 0; j < n_keys[g]; ++j)
      ASSERT_EQ(got[g * out_stride + j], want[j]) << "KV head " << g << " key " << j;
    for (long j = n_keys[g]; j < out_stride; ++j)
      ASSERT_EQ(got[g * out_stride + j], kSentinel) << "written past KV head " << g << "'s keys";
  }
}

TEST(CudaGroupRows, TheTwinsBitsForEveryReductionAndGroup) {
  KVS_REQUIRE_GPU();
  const std::vector<int32_t> n_keys = {1, 255, 256, 257, 5003};
  const long stride = 5120;
  for (int group : {1, 3, 4}) {
    const int H = static_cast<int>(n_keys.size()) * group;
    std::vector<float> rows = test::random_vec(H * stride, 40 + group, 0.0f, 1.0f);  // [H, stride]
    for (long j = 0; j < stride; ++j) rows[stride + j] = 0.0f;  // a row with nothing to share out
    for (ops::GroupReduce how : {ops::GroupReduce::Mean, ops::GroupReduce::Max, ops::GroupReduce::Sum})
      check_group_rows(rows, stride, n_keys, group, how);
  }
}

// Rows of softmax-like values: a few peaked keys among many small ones, as decode rows are.
TEST(CudaGroupRows, PeakedRowsOverManyKeys) {
  KVS_REQUIRE_GPU();
  const int group = 4, n_kv = 2, n = 40000;
  const long stride = n;
  std::vector<float> rows = test::random_vec(n_kv * group * stride, 7, 0.0f, 1e-5f);  // [H, stride]
  for (int h = 0; h < n_kv * group; ++h) rows[h * stride + (h * 977) % n] = 0.6f;
  check_group_rows(rows, stride, {n, n - 300}, group, ops::GroupReduce::Mean);
}

}  // namespace
}  // namespace kvs::cuda
