// attend_causal_block (a block of prompt rows), attend_rows (one query over listed key/value rows)
// and attend_rows_part + attend_rows_merge (a KV head's query heads over key ranges, as decode
// runs them, over fp32 or 16-bit rows), against a direct double-precision computation; scores soft-capped as Gemma 2 caps them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/attention.h"
#include "kernels/quant.h"
#include "tests/kernels/random_data.h"

namespace kvs::ops {
namespace {

using test::random_vec;

struct Expected {
  std::vector<double> probs, out;
  double lse = 0;
};

// The softmax of q's scores over the listed rows, each d * scale, soft-capped by softcap (0: not).
Expected naive(const float* q, const float* k, const float* v, const std::vector<int>& rows, int hd, long stride,
               double scale, double softcap = 0) {
  Expected e;
  std::vector<double> s;
  double mx = -1e300;
  for (int r : rows) {
    double d = 0;
    for (int i = 0; i < hd; ++i) d += double(q[i]) * k[r * stride + i];
    s.push_back(softcap > 0 ? softcap * std::tanh(d * scale / softcap) : d * scale);
    mx = std::max(mx, s.back());
  }
  double sum = 0;
  for (double x : s) sum += std::exp(x - mx);
  e.lse = mx + std::log(sum);
  e.out.assign(hd, 0.0);
  for (std::size_t j = 0; j < rows.size(); ++j) {
    e.probs.push_back(std::exp(s[j] - e.lse));
    for (int i = 0; i < hd; ++i) e.out[i] += e.probs[j] * v[rows[j] * stride + i];
  }
  return e;
}

// A causal block of prompt queries (rows q0..q0+nq-1 of one head among several) against the
// naive computation of each row: head sizes with and without a vector tail, blocks that are not
// a multiple of the 6-row tile or the 18-row group, blocks past the first, blocks whose keys span
// several chunks and panels, sliding windows narrower and wider than a chunk.
TEST(Attention, CausalBlockMatchesNaiveRows) {
  for (const int hd : {8, 13, 64})
    for (const int window : {0, 5, 150}) {
      const int P = 300, heads = 2, h = 1;
      const long stride = heads * hd;  // [P, heads * hd] rows, head 1 used
      const auto q = random_vec(P * stride, 10 + hd, -1.5f, 1.5f), k = random_vec(P * stride, 20 + hd, -1.5f, 1.5f),
                 v = random_vec(P * stride, 30 + hd, -1.5f, 1.5f);
      std::vector<float> kp(key_panel_floats(P, hd));  // head 1's keys in panels
      pack_key_panels(kp.data(), k.data() + h * hd, stride, P, hd);
      const double scale = 1.0 / std::sqrt((double)hd);
      for (const auto& [q0, nq] : {std::pair{0, 7}, std::pair{7, 19}, std::pair{26, 19}, std::pair{211, 89}}) {
        std::vector<float> out((std::size_t)nq * stride, -7.0f), probs((std::size_t)nq * (q0 + nq), -7.0f), lse(nq);
        attend_causal_block(out.data() + h * hd, stride, probs.data(), lse.data(), q.data() + q0 * stride + h * hd,
                            stride, kp.data(), v.data() + h * hd, stride, q0, nq, hd, window, (float)scale);
        for (int i = 0; i < nq; ++i) {
          const int pos = q0 + i, lo = window > 0 ? std::max(0, pos - window + 1) : 0;
          std::vector<int> rows;
          for (int j = lo; j <= pos; ++j) rows.push_back(j);
          const Expected e = naive(q.data() + pos * stride + h * hd, k.data() + h * hd, v.data() + h * hd, rows, hd,
                                   stride, scale);
          SCOPED_TRACE("hd " + std::to_string(hd) + " window " + std::to_string(window) + " query " +
                       std::to_string(pos));
          EXPECT_NEAR(lse[i], e.lse, 1e-5);
          const float* pr = probs.data() + (std::size_t)i * (q0 + nq);
          double sum = 0.0;
          for (int j = 0; j < q0 + nq; ++j) {
            const double want = j >= lo && j <= pos ? e.probs[j - lo] : 0.0;
            EXPECT_NEAR(pr[j], want, 1e-6) << "key " << j;
            sum += pr[j];
          }
          EXPECT_NEAR(sum, 1.0, 1e-5);
          for (int d = 0; d < hd; ++d) EXPECT_NEAR(out[(std::size_t)i * stride + h * hd + d], e.out[d], 1e-5);
          EXPECT_EQ(out[(std::size_t)i * stride], -7.0f) << "another head's output was written";
        }
      }
    }
}

// Several observer blocks in one call: each block's rows, at causal_block_offset and as long as
// its own last query's keys, equal what a call for that block alone writes (bit for bit), and so
// do the outputs and log-sum-exps; blocks that cut groups and tiles, a last block shorter than
// the others, a sliding window.
TEST(Attention, BlocksInOneCallEqualOneCallPerBlock) {
  const int hd = 16, P = 260, q0 = 37, nq = P - q0;
  const auto q = random_vec(P * hd, 41, -1.5f, 1.5f), k = random_vec(P * hd, 42, -1.5f, 1.5f),
             v = random_vec(P * hd, 43, -1.5f, 1.5f);
  std::vector<float> kp(key_panel_floats(P, hd));
  pack_key_panels(kp.data(), k.data(), hd, P, hd);
  for (const int window : {0, 40})
    for (const int block : {5, 18, 72, 100}) {
      SCOPED_TRACE("block " + std::to_string(block) + " window " + std::to_string(window));
      std::vector<float> out((std::size_t)nq * hd), probs((std::size_t)nq * P, -7.0f), lse(nq);
      attend_causal_block(out.data(), hd, probs.data(), lse.data(), q.data() + q0 * hd, hd, kp.data(), v.data(), hd,
                          q0, nq, hd, window, 0.25f, block);
      for (int b0 = 0; b0 < nq; b0 += block) {
        const int n = std::min(block, nq - b0), len = q0 + b0 + n;
        std::vector<float> out1((std::size_t)n * hd), probs1((std::size_t)n * len), lse1(n);
        attend_causal_block(out1.data(), hd, probs1.data(), lse1.data(), q.data() + (q0 + b0) * hd, hd, kp.data(),
                            v.data(), hd, q0 + b0, n, hd, window, 0.25f);
        const float* at = probs.data() + causal_block_offset(q0, block, b0 / block);
        EXPECT_TRUE(std::equal(probs1.begin(), probs1.end(), at)) << "probs of the block at row " << b0;
        EXPECT_TRUE(std::equal(lse1.begin(), lse1.end(), lse.begin() + b0)) << "lse at row " << b0;
        EXPECT_TRUE(std::equal(out1.begin(), out1.end(), out.begin() + (std::size_t)b0 * hd)) << "out at row " << b0;
      }
      // The blocks fill exactly the floats before the last block's end; nothing after it is written.
      const long end = causal_block_offset(q0, block, (nq - 1) / block) +
                       (long)(nq - (nq - 1) / block * block) * (q0 + nq);
      EXPECT_EQ(probs[end], -7.0f);
    }
}

// Soft-capped scores (Gemma 2): a cap of 1 on scores of a few units flattens every row, in the
// prompt's causal blocks (with a window) and in a decode row over listed keys.
TEST(Attention, SoftCappedScoresMatchNaive) {
  const int hd = 16, P = 120;
  const float scale = 0.5f, cap = 1.0f;
  const auto q = random_vec(P * hd, 51, -1.5f, 1.5f), k = random_vec(P * hd, 52, -1.5f, 1.5f),
             v = random_vec(P * hd, 53, -1.5f, 1.5f);
  std::vector<float> kp(key_panel_floats(P, hd));
  pack_key_panels(kp.data(), k.data(), hd, P, hd);
  for (const int window : {0, 30}) {
    std::vector<float> out((std::size_t)P * hd), probs((std::size_t)P * P), lse(P);
    attend_causal_block(out.data(), hd, probs.data(), lse.data(), q.data(), hd, kp.data(), v.data(), hd, 0, P, hd,
                        window, Scoring(scale, cap));
    for (int pos = 0; pos < P; ++pos) {
      const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
      std::vector<int> rows;
      for (int j = lo; j <= pos; ++j) rows.push_back(j);
      const Expected e = naive(q.data() + pos * hd, k.data(), v.data(), rows, hd, hd, scale, cap);
      SCOPED_TRACE("window " + std::to_string(window) + " query " + std::to_string(pos));
      EXPECT_NEAR(lse[pos], e.lse, 1e-5);
      for (int j = lo; j <= pos; ++j) ASSERT_NEAR(probs[(std::size_t)pos * P + j], e.probs[j - lo], 1e-6) << "key " << j;
      for (int d = 0; d < hd; ++d) EXPECT_NEAR(out[(std::size_t)pos * hd + d], e.out[d], 1e-5);
    }
  }
  std::vector<int32_t> rows;
  for (int j = P - 1; j >= 0; j -= 3) rows.push_back(j);
  std::vector<float> out(hd), probs(rows.size());
  const float lse = attend_rows(out.data(), probs.data(), q.data(), k.data(), v.data(), rows.data(),
                                static_cast<int>(rows.size()), hd, Scoring(scale, cap));
  const Expected e = naive(q.data(), k.data(), v.data(), std::vector<int>(rows.begin(), rows.end()), hd, hd, scale, cap);
  const Expected uncapped = naive(q.data(), k.data(), v.data(), std::vector<int>(rows.begin(), rows.end()), hd, hd, scale);
  EXPECT_NEAR(lse, e.lse, 1e-5);
  EXPECT_GT(std::abs(e.lse - uncapped.lse), 0.1) << "the cap should matter here";
  for (std::size_t j = 0; j < rows.size(); ++j) EXPECT_NEAR(probs[j], e.probs[j], 1e-6);
  for (int i = 0; i < hd; ++i) EXPECT_NEAR(out[i], e.out[i], 1e-5);
}

TEST(Attention, ListedRowsReadOnlyThoseRows) {
  const int hd = 8, n = 30;
  const auto k = random_vec(n * hd, 4, -1.5f, 1.5f), v = random_vec(n * hd, 5, -1.5f, 1.5f),
             q = random_vec(hd, 6, -1.5f, 1.5f);
  const std::vector<int32_t> rows = {0, 3, 4, 17, 29};
  std::vector<float> out(hd), probs(rows.size());
  const float lse = attend_rows(out.data(), probs.data(), q.data(), k.data(), v.data(), rows.data(),
                                static_cast<int>(rows.size()), hd, 0.5f);
  const Expected e = naive(q.data(), k.data(), v.data(), std::vector<int>(rows.begin(), rows.end()), hd, hd, 0.5);
  EXPECT_NEAR(lse, e.lse, 1e-5);
  for (std::size_t j = 0; j < rows.size(); ++j) EXPECT_NEAR(probs[j], e.probs[j], 1e-6);
  for (int i = 0; i < hd; ++i) EXPECT_NEAR(out[i], e.out[i], 1e-5);
}

// Head sizes with and without a partial vector and past one 64-float pass over the values; key
// counts with and without a partial group of four; rows listed out of order with gaps.
TEST(Attention, ListedRowsMatchNaiveAcrossHeadSizes) {
  for (const int hd : {8, 13, 64, 72, 128, 136}) {
    for (const int n : {1, 3, 4, 37, 300}) {
      const int stored = 2 * n + 5;
      const auto k = random_vec(stored * hd, 7 + hd, -1.5f, 1.5f), v = random_vec(stored * hd, 8 + n, -1.5f, 1.5f),
                 q = random_vec(hd, 9, -1.5f, 1.5f);
      std::vector<int32_t> rows(n);
      for (int j = 0; j < n; ++j) rows[j] = (j * 7 + 3) % stored;
      std::vector<float> out(hd), probs(n);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      const float lse = attend_rows(out.data(), probs.data(), q.data(), k.data(), v.data(), rows.data(), n, hd, scale);
      const Expected e = naive(q.data(), k.data(), v.data(), std::vector<int>(rows.begin(), rows.end()), hd, hd, scale);
      SCOPED_TRACE("head_dim " + std::to_string(hd) + ", keys " + std::to_string(n));
      EXPECT_NEAR(lse, e.lse, 1e-5);
      double sum = 0.0;
      for (int j = 0; j < n; ++j) {
        EXPECT_NEAR(probs[j], e.probs[j], 1e-6) << "key " << j;
        sum += probs[j];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
      for (int i = 0; i < hd; ++i) EXPECT_NEAR(out[i], e.out[i], 1e-5) << "component " << i;
    }
  }
}

// Decode's path: the query heads of one KV head over key ranges (attend_rows_part, which walks
// each range for groups of up to four heads), merged per head (attend_rows_merge). Groups of 1,
// 3 and 4 heads, and of 5 and 8 (two groups, the second short or whole); head sizes with and
// without a vector tail, and the two compiled as constants (64, 128); ranges of fewer than four
// keys, whole groups of four and a partial one, and over several parts; rows listed out of order
// with gaps, as one run of consecutive rows (read without the list), and as two runs (parts on
// either side of the gap are runs, the one across it is not).
TEST(Attention, RangePartsOfSeveralHeadsMatchNaive) {
  enum class Rows { Scattered, Run, TwoRuns };
  for (const Rows pattern : {Rows::Scattered, Rows::Run, Rows::TwoRuns})
    for (const int hd : {8, 13, 64, 128})
      for (const int group : {1, 3, 4, 5, 8})
        for (const int n : {1, 5, 64, 65, 300}) {
          const int stored = n + 9, seg = 128, parts = (n + seg - 1) / seg;
          const auto k = random_vec(stored * hd, 30 + hd, -1.5f, 1.5f), v = random_vec(stored * hd, 31 + n, -1.5f, 1.5f),
                     q = random_vec(group * hd, 32 + group, -1.5f, 1.5f);
          std::vector<int32_t> rows(n);
          for (int j = 0; j < n; ++j) {
            switch (pattern) {
              case Rows::Scattered: rows[j] = (j * 5 + 2) % stored; break;
              case Rows::Run: rows[j] = j + 4; break;
              case Rows::TwoRuns: rows[j] = j < 150 ? j : j + 9; break;
            }
          }
          std::vector<float> part_out(static_cast<std::size_t>(group) * parts * hd), m(group * parts), l(group * parts),
              probs(static_cast<std::size_t>(group) * n), out(hd);
          for (int p = 0; p < parts; ++p)
            attend_rows_part(part_out.data() + p * hd, static_cast<long>(parts) * hd, probs.data(), n, m.data() + p,
                             l.data() + p, parts, q.data(), group, k.data(), v.data(), rows.data(), p * seg,
                             std::min(n, (p + 1) * seg), hd, 0.3f);
          for (int i = 0; i < group; ++i) {
            SCOPED_TRACE("rows pattern " + std::to_string(static_cast<int>(pattern)) + ", head_dim " +
                         std::to_string(hd) + ", group " + std::to_string(group) + ", keys " + std::to_string(n) +
                         ", head " + std::to_string(i));
            const float lse = attend_rows_merge(out.data(), probs.data() + i * n, n, seg,
                                                part_out.data() + static_cast<std::size_t>(i) * parts * hd,
                                                m.data() + i * parts, l.data() + i * parts, parts, hd);
            const Expected e = naive(q.data() + i * hd, k.data(), v.data(), std::vector<int>(rows.begin(), rows.end()),
                                     hd, hd, 0.3);
            EXPECT_NEAR(lse, e.lse, 1e-5);
            for (int j = 0; j < n; ++j) EXPECT_NEAR(probs[i * n + j], e.probs[j], 1e-6) << "key " << j;
            for (int d = 0; d < hd; ++d) EXPECT_NEAR(out[d], e.out[d], 1e-5) << "component " << d;
          }
        }
}

// The next range's keys (next_keys) are only asked for ahead: every part's output, maximum, sum
// and probabilities are bit for bit those without the hint, whether it points at the next part's
// first key or past the end of the keys (the last part), for lone heads and groups, run and
// scattered rows.
TEST(Attention, NextKeysHintLeavesRangePartsBitIdentical) {
  for (const bool run : {true, false})
    for (const int hd : {13, 64})
      for (const int group : {1, 3, 5}) {
        const int n = 700, stored = n + 3, seg = 256, parts = (n + seg - 1) / seg;
        const auto k = random_vec(stored * hd, 40 + hd, -1.5f, 1.5f), v = random_vec(stored * hd, 41, -1.5f, 1.5f),
                   q = random_vec(group * hd, 42 + group, -1.5f, 1.5f);
        std::vector<int32_t> rows(n);
        for (int j = 0; j < n; ++j) rows[j] = run ? j + 3 : (j * 7 + 1) % stored;
        auto parts_with = [&](bool hint) {
          std::vector<float> out(static_cast<std::size_t>(group) * parts * hd), m(group * parts), l(group * parts),
              probs(static_cast<std::size_t>(group) * n);
          for (int p = 0; p < parts; ++p) {
            const int j0 = p * seg, j1 = std::min(n, j0 + seg);
            // The next part's first key row; past the last one, the end of the keys.
            const float* next = !hint ? nullptr : j1 < n ? k.data() + static_cast<long>(rows[j1]) * hd : k.data() + k.size();
            attend_rows_part(out.data() + p * hd, static_cast<long>(parts) * hd, probs.data(), n, m.data() + p,
                             l.data() + p, parts, q.data(), group, k.data(), v.data(), rows.data(), j0, j1, hd, 0.3f,
                             next);
          }
          std::vector<float> all = out;
          all.insert(all.end(), m.begin(), m.end());
          all.insert(all.end(), l.begin(), l.end());
          all.insert(all.end(), probs.begin(), probs.end());
          return all;
        };
        const std::vector<float> plain = parts_with(false), hinted = parts_with(true);
        ASSERT_EQ(plain.size(), hinted.size());
        EXPECT_EQ(std::memcmp(plain.data(), hinted.data(), plain.size() * sizeof(float)), 0)
            << (run ? "run" : "scattered") << " rows, head_dim " << hd << ", group " << group;
      }
}


// A 16-bit cache (keys and values fp16 or bf16, or fp32 keys over 16-bit values) is read exactly:
// every part's output, maximum, sum and probabilities are bit for bit those over fp32 rows holding
// the same numbers at the head sizes compiled as constants (64, 128), and within a multiply-add's
// rounding at others (13: a vector tail), for lone heads and groups,
// run and scattered rows, several parts with the next keys asked for ahead. A pair of 16-bit types
// the cache never holds is refused.
TEST(Attention, SixteenBitRowsAttendAsTheirFp32Twins) {
  using enum RowType;
  const std::pair<RowType, RowType> pairs[] = {{F16, F16}, {BF16, BF16}, {F32, F16}, {F32, BF16}};
  for (const auto [key_type, value_type] : pairs)
    for (const bool run : {true, false})
      for (const int hd : {13, 64, 128})
        for (const int group : {1, 3, 5}) {
          const int n = 600, stored = n + 3, seg = 256, parts = (n + seg - 1) / seg;
          auto k = random_vec(stored * hd, 50 + hd, -2.5f, 2.5f), v = random_vec(stored * hd, 51, -2.5f, 2.5f);
          const auto q = random_vec(group * hd, 52 + group, -1.5f, 1.5f);
          // The 16-bit rows, and k, v rounded to the numbers they hold.
          auto sixteen = [](std::vector<float>& x, RowType t) {
            std::vector<uint16_t> bits(x.size());
            for (std::size_t i = 0; i < x.size(); ++i) {
              bits[i] = t == F16 ? fp32_to_fp16(x[i]) : fp32_to_bf16(x[i]);
              x[i] = t == F16 ? fp16_to_fp32(bits[i]) : bf16_to_fp32(bits[i]);
            }
            return bits;
          };
          const std::vector<uint16_t> k16 = key_type == F32 ? std::vector<uint16_t>() : sixteen(k, key_type);
          const std::vector<uint16_t> v16 = sixteen(v, value_type);
          std::vector<int32_t> rows(n);
          for (int j = 0; j < n; ++j) rows[j] = run ? j + 3 : (j * 7 + 1) % stored;
          auto parts_over = [&](RowData keys, RowData values) {
            std::vector<float> out(static_cast<std::size_t>(group) * parts * hd), m(group * parts), l(group * parts),
                probs(static_cast<std::size_t>(group) * n);
            const std::size_t key_bytes = keys.type == F32 ? 4 : 2;
            for (int p = 0; p < parts; ++p) {
              const int j0 = p * seg, j1 = std::min(n, j0 + seg);
              const void* next = j1 < n ? static_cast<const char*>(keys.data) + rows[j1] * hd * key_bytes : nullptr;
              attend_rows_part(out.data() + p * hd, static_cast<long>(parts) * hd, probs.data(), n, m.data() + p,
                               l.data() + p, parts, q.data(), group, keys, values, rows.data(), j0, j1, hd, 0.3f, next);
            }
            for (const std::vector<float>* x : {&m, &l, &probs}) out.insert(out.end(), x->begin(), x->end());
            return out;
          };
          const std::vector<float> want = parts_over({k.data(), F32}, {v.data(), F32});
          const std::vector<float> got =
              parts_over(key_type == F32 ? RowData{k.data(), F32} : RowData{k16.data(), key_type}, {v16.data(), value_type});
          ASSERT_EQ(want.size(), got.size());
          const std::string where = "key type " + std::to_string(static_cast<int>(key_type)) + ", value type " +
                                    std::to_string(static_cast<int>(value_type)) + ", " + (run ? "run" : "scattered") +
                                    " rows, head_dim " + std::to_string(hd) + ", group " + std::to_string(group);
          if (hd == 64 || hd == 128) {
            EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << where;
          } else {  // GCC contracts the fp32 rows' value sums into multiply-adds at other points
            for (std::size_t i = 0; i < want.size(); ++i)
              ASSERT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i]))) << where << ", element " << i;
          }
        }
  std::vector<uint16_t> bits(64, 0);
  std::vector<float> out(8), m(1), l(1), probs(4), q(8);
  const int32_t rows[] = {0, 1, 2, 3};
  EXPECT_THROW(attend_rows_part(out.data(), 8, probs.data(), 4, m.data(), l.data(), 1, q.data(), 1,
                                RowData{bits.data(), F16}, RowData{bits.data(), BF16}, rows, 0, 4, 8, 0.3f),
               std::logic_error);
}

}  // namespace
}  // namespace kvs::ops
