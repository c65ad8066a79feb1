// TraceRecorder and PrefillReducer driven by synthetic attention blocks the way the engine sends
// them: prefill blocks of causal rows per (layer, head), then one decode row per (layer, head)
// over a subset of positions (key_pos), step by step.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "analysis/prefill_evidence.h"
#include "analysis/recorder.h"
#include "inference/errors.h"
#include "inference/model.h"
#include "synthetic_engine.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using namespace kvs::testing;

// The rows on_step gave, [L, H, W] with W > q_pos, as dense rows [L, H, q_pos + 1]; every value
// past q_pos must be zero.
std::vector<float> dense_rows(std::span<const float> r, int q_pos) {
  const size_t n = (size_t)kL * kH, w = r.size() / n;
  EXPECT_EQ(r.size() % n, 0u);
  EXPECT_GT(w, (size_t)q_pos);
  std::vector<float> dense;
  for (size_t i = 0; i < n; ++i) {
    dense.insert(dense.end(), r.begin() + i * w, r.begin() + i * w + q_pos + 1);
    for (size_t j = q_pos + 1; j < w; ++j) EXPECT_EQ(r[i * w + j], 0.0f) << "row " << i << " key " << j;
  }
  return dense;
}

// The trace's decode rows [L, H, T] are the recorded ones (rows[s]: [L, H, q + 1] for query
// q = P + s) within `tol`, and zero past each query.
void expect_decode_rows(const TraceReader& r, const std::vector<std::vector<float>>& rows, float tol) {
  const int steps = (int)rows.size(), T = kP + steps;
  std::vector<float> got, lse;
  for (int s = 0; s < steps; ++s) {
    r.read_decode_step(s, got, lse);
    const int q = kP + s;
    for (int i = 0; i < kL * kH; ++i)
      for (int k = 0; k < T; ++k)
        ASSERT_NEAR(got[(size_t)i * T + k], k <= q ? rows[s][(size_t)i * (q + 1) + k] : 0.0f, tol)
            << s << " " << i << " " << k;
  }
}

TEST(PrefillReducer, ColumnSumsWindowRowsAndLse) {
  std::mt19937 rng(1);
  const Prompt p = make_prompt(rng);
  PrefillReducer red({kL, kH, kHkv, 8}, 4);
  const auto prompt = prompt_ids();
  red.on_begin(tiny_config(), prompt);
  send_prefill(red, p);
  send_decode(red, rng, kP);  // ignored
  const PrefillEvidence& ev = red.evidence();
  ASSERT_EQ(ev.window, 4);
  ASSERT_EQ(ev.prompt_len, kP);
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h) {
      for (int k = 0; k < kP; ++k) {
        float sum = 0.0f;
        for (int q = 0; q < kP; ++q) sum += p.row(l, h, q)[k];
        EXPECT_NEAR(ev.colsum_at(l, h)[k], sum, 1e-6f);
      }
      for (int w = 0; w < 4; ++w) {
        const int q = kP - 4 + w;
        for (int k = 0; k < kP; ++k) EXPECT_EQ(ev.window_row(l, h, w)[k], p.row(l, h, q)[k]);
        EXPECT_EQ(ev.window_lse[((size_t)l * kH + h) * 4 + w], p.lse[((size_t)l * kH + h) * kP + q]);
      }
    }
  PrefillReducer wide({kL, kH, kHkv, 8}, 64);
  wide.on_begin(tiny_config(), prompt);
  EXPECT_EQ(wide.evidence().window, kP) << "W = min(request, P)";
}

TEST(TraceRecorder, OnStepCanRunInTheBackground) {
  TempDir dir;
  const std::string path = dir.file("rec.h5");
  std::mt19937 rng(3);
  const Prompt p = make_prompt(rng);
  const int steps = 8;  // twice the queue: the writing recycles step buffers while on_step runs behind
  std::vector<std::vector<float>> rows;
  {
    TraceRecorder rec(path, tiny_meta(), steps, kDefaultCaptureBudget, 4);
    std::vector<std::vector<float>> seen;
    std::vector<std::thread::id> threads;
    rec.on_step_in_background = true;
    rec.on_step = [&](int step, int q_pos, std::span<const float> r, std::span<const float>) {
      EXPECT_EQ(step, (int)seen.size()) << "in step order";
      // The first call waits while the writing runs ahead and the next steps take buffers from the
      // pool; its rows, read after the wait, must still be its own.
      if (step == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      seen.push_back(dense_rows(r, q_pos));
      threads.push_back(std::this_thread::get_id());
    };
    rows = record_synthetic(rec, rng, p, steps);
    rec.writer();  // waits for the calls still pending
    EXPECT_EQ(seen, rows);
    ASSERT_EQ(threads.size(), (size_t)steps);
    for (const auto& t : threads) EXPECT_NE(t, std::this_thread::get_id());
    rec.finish(text_of);
  }
  TraceReader r(path);
  expect_decode_rows(r, rows, 0.0f);
}

TEST(TraceRecorder, AFailureOfOnStepInTheBackgroundSurfacesAndNothingIsWritten) {
  TempDir dir;
  const std::string path = dir.file("rec.h5");
  std::mt19937 rng(4);
  const Prompt p = make_prompt(rng);
  {
    TraceRecorder rec(path, tiny_meta(), 3, kDefaultCaptureBudget, 4);
    rec.on_step_in_background = true;
    rec.on_step = [](int step, int, std::span<const float>, std::span<const float>) {
      if (step == 1) throw InputError("analyses: out of memory");
    };
    try {
      record_synthetic(rec, rng, p, 3);
      rec.finish(text_of);
      FAIL() << "the failure of on_step was lost";
    } catch (const InputError& e) {
      EXPECT_STREQ(e.what(), "analyses: out of memory");
    }
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "no trace from a recording whose analyses failed";
}

TEST(TraceRecorder, RecordsPrefillDecodeRowsAndTokens) {
  TempDir dir;
  const std::string path = dir.file("rec.h5");
  std::mt19937 rng(2);
  const Prompt p = make_prompt(rng);
  const int steps = 3;
  std::vector<std::vector<float>> rows;
  {
    TraceRecorder rec(path, tiny_meta(), steps, kDefaultCaptureBudget, 4);
    std::vector<std::vector<float>> seen;
    rec.on_step = [&](int step, int q_pos, std::span<const float> r, std::span<const float> lse) {
      EXPECT_EQ(step, (int)seen.size());
      EXPECT_EQ(q_pos, kP + step);
      EXPECT_EQ(lse.size(), (size_t)kL * kH);
      seen.push_back(dense_rows(r, q_pos));
    };
    rows = record_synthetic(rec, rng, p, steps);
    EXPECT_EQ(seen, rows) << "on_step sees the rows, zeros past each query";
    EXPECT_EQ(rec.steps_written(), steps);
    rec.finish(text_of);
  }
  TraceReader r(path);
  EXPECT_EQ(r.meta().n_steps, steps);
  EXPECT_TRUE(r.meta().has_prefill_map);
  EXPECT_EQ(r.read_prefill_pooled(0, 0).block, 0);  // no overview beside the full map
  EXPECT_EQ(r.meta().capture_note, "");
  EXPECT_EQ(r.token_ids(), (std::vector<int32_t>{1, 5, 9, 13, 17, 21, 2, 3, 4}));
  EXPECT_EQ(r.token_texts()[6], "<2>");
  EXPECT_EQ(r.decode_query_pos(), (std::vector<int32_t>{6, 7, 8}));
  expect_decode_rows(r, rows, 0.0f);
  const PrefillEvidence ev = r.read_prefill();
  EXPECT_EQ(ev.window, 4);
  for (int h = 0; h < kH; ++h) {
    float sum0 = 0.0f;
    for (int q = 0; q < kP; ++q) sum0 += p.row(1, h, q)[0];
    EXPECT_NEAR(ev.colsum_at(1, h)[0], sum0, 1e-6f);
    EXPECT_EQ(ev.window_row(1, h, 3)[2], p.row(1, h, kP - 1)[2]);
    const auto map = r.read_prefill_map(1, h);
    for (int i = 0; i < kP * kP; ++i) EXPECT_NEAR(map[i], p.map[((size_t)1 * kH + h) * kP * kP + i], 1e-3f * map[i] + 6e-8f);
  }
}

// A layer's rows handed over at once (on_attention_heads, the GPU engine's way) and copied on
// several threads give the same steps as the rows one at a time.
TEST(TraceRecorder, LayerOfRowsAtOnceRecordsWhatRowsOneAtATimeDo) {
  std::vector<std::vector<float>> got[2], lse[2];
  for (const bool by_layer : {false, true}) {
    TempDir dir;
    std::mt19937 rng(5);
    const Prompt p = make_prompt(rng);
    const int steps = 3;
    TraceRecorder rec(dir.file("rec.h5"), tiny_meta(), steps, kDefaultCaptureBudget, 4);
    rec.parallel_row_keys = 1;  // every layer copied on several threads
    rec.on_step = [&](int, int q_pos, std::span<const float> r, std::span<const float> l) {
      got[by_layer].push_back(dense_rows(r, q_pos));
      lse[by_layer].emplace_back(l.begin(), l.end());
    };
    const auto prompt = prompt_ids();
    rec.on_begin(tiny_config(), prompt);
    for (int i = 0; i < kP; ++i) rec.on_token(i, prompt[i]);
    send_prefill(rec, p);
    rec.on_prefill_end(kP);
    for (int s = 0; s < steps; ++s) {
      rec.on_token(kP + s, 2 + s);
      send_decode(rec, rng, kP + s, kL * kH, by_layer);
    }
    EXPECT_EQ(rec.steps_written(), steps);
    rec.finish(text_of);
  }
  EXPECT_EQ(got[1], got[0]);
  EXPECT_EQ(lse[1], lse[0]);
}

// The recorder hands the writer rows as wide as its chunks: written as they are (float32 rows
// at least half full), packed by the writer (float32 rows mostly past the query: a recording
// longer than its prompt; float16), and each read back as recorded.
TEST(TraceRecorder, DecodeRowsReadBackWhetherStoredAsGivenOrPacked) {
  for (const char* dtype : {"float32", "float16"}) {
    SCOPED_TRACE(dtype);
    TempDir dir;
    const std::string path = dir.file("rec.h5");
    std::mt19937 rng(4);
    const Prompt p = make_prompt(rng);
    const int steps = 12;  // rows 7..18 keys wide in chunks 18 wide: the first two mostly empty
    TraceMeta meta = tiny_meta();
    meta.decode_dtype = dtype;
    std::vector<std::vector<float>> rows;
    {
      TraceRecorder rec(path, meta, steps, kDefaultCaptureBudget, 4);
      rows = record_synthetic(rec, rng, p, steps);
      rec.finish(text_of);
    }
    expect_decode_rows(TraceReader(path), rows, std::string(dtype) == "float16" ? 1e-3f : 0.0f);
  }
}

TEST(TraceRecorder, OverBudgetKeepsReductionsAndSaysSo) {
  TempDir dir;
  const std::string path = dir.file("rec.h5");
  std::mt19937 rng(3);
  const Prompt p = make_prompt(rng);
  {
    TraceRecorder rec(path, tiny_meta(), 2, 1000, 4);  // the map takes 2*4*6*6*4 = 1152 bytes
    EXPECT_FALSE(rec.meta().has_prefill_map);
    record_synthetic(rec, rng, p, 2);
    rec.finish(text_of);
  }
  TraceReader r(path);
  EXPECT_FALSE(r.meta().has_prefill_map);
  EXPECT_EQ(r.meta().capture_note,
            "prefill map of 1.1 KiB exceeds the capture budget of 1.0 KiB; kept column sums, the last 4 rows and "
            "the map pooled in 3 x 3 blocks");
  EXPECT_TRUE(r.read_prefill_map(0, 0).empty());
  // The pooled overview (a quarter of the budget: 2 x 2 cells per head) holds block means.
  for (int l = 0; l < kL; ++l)
    for (int h = 0; h < kH; ++h) {
      const PooledMap pm = r.read_prefill_pooled(l, h);
      ASSERT_EQ(pm.block, 3);
      ASSERT_EQ(pm.n, 2);
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) {
          double want = 0.0;
          for (int q = 3 * a; q < 3 * a + 3; ++q)
            for (int k = 3 * b; k < 3 * b + 3; ++k) want += p.row(l, h, q)[k] / 3.0;
          EXPECT_NEAR(pm.cells[a * 2 + b], want, 1e-6) << "layer " << l << " head " << h;
        }
    }
  EXPECT_FALSE(r.has_array("/attention/prefill"));
  EXPECT_EQ(r.read_prefill().colsum.size(), (size_t)kL * kH * kP);
}

TEST(TraceRecorder, EarlyStopAndCutStepCommitFewerSteps) {
  TempDir dir;
  const std::string path = dir.file("rec.h5");
  std::mt19937 rng(4);
  const Prompt p = make_prompt(rng);
  {
    TraceRecorder rec(path, tiny_meta(), 10);
    record_synthetic(rec, rng, p, 2);
    rec.on_token(kP + 2, 7);
    send_decode(rec, rng, kP + 2, 5);  // step 2 cut short (cancelled)
    rec.finish(text_of);
  }
  TraceReader r(path);
  EXPECT_EQ(r.meta().n_steps, 2);
  EXPECT_EQ(r.token_ids().size(), (size_t)kP + 2);
  std::vector<float> rows, lse;
  r.read_decode_step(1, rows, lse);
  EXPECT_EQ(rows.size(), (size_t)kL * kH * (kP + 2));
}

// After each completed step the temporary file on disk holds that step (flushed): a copy taken
// mid-recording is a valid HDF5 file with the steps and their count, marked incomplete.
TEST(TraceRecorder, FlushesEveryStep) {
  TempDir dir;
  const std::string path = dir.file("rec.h5");
  std::mt19937 rng(5);
  const Prompt p = make_prompt(rng);
  TraceRecorder rec(path, tiny_meta(), 10);
  record_synthetic(rec, rng, p, 2);
  const std::string copy = dir.file("copy.h5");
  testing::write_bytes(copy, testing::read_bytes(rec.writer().temp_path()));
  const hid_t f = H5Fopen(copy.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hid_t a = H5Aopen(f, "n_steps", H5P_DEFAULT);
  int n = -1;
  H5Aread(a, H5T_NATIVE_INT, &n);
  H5Aclose(a);
  EXPECT_EQ(n, 2);
  const hid_t ds = H5Dopen2(f, "/attention/decode", H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  hsize_t dims[4] = {};
  H5Sget_simple_extent_dims(space, dims, nullptr);
  EXPECT_EQ(dims[0], 2u);
  EXPECT_EQ(dims[3], (hsize_t)kP + 2);
  H5Sclose(space);
  H5Dclose(ds);
  H5Fclose(f);
  try {
    TraceReader reader(copy);
    FAIL() << "an uncommitted recording must not open as a trace";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("incomplete trace"), std::string::npos) << e.what();
  }
}

// A write error on the background thread (file-size limit standing in for a full disk) comes
// back as the writer's InputError at a later observer call or at finish(); no file is left.
TEST(TraceRecorder, BackgroundWriteErrorSurfaces) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  std::mt19937 rng(7);
  const Prompt p = make_prompt(rng);
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 12 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string message;
  try {
    TraceRecorder rec(path, tiny_meta(), 400);
    record_synthetic(rec, rng, p, 400);
    rec.finish(text_of);
  } catch (const InputError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message, path + ": cannot write trace (File too large)");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(TraceRecorder, UnwritableOutputFailsBeforeAnyCompute) {
  TempDir dir;
  EXPECT_THROW(TraceRecorder(dir.file("no/such/dir/t.h5"), tiny_meta(), 4), InputError);
  EXPECT_TRUE(dir.entries().empty());
}

TEST(TraceRecorder, ARecordingTooLargeForTheHostIsRefusedBeforeAnyFileOrCompute) {
  TempDir dir;
  TraceMeta m = tiny_meta();
  m.shape = ModelShape{32, 32, 8, 128};
  m.prompt_len = 2'000'000;  // the last 64 rows of every head over every key: 524 GB
  try {
    TraceRecorder rec(dir.file("t.h5"), m, 4);
    FAIL() << "a recording no host holds was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("prompt (2000000 tokens): needs ", 0), 0u) << what;
    EXPECT_NE(what.find(" GiB of host memory for the recording's prefill evidence and decode rows"), std::string::npos)
        << what;
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(TraceRecorder, UnfinishedRecordingLeavesNoFile) {
  TempDir dir;
  std::mt19937 rng(6);
  const Prompt p = make_prompt(rng);
  {
    TraceRecorder rec(dir.file("t.h5"), tiny_meta(), 4);
    record_synthetic(rec, rng, p, 2);
  }
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
}  // namespace kvs
