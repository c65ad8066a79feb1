// Device twins of kernels/attention.cu. attend_decode against ops::attend_rows over the cache
// rounded to its storage type (fp16; bf16 and fp32 for subsets of the cases; rotated by row index
// with ops::rope_apply for the rope-by-slot path): GQA, head_dim 8..256 (80 among them), listed rows
// that skip cache rows, different n_rows per KV head, up to 17,000 keys (several P·V splits, and
// splits of several shared-memory tiles), soft-capped scores (Gemma 2). softmax_causal and
// softmax_ranges against a double-precision softmax per row (of soft-capped scores too), and the
// parts of T they write beside it bit for bit.
// Tolerances (only fp32 accumulation order differs): probs 2e-5 relative + 1e-8 absolute,
// lse 1e-5 absolute, out 1e-5 relative + 1e-5 absolute.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cuda_ops.h"
#include "kernels/rope.h"
#include "tests/kernels/cuda_test_util.h"

namespace kvs::cuda {
namespace {

using test::download;
using test::upload;

constexpr float kSentinel = -7.0f;

struct DecodeCase {
  int n_heads, n_kv_heads, head_dim, cap;
  std::vector<int> n_rows;  // [n_kv_heads]
  bool rope = false;
  ops::RopePairing pairing = ops::RopePairing::Interleaved;
  bool shuffled = false;  // list the rows out of cache order
  bool slotted = false;   // with rope: rotate each listed key by a slot of its own, not its row
  int extra_max_rows = 0;  // max_rows beyond the largest n_rows
  float softcap = 0.0f;    // scores soft-capped (0: not)
};

// Rows of KV head g: cache rows skipping every fifth (shifted per head), first n of them.
std::vector<int32_t> listed_rows(int g, int n, int cap, bool shuffled, uint64_t seed) {
  std::vector<int32_t> rows;
  for (int r = 0; r < cap && static_cast<int>(rows.size()) < n; ++r) {
    if ((r + g) % 5 != 2) rows.push_back(r);
  }
  EXPECT_EQ(static_cast<int>(rows.size()), n) << "cap too small for the case";
  if (shuffled) {
    std::mt19937_64 rng(seed);
    std::shuffle(rows.begin(), rows.end(), rng);
  }
  return rows;
}

template <class T = __half>
void run_decode(const DecodeCase& c, uint64_t seed) {
  const int hd = c.head_dim, half = hd / 2, nkv = c.n_kv_heads, nh = c.n_heads;
  const int group = nh / nkv;
  const long head_stride = static_cast<long>(c.cap) * hd + 24;  // padding between KV heads
  const int max_n = *std::max_element(c.n_rows.begin(), c.n_rows.end());
  const int max_rows = max_n + c.extra_max_rows;
  const long rows_stride = max_n + 3;
  const long probs_stride = max_rows + 7;
  const ops::Scoring score(1.0f / std::sqrt(static_cast<float>(hd)), c.softcap);

  const auto q = test::random_vec(static_cast<std::size_t>(nh) * hd, seed, -2.0f, 2.0f);  // [nh, hd]
  const auto k = test::random_vec(nkv * head_stride, seed + 1, -2.0f, 2.0f);  // [nkv, head_stride]
  const auto v = test::random_vec(nkv * head_stride, seed + 2, -2.0f, 2.0f);  // [nkv, head_stride]
  std::vector<int32_t> rows(nkv * rows_stride, -1);                           // [nkv, rows_stride]
  std::vector<int32_t> slots(nkv * rows_stride, -1);                          // [nkv, rows_stride]
  std::vector<std::vector<int32_t>> lists(nkv);
  for (int g = 0; g < nkv; ++g) {
    lists[g] = listed_rows(g, c.n_rows[g], c.cap, c.shuffled, seed + 3 + g);
    std::copy(lists[g].begin(), lists[g].end(), rows.begin() + g * rows_stride);
    for (int j = 0; j < c.n_rows[g]; ++j) slots[g * rows_stride + j] = (7 * j + g) % c.cap;
  }
  const std::vector<int32_t> n_rows(c.n_rows.begin(), c.n_rows.end());  // [nkv]

  ops::RopeTable table(ops::rope_inv_freq(hd, 10000.0f));
  table.reserve(c.cap);
  const std::vector<float> cos_tab(table.cos(0), table.cos(0) + static_cast<long>(c.cap) * half);  // [cap, half]
  const std::vector<float> sin_tab(table.sin(0), table.sin(0) + static_cast<long>(c.cap) * half);  // [cap, half]

  // CPU reference over what the device stores (T), keys rotated by their slot or cache row.
  std::vector<float> kref = test::round_store<T>(k), vref = test::round_store<T>(v);
  if (c.rope && c.slotted) {
    for (int g = 0; g < nkv; ++g) {
      for (int j = 0; j < c.n_rows[g]; ++j) {
        const int slot = slots[g * rows_stride + j];
        ops::rope_apply(kref.data() + g * head_stride + static_cast<long>(lists[g][j]) * hd, 1, hd,
                        table.cos(slot), table.sin(slot), c.pairing);
      }
    }
  } else if (c.rope) {
    for (int g = 0; g < nkv; ++g) {
      for (int r = 0; r < c.cap; ++r) {
        ops::rope_apply(kref.data() + g * head_stride + static_cast<long>(r) * hd, 1, hd,
                        table.cos(r), table.sin(r), c.pairing);
      }
    }
  }
  std::vector<float> want_out(static_cast<std::size_t>(nh) * hd), want_lse(nh);
  std::vector<std::vector<float>> want_probs(nh);
  for (int h = 0; h < nh; ++h) {
    const int g = h / group;
    want_probs[h].resize(c.n_rows[g]);
    want_lse[h] = ops::attend_rows(want_out.data() + static_cast<long>(h) * hd,
                                   want_probs[h].data(), q.data() + static_cast<long>(h) * hd,
                                   kref.data() + g * head_stride, vref.data() + g * head_stride,
                                   lists[g].data(), c.n_rows[g], hd, score);
  }

  auto dq = upload(q);
  auto dk = upload(test::to_store<T>(k)), dv = upload(test::to_store<T>(v));
  auto drows = upload(rows), dn = upload(n_rows), dslots = upload(slots);
  auto dcos = upload(cos_tab), dsin = upload(sin_tab);
  auto dprobs = upload(std::vector<float>(nh * probs_stride, kSentinel));  // [nh, probs_stride]
  DeviceBuffer<float> dlse(nh, "lse");                                      // [nh]
  DeviceBuffer<float> dout(static_cast<std::size_t>(nh) * hd, "out");      // [nh, hd]
  DeviceBuffer<float> dscratch(attend_decode_scratch_floats(nh, max_rows, hd), "scratch");
  auto launch = [&](float* probs_out) {
    attend_decode(dout.get(), probs_out, probs_stride, dlse.get(), dq.get(), dk.get(),
                  dv.get(), head_stride, drows.get(), rows_stride, dn.get(), max_rows, nh, nkv, hd,
                  score, c.rope ? dcos.get() : nullptr, c.rope ? dsin.get() : nullptr,
                  c.slotted ? dslots.get() : nullptr, c.pairing == ops::RopePairing::Interleaved, dscratch.get(),
                  nullptr);
  };
  launch(dprobs.get());
  test::sync("attend_decode");
  const std::vector<float> probs = download(dprobs), lse = download(dlse), out = download(dout);

  for (int h = 0; h < nh; ++h) {
    SCOPED_TRACE(testing::Message() << "head " << h);
    const int n = c.n_rows[h / group];
    const std::vector<float> ph(probs.begin() + h * probs_stride,
                                probs.begin() + h * probs_stride + n);
    EXPECT_TRUE(test::all_close(ph, want_probs[h], 2e-5, 1e-8));
    double sum = 0;
    for (float p : ph) sum += p;
    EXPECT_NEAR(sum, 1.0, 1e-5);
    for (long j = n; j < probs_stride; ++j) {
      ASSERT_EQ(probs[h * probs_stride + j], kSentinel) << "probs past n_rows written at " << j;
    }
    EXPECT_NEAR(lse[h], want_lse[h], 1e-5);
  }
  EXPECT_TRUE(test::all_close(out, want_out, 1e-5, 1e-5));

  // Deterministic: a second launch gives the same bits.
  launch(dprobs.get());
  test::sync("attend_decode again");
  EXPECT_EQ(download(dprobs), probs);
  EXPECT_EQ(download(dlse), lse);
  EXPECT_EQ(download(dout), out);

  // Without the rows (no hook reads them): the same output and log-sum-exp, bit for bit.
  dout = upload(std::vector<float>(dout.size(), kSentinel));
  dlse = upload(std::vector<float>(dlse.size(), kSentinel));
  launch(nullptr);
  test::sync("attend_decode without rows");
  EXPECT_EQ(download(dlse), lse);
  EXPECT_EQ(download(dout), out);
}

TEST(CudaAttendDecode, GqaLongListsWithoutRope) {
  KVS_REQUIRE_GPU();
  DecodeCase c{8, 2, 128, 3700, {2950, 1700}};
  c.extra_max_rows = 37;
  run_decode(c, 100);
}

TEST(CudaAttendDecode, SmallHeadDimRopeBySlotInterleaved) {
  KVS_REQUIRE_GPU();
  DecodeCase c{8, 2, 8, 400, {300, 129}};
  c.rope = true;
  c.pairing = ops::RopePairing::Interleaved;
  run_decode(c, 200);
}

TEST(CudaAttendDecode, RopeBySlotRotateHalfSeveralSplits) {
  KVS_REQUIRE_GPU();
  DecodeCase c{8, 2, 128, 3800, {1000, 3000}};
  c.rope = true;
  c.pairing = ops::RopePairing::RotateHalf;
  c.shuffled = true;
  run_decode(c, 300);
}

// Keys cached before RoPE in rows an eviction freed: each is rotated by its slot (its index among
// the held entries), which its row no longer is.
TEST(CudaAttendDecode, RopeByListedSlotsNotRows) {
  KVS_REQUIRE_GPU();
  DecodeCase a{8, 2, 128, 1900, {1000, 1500}};
  a.rope = true;
  a.slotted = true;
  a.shuffled = true;
  a.pairing = ops::RopePairing::RotateHalf;
  run_decode(a, 350);
  DecodeCase b{6, 6, 8, 400, {250, 17, 1, 299, 128, 129}};
  b.rope = true;
  b.slotted = true;
  b.pairing = ops::RopePairing::Interleaved;
  run_decode<__nv_bfloat16>(b, 360);
}

TEST(CudaAttendDecode, HeadDim64ShuffledListsAndSingleKey) {
  KVS_REQUIRE_GPU();
  DecodeCase c{4, 4, 64, 700, {1, 513, 256, 257}};
  c.shuffled = true;
  run_decode(c, 400);
}

TEST(CudaAttendDecode, HeadDim256WithRope) {
  KVS_REQUIRE_GPU();
  DecodeCase c{2, 1, 256, 700, {555}};
  c.rope = true;
  c.pairing = ops::RopePairing::RotateHalf;
  run_decode(c, 500);
}

// The Llama-3-8B shape at a context long enough for splits of 128 keys (eight KV heads): each
// split stages several key tiles (60 keys at head_dim 128) and value tiles (64), the last ones
// partial; one KV head with a single key, others ending mid-split.
TEST(CudaAttendDecode, EightKvHeadsSplitsOfSeveralTiles) {
  KVS_REQUIRE_GPU();
  DecodeCase c{32, 8, 128, 11000, {8700, 8500, 4000, 8191, 1, 8300, 7000, 8650}};
  c.rope = true;
  c.pairing = ops::RopePairing::RotateHalf;
  run_decode(c, 600);
}

// A head_dim that is not a power of two (80: tiles of 64 keys for both passes) over splits of 128
// keys, in bf16.
TEST(CudaAttendDecode, HeadDim80Bf16SplitsOfSeveralTiles) {
  KVS_REQUIRE_GPU();
  DecodeCase c{8, 4, 80, 21500, {17000, 9000, 16500, 300}};
  c.shuffled = true;
  run_decode<__nv_bfloat16>(c, 700);
}

// A bf16 cache through the same kernel: both RoPE pairings, several splits, GQA.
TEST(CudaAttendDecode, Bf16CacheRopeBySlotBothPairings) {
  KVS_REQUIRE_GPU();
  DecodeCase a{8, 2, 8, 400, {300, 129}};
  a.rope = true;
  a.pairing = ops::RopePairing::Interleaved;
  run_decode<__nv_bfloat16>(a, 210);
  DecodeCase b{8, 2, 128, 1700, {1000, 1300}};
  b.rope = true;
  b.pairing = ops::RopePairing::RotateHalf;
  b.shuffled = true;
  run_decode<__nv_bfloat16>(b, 310);
}

// An fp32 cache through the same kernel, whose shared-memory tiles hold half the keys of a 16-bit
// one (32 at head_dim 128, 16 at 256): splits of several tiles, both RoPE pairings, listed slots,
// a head_dim that is not a power of two.
TEST(CudaAttendDecode, Fp32CacheTilesOfItsOwnSize) {
  KVS_REQUIRE_GPU();
  DecodeCase a{8, 2, 128, 3800, {1000, 3000}};
  a.rope = true;
  a.pairing = ops::RopePairing::RotateHalf;
  a.shuffled = true;
  run_decode<float>(a, 800);
  DecodeCase b{2, 1, 256, 700, {555}};
  b.rope = true;
  b.pairing = ops::RopePairing::RotateHalf;
  run_decode<float>(b, 810);
  DecodeCase c{6, 6, 8, 400, {250, 17, 1, 299, 128, 129}};
  c.rope = true;
  c.slotted = true;
  c.pairing = ops::RopePairing::Interleaved;
  run_decode<float>(c, 820);
  DecodeCase d{8, 4, 80, 4000, {3100, 1000, 2900, 300}};
  d.shuffled = true;
  run_decode<float>(d, 830);
}

// Gemma 2's soft-capped scores: a cap of 3 on scores of up to ~10 (q and k in [-2, 2]) flattens the
// rows, so a kernel that skips or misplaces the cap is far off. Both passes, fp16 and fp32 caches.
TEST(CudaAttendDecode, SoftCappedScores) {
  KVS_REQUIRE_GPU();
  DecodeCase a{8, 2, 128, 3800, {1000, 3000}};
  a.rope = true;
  a.pairing = ops::RopePairing::RotateHalf;
  a.softcap = 3.0f;
  run_decode(a, 850);
  DecodeCase b{6, 6, 8, 400, {250, 17, 1, 299, 128, 129}};
  b.softcap = 0.5f;
  run_decode<float>(b, 860);
}

// Every row r (query i = r % nq) of probs [n_rows, ld] against a double-precision softmax of
// scores' keys range(i) = [lo, hi), each soft-capped by softcap (0: none) first: zeros for its
// other keys below n_keys, untouched past n_keys.
template <class Range>
void expect_softmax_rows(const std::vector<float>& scores, const std::vector<float>& probs,
                         const std::vector<float>& lse, long n_rows, int nq, int n_keys, long ld, float softcap,
                         Range range) {
  auto capped = [softcap](double x) { return softcap > 0 ? softcap * std::tanh(x / softcap) : x; };
  for (long r = 0; r < n_rows; ++r) {
    const auto [lo, hi] = range(static_cast<int>(r % nq));
    const float* s = scores.data() + r * ld;
    const float* p = probs.data() + r * ld;
    double mx = -1e300;
    for (int j = lo; j < hi; ++j) mx = std::max(mx, capped(s[j]));
    double sum = 0;
    for (int j = lo; j < hi; ++j) sum += std::exp(capped(s[j]) - mx);
    const double want_lse = mx + std::log(sum);
    ASSERT_NEAR(lse[r], want_lse, 1e-5) << "row " << r;
    for (int j = 0; j < lo; ++j) ASSERT_EQ(p[j], 0.0f) << "row " << r << " key " << j << " before its keys";
    for (int j = lo; j < hi; ++j) {
      const double want = std::exp(capped(s[j]) - want_lse);
      ASSERT_TRUE(test::near(p[j], want, 1e-5, 1e-9)) << "row " << r << " key " << j << ": "
                                                      << p[j] << " vs " << want;
    }
    for (int j = hi; j < n_keys; ++j) ASSERT_EQ(p[j], 0.0f) << "row " << r << " masked key " << j;
    for (long j = n_keys; j < ld; ++j) ASSERT_EQ(p[j], s[j]) << "row " << r << " past n_keys";
  }
}

// Parts of T of the probabilities, as the P·V GEMMs read them (one fp32 part: the probability):
// for keys 0..n_keys-1 of every row, the split of the row's fp32 probability (part p = T(the rest
// after parts 0..p-1)), bit for bit; entries past n_keys untouched.
template <class T>
class PartsCheck {
 public:
  static constexpr int kParts = test::kSplitParts<T>;  // as the backend splits
  PartsCheck(long n_rows, long ld)
      : n_rows_(n_rows), ld_(ld), stride_(n_rows * ld + 11),
        dparts_(upload(std::vector<T>(kParts * stride_, test::from_float<T>(kSentinel)))) {}  // [kParts, stride]
  T* get() { return dparts_.get(); }
  long stride() const { return stride_; }
  void expect(const std::vector<float>& probs, int n_keys) const {
    const std::vector<T> parts = download(dparts_);
    const auto untouched = test::bits(test::from_float<T>(kSentinel));
    for (long r = 0; r < n_rows_; ++r) {
      for (long j = 0; j < ld_; ++j) {
        float rest = probs[r * ld_ + j];
        for (int p = 0; p < kParts; ++p) {
          const T got = parts[p * stride_ + r * ld_ + j];
          if (j >= n_keys) {
            ASSERT_EQ(test::bits(got), untouched) << "row " << r << " key " << j << " past n_keys, part " << p;
            continue;
          }
          const T want = test::from_float<T>(rest);
          ASSERT_EQ(test::bits(got), test::bits(want)) << "row " << r << " key " << j << " part " << p;
          rest -= test::widen(want);
        }
      }
    }
  }

 private:
  long n_rows_, ld_, stride_;
  DeviceBuffer<T> dparts_;
};

template <class T = __half>
void run_softmax_causal(int n_heads, int q0, int nq, uint64_t seed, int window = 0, float softcap = 0.0f) {
  const int n_keys = q0 + nq;
  const long ld = n_keys + 9;
  const long n_rows = static_cast<long>(n_heads) * nq;
  auto scores = test::random_vec(n_rows * ld, seed, -8.0f, 8.0f);  // [n_heads, nq, ld]
  auto dscores = upload(scores);
  DeviceBuffer<float> dlse(n_rows, "lse");  // [n_heads, nq]
  PartsCheck<T> parts(n_rows, ld);
  softmax_causal(dscores.get(), dlse.get(), parts.get(), parts.stride(), PartsCheck<T>::kParts, n_heads, nq, n_keys,
                 ld, q0, window, softcap, nullptr);
  test::sync("softmax_causal");
  const std::vector<float> probs = download(dscores);
  expect_softmax_rows(scores, probs, download(dlse), n_rows, nq, n_keys, ld, softcap, [&](int i) {
    const int n = q0 + i + 1;                                     // causal keys of the row
    return std::pair{window > 0 ? std::max(0, n - window) : 0, n};  // from the window's first key
  });
  parts.expect(probs, n_keys);
}

// softmax_ranges with random [begin, end) per query row (shared by the heads).
template <class T = __half>
void run_softmax_ranges(int n_heads, int nq, int n_keys, uint64_t seed, float softcap = 0.0f) {
  const long ld = n_keys + 5;
  const long n_rows = static_cast<long>(n_heads) * nq;
  auto scores = test::random_vec(n_rows * ld, seed, -8.0f, 8.0f);  // [n_heads, nq, ld]
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::vector<int32_t> begin(nq), end(nq);  // [nq] each
  for (int i = 0; i < nq; ++i) {
    begin[i] = std::uniform_int_distribution<int>(0, n_keys - 1)(rng);
    end[i] = std::uniform_int_distribution<int>(begin[i] + 1, n_keys)(rng);
  }
  begin[0] = 0;  // the whole row, and a single key
  end[0] = n_keys;
  end[nq - 1] = begin[nq - 1] + 1;
  auto dscores = upload(scores);
  auto dbegin = upload(begin), dend = upload(end);
  DeviceBuffer<float> dlse(n_rows, "lse");  // [n_heads, nq]
  PartsCheck<T> parts(n_rows, ld);
  softmax_ranges(dscores.get(), dlse.get(), parts.get(), parts.stride(), PartsCheck<T>::kParts, n_heads, nq, n_keys,
                 ld, dbegin.get(), dend.get(), softcap, nullptr);
  test::sync("softmax_ranges");
  const std::vector<float> probs = download(dscores);
  expect_softmax_rows(scores, probs, download(dlse), n_rows, nq, n_keys, ld, softcap,
                      [&](int i) { return std::pair{static_cast<int>(begin[i]), static_cast<int>(end[i])}; });
  parts.expect(probs, n_keys);
}

TEST(CudaSoftmaxCausal, FirstBlockMatchesDoubleSoftmax) {
  KVS_REQUIRE_GPU();
  run_softmax_causal(3, 0, 17, 600);
}

TEST(CudaSoftmaxCausal, LaterBlockOverLongRows) {
  KVS_REQUIRE_GPU();
  run_softmax_causal(3, 1400, 70, 700);
  run_softmax_causal(2, 300, 5, 800);
  run_softmax_causal(1, 5000, 3, 701);  // five rounds of a block's loads per row
}

TEST(CudaSoftmaxCausal, SlidingWindowMasksKeysBeforeIt) {
  KVS_REQUIRE_GPU();
  run_softmax_causal(2, 0, 40, 900, 16);    // rows before and after the window fills
  run_softmax_causal(3, 1000, 30, 901, 300);
  run_softmax_causal<__nv_bfloat16>(2, 500, 20, 902, 100);  // three bf16 parts
  run_softmax_causal<float>(2, 500, 20, 903, 100);          // one fp32 part
}

TEST(CudaSoftmaxRanges, EachRowKeepsItsRangeOfKeys) {
  KVS_REQUIRE_GPU();
  run_softmax_ranges(4, 9, 37, 950);
  run_softmax_ranges(2, 40, 1200, 951);  // rows longer than a block's threads
  run_softmax_ranges<__nv_bfloat16>(3, 20, 300, 952);
  run_softmax_ranges<float>(3, 20, 300, 953);
}

// Scores in [-8, 8] capped at 2.5: the softmax of the capped values, in both kernels.
TEST(CudaSoftmax, SoftCappedScores) {
  KVS_REQUIRE_GPU();
  run_softmax_causal(2, 300, 12, 960, 0, 2.5f);
  run_softmax_causal<float>(2, 0, 30, 961, 8, 2.5f);
  run_softmax_ranges(3, 20, 1200, 962, 2.5f);
}

}  // namespace
}  // namespace kvs::cuda
