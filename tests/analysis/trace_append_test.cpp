// Runs and arrays added to an existing trace: written, replaced by name, read back whole or one
// step at a time; a failing append leaves the original byte for byte and no temporary file; an
// append goes through a symbolic link to its target, keeps the mode and owner, and refuses a
// read-only trace.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>

#include "analysis/trace.h"
#include "inference/errors.h"
#include "run_equal.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using testing::expect_same_run;
using testing::TempDir;

constexpr int kSteps = 3;

TraceMeta write_trace(const std::string& path) {
  TraceMeta m = testing::small_meta();
  std::mt19937 rng(11);
  TraceWriter w(path, m, kSteps);
  PrefillEvidence ev;
  ev.shape = m.shape;
  ev.prompt_len = m.prompt_len;
  ev.window = 2;
  const size_t LH = (size_t)m.shape.n_layers * m.shape.n_heads, P = m.prompt_len;
  ev.colsum.assign(LH * P, 1.0f);
  ev.window_rows.assign(LH * 2 * P, 0.25f);
  ev.window_lse.assign(LH * 2, 0.5f);
  w.write_prefill(ev, {});
  for (int s = 0; s < kSteps; ++s) testing::write_random_step(w, rng, m, s);
  m.n_steps = kSteps;
  w.commit(m, testing::token_ids(m.prompt_len + kSteps), testing::token_texts(m.prompt_len + kSteps));
  return m;
}

// A run over `steps` steps whose kept values encode (step, layer, kv head, position).
RunData make_run(const TraceMeta& m, const std::string& name, int budget, int steps, bool live) {
  const int L = m.shape.n_layers, Hkv = m.shape.n_kv_heads, H = m.shape.n_heads, T = m.total_len();
  RunData r;
  r.name = name;
  r.policy = "h2o";
  r.params_json = "{\"recent\":2}";
  r.budget = budget;
  for (int i = 0; i < steps * L * Hkv * T; ++i) r.kept.push_back((uint8_t)((i * 5 + budget) % 3));
  r.metrics.push_back({"mass_lost", {(uint64_t)steps, (uint64_t)L, (uint64_t)H}, {}});
  for (int i = 0; i < steps * L * H; ++i) r.metrics[0].data.push_back(0.01f * i);
  r.metrics.push_back({"kv_bytes", {(uint64_t)steps}, std::vector<float>(steps, 1024.0f)});
  r.scalars = {{"kl_mean", 0.125}, {"top1_agreement", 0.75}};
  if (live) {
    r.eviction = "real";
    r.mode = "free";
    r.device = "cuda";
    r.device_dtype = "bf16";
    r.tokens = testing::token_ids(T);
    r.text = "and then \xC3\xA9";
    for (int i = 0; i < steps * L * H * T; ++i) r.attention.push_back(0.001f * i);
    for (int i = 0; i < steps * L * H; ++i) r.lse.push_back(0.5f * i);
  }
  return r;
}

TEST(TraceAppend, AddsReplacesAndReadsRuns) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  const TraceMeta m = write_trace(path);
  const RunData a = make_run(m, "h2o_b4", 4, kSteps, false);
  const RunData b = make_run(m, "live_b3", 3, kSteps - 1, true);  // stopped one step early
  append_runs(path, std::vector<RunData>{a, b});
  {
    TraceReader r(path);
    EXPECT_EQ(r.run_names(), (std::vector<std::string>{"h2o_b4", "live_b3"}));
    expect_same_run(r.read_run("h2o_b4", true), a, true);
    expect_same_run(r.read_run("live_b3", true), b, true);
    expect_same_run(r.read_run("live_b3", false), b, false);
    EXPECT_EQ(r.run_steps("live_b3"), kSteps - 1);
    const size_t cell = (size_t)m.shape.n_layers * m.shape.n_kv_heads * m.total_len();
    std::vector<uint8_t> kept;
    r.read_run_kept_step("h2o_b4", 1, kept);
    EXPECT_EQ(kept, std::vector<uint8_t>(a.kept.begin() + cell, a.kept.begin() + 2 * cell));
    r.read_run_kept_step("live_b3", kSteps - 1, kept);
    EXPECT_EQ(kept, std::vector<uint8_t>(cell, 0)) << "steps past a run's end read as absent";
    std::vector<float> rows, lse;
    r.read_run_attention_step("live_b3", 1, rows, lse);
    const size_t row_cell = (size_t)m.shape.n_layers * m.shape.n_heads * m.total_len();
    EXPECT_EQ(rows, std::vector<float>(b.attention.begin() + row_cell, b.attention.begin() + 2 * row_cell));
    EXPECT_EQ(lse.size(), (size_t)m.shape.n_layers * m.shape.n_heads);
    r.read_run_attention_step("h2o_b4", 1, rows, lse);
    EXPECT_TRUE(rows.empty());
    EXPECT_THROW(r.read_run("nope", false), InputError);
    EXPECT_THROW(r.read_run_kept_step("h2o_b4", kSteps, kept), std::out_of_range);
  }
  const RunData a2 = make_run(m, "h2o_b4", 2, kSteps, false);
  append_runs(path, std::vector<RunData>{a2});
  TraceReader r(path);
  EXPECT_EQ(r.run_names(), (std::vector<std::string>{"h2o_b4", "live_b3"}));
  expect_same_run(r.read_run("h2o_b4", true), a2, true);
  expect_same_run(r.read_run("live_b3", true), b, true);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.h5"});
}

TEST(TraceAppend, InvalidRunLeavesTheOriginalUntouched) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  const TraceMeta m = write_trace(path);
  const std::string before = testing::read_bytes(path);
  RunData good = make_run(m, "ok", 4, kSteps, false);
  RunData bad = make_run(m, "bad", 4, kSteps, false);
  bad.kept.pop_back();
  try {
    append_runs(path, std::vector<RunData>{good, bad});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": run 'bad': kept has ", 0), 0u) << e.what();
  }
  RunData too_long = make_run(m, "long", 4, kSteps + 1, false);
  EXPECT_THROW(append_runs(path, std::vector<RunData>{too_long}), InputError);
  RunData bad_name = make_run(m, "a/b", 4, kSteps, false);
  EXPECT_THROW(append_runs(path, std::vector<RunData>{bad_name}), InputError);
  RunData reserved = make_run(m, "r", 4, kSteps, false);
  reserved.scalars.push_back({"budget", 1.0});
  EXPECT_THROW(append_runs(path, std::vector<RunData>{reserved}), InputError);
  EXPECT_THROW(append_runs(path, std::vector<RunData>{good, good}), InputError);
  EXPECT_EQ(testing::read_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.h5"});
}

TEST(TraceAppend, WriteFailureLeavesTheOriginalUntouched) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  const TraceMeta m = write_trace(path);
  const std::string before = testing::read_bytes(path);
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = old_limit;
  limit.rlim_cur = before.size() + 512;  // the copy fits, the new run does not
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string message;
  try {
    append_runs(path, std::vector<RunData>{make_run(m, "live", 4, kSteps, true)});
  } catch (const InputError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message, path + ": cannot update trace (File too large)");
  EXPECT_EQ(testing::read_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.h5"});
}

TEST(TraceAppend, ArraysAndRunsFromTheWriter) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  TraceMeta m = testing::small_meta();
  {
    std::mt19937 rng(3);
    TraceWriter w(path, m, 2);
    for (int s = 0; s < 2; ++s) testing::write_random_step(w, rng, m, s);
    m.n_steps = 2;
    w.write_run(make_run(m, "sim", 4, 2, false));
    w.commit(m, testing::token_ids(m.prompt_len + 2), testing::token_texts(m.prompt_len + 2));
  }
  append_array(path, "/layers/similarity", {"similarity", {2, 2}, {1.0f, 0.5f, 0.5f, 1.0f}}, {{"k", "8"}});
  EXPECT_THROW(append_array(path, "/attention/decode", {"x", {1}, {0.0f}}), std::invalid_argument);
  TraceReader r(path);
  expect_same_run(r.read_run("sim", true), make_run(m, "sim", 4, 2, false), true);
  EXPECT_EQ(r.read_array("/layers/similarity").data, (std::vector<float>{1.0f, 0.5f, 0.5f, 1.0f}));
  EXPECT_EQ(r.read_string_attr("/layers/similarity", "k"), "8");
  EXPECT_THROW(r.read_prefill(), InputError) << "this trace was written without prefill evidence";
}

TEST(TraceAppend, ThroughASymlinkUpdatesItsTargetAndTheLinkStays) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("store"));
  const std::string real = dir.file("store/real.h5"), link = dir.file("link.h5");
  const TraceMeta m = write_trace(real);
  std::filesystem::create_symlink("store/real.h5", link);
  append_runs(link, std::vector<RunData>{make_run(m, "h2o_b4", 4, kSteps, false)});
  append_array(link, "/heads/extra", {"extra", {2}, {1.0f, 2.0f}});
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(std::filesystem::read_symlink(link), "store/real.h5");
  TraceReader r(real);
  EXPECT_EQ(r.run_names(), std::vector<std::string>{"h2o_b4"});
  EXPECT_TRUE(r.has_array("/heads/extra"));
  std::vector<std::string> names = dir.entries();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"link.h5", "store"}));
  std::vector<std::string> stored;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("store"))) stored.push_back(e.path().filename());
  EXPECT_EQ(stored, std::vector<std::string>{"real.h5"}) << "the new file replaced the target, no copy left";
}

TEST(TraceAppend, KeepsTheTracesModeAndOwner) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  const TraceMeta m = write_trace(path);
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  const bool may_chown = ::chown(path.c_str(), 1234, 5678) == 0;  // root: another owner to keep
  struct stat before;
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  append_runs(path, std::vector<RunData>{make_run(m, "h2o_b4", 4, kSteps, false)});
  struct stat after;
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino) << "an append writes a new file";
  EXPECT_EQ(after.st_mode & 07777, 0640u);
  if (may_chown) {
    EXPECT_EQ(after.st_uid, 1234u);
    EXPECT_EQ(after.st_gid, 5678u);
  }
  EXPECT_EQ(TraceReader(path).run_names(), std::vector<std::string>{"h2o_b4"});
}

TEST(TraceAppend, ReadOnlyTraceIsRefusedEvenForRoot) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  const TraceMeta m = write_trace(path);
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  const std::string before = testing::read_bytes(path);
  const std::string expected = path + ": is read-only (its owner has no write permission); not changing it";
  for (int i = 0; i < 3; ++i) {
    try {
      if (i == 0) append_runs(path, std::vector<RunData>{make_run(m, "h2o_b4", 4, kSteps, false)});
      if (i == 1) append_array(path, "/heads/extra", {"extra", {1}, {1.0f}});
      if (i == 2) check_appendable(path);
      ADD_FAILURE() << "no error (" << i << ")";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), expected);
    }
  }
  EXPECT_EQ(testing::read_bytes(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.h5"});
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  EXPECT_NO_THROW(check_appendable(path));
}

TEST(TraceAppend, NotATraceIsAnInputError) {
  TempDir dir;
  const std::string path = dir.file("x.h5");
  testing::write_bytes(path, "plain text");
  EXPECT_THROW(append_runs(path, std::vector<RunData>{}), InputError);
  EXPECT_EQ(testing::read_bytes(path), "plain text");
}

}  // namespace
}  // namespace kvs
