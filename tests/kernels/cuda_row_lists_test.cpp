// Device twin of kernels/row_lists.cu against ops::edit_row_list, exact: heads that edit their
// copy (removed indices anywhere, at the ends, none; appended rows or none), heads given a list
// whole with or without slots, in one launch; lists longer than the grid's threads; entries past
// each head's new count left as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/cuda_ops.h"
#include "kernels/row_lists.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

// One launch over heads described by (n_src, n_removed, n_new, slots_given); the removed indices
// and rows are random. Compares dst and slots with the twin's, head by head.
void check_edits(const std::vector<ops::RowListEdit>& shapes, long stride, bool with_slots, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  const int n_kv = static_cast<int>(shapes.size());
  std::vector<int32_t> src(n_kv * stride);  // [n_kv, stride]
  for (int32_t& r : src) r = static_cast<int32_t>(rng() % 100000);
  std::vector<ops::RowListEdit> edits;  // [n_kv]
  std::vector<int32_t> payload;
  int most = 0;
  for (const ops::RowListEdit& s : shapes) {
    ops::RowListEdit e = s;
    e.offset = static_cast<int32_t>(payload.size());
    std::vector<int32_t> idx(s.n_src);
    for (int i = 0; i < s.n_src; ++i) idx[i] = i;
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(s.n_removed);
    std::sort(idx.begin(), idx.end());
    payload.insert(payload.end(), idx.begin(), idx.end());
    const int n_out = s.n_src - s.n_removed + s.n_new;
    for (int a = 0; a < s.n_new; ++a) payload.push_back(static_cast<int32_t>(rng() % 100000));
    for (int i = 0; s.slots_given && i < n_out; ++i) payload.push_back(static_cast<int32_t>(rng() % 5000));
    most = std::max({most, s.n_src, n_out});
    edits.push_back(e);
  }
  const std::vector<int32_t> init(n_kv * stride, -7);  // [n_kv, stride]
  std::vector<int32_t> want = init, want_slots = init;
  for (int g = 0; g < n_kv; ++g) {
    ops::edit_row_list(want.data() + g * stride, with_slots ? want_slots.data() + g * stride : nullptr,
                       src.data() + g * stride, edits[g], payload.data());
  }
  auto ddst = upload(init), dslots = upload(init), dsrc = upload(src), dpayload = upload(payload);
  std::vector<int32_t> edit_ints(edits.size() * ops::kRowListEditInts);
  std::copy_n(reinterpret_cast<const int32_t*>(edits.data()), edit_ints.size(), edit_ints.begin());
  auto dedits = upload(edit_ints);
  edit_row_lists(ddst.get(), with_slots ? dslots.get() : nullptr, dsrc.get(), stride,
                 reinterpret_cast<const ops::RowListEdit*>(dedits.get()), dpayload.get(), n_kv, most, nullptr);
  test::sync("edit_row_lists");
  EXPECT_EQ(download(ddst), want);
  if (with_slots) {
    EXPECT_EQ(download(dslots), want_slots);
  }
}

TEST(CudaRowLists, EditsEqualTheTwinsForEveryKindOfHeadInOneLaunch) {
  KVS_REQUIRE_GPU();
  const std::vector<ops::RowListEdit> heads = {
      {40, 1, 1, 0, 0},   // StreamingLLM's step: one evicted, one appended
      {40, 0, 1, 0, 0},   // an append alone
      {40, 7, 0, 0, 0},   // evictions alone
      {40, 40, 3, 0, 0},  // every copied entry evicted
      {0, 0, 25, 0, 0},   // a list given whole
      {0, 0, 9, 0, 1},    // some entries' rows, with their slots
      {1, 1, 0, 0, 0},    // a list left empty
  };
  check_edits(heads, 64, false, 1);
  check_edits(heads, 64, true, 2);
}

// Heads longer than the launch's 32 blocks of 256 threads: every block strides over them.
TEST(CudaRowLists, ListsLongerThanTheGridAreEditedWhole) {
  KVS_REQUIRE_GPU();
  check_edits({{20000, 300, 2, 0, 0}, {0, 0, 19000, 0, 1}, {12000, 1, 0, 0, 0}}, 20480, true, 3);
}

}  // namespace
}  // namespace kvs::cuda
