// Crash safety and bad files: no file without commit, unwritable folders, files that are not
// traces left alone, write errors (a file size limit standing in for a full disk), and every kind
// of file or value the reader must refuse.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>

#include "analysis/policy.h"
#include "analysis/simulator.h"
#include "analysis/trace.h"
#include "inference/errors.h"
#include "decode_trace_fixture.h"
#include "trace_test_util.h"

namespace kvs {
namespace {

using testing::TempDir;

PrefillEvidence flat_evidence(const TraceMeta& m) {
  PrefillEvidence ev;
  ev.shape = m.shape;
  ev.prompt_len = m.prompt_len;
  ev.window = m.prompt_len;
  const size_t LH = (size_t)m.shape.n_layers * m.shape.n_heads, P = m.prompt_len;
  ev.colsum.assign(LH * P, 1.0f);
  ev.window_rows.assign(LH * P * P, 0.5f);
  ev.window_lse.assign(LH * P, 0.0f);
  return ev;
}

// A complete trace with `steps` decode steps.
void write_trace(const std::string& path, int steps, TraceMeta m = testing::small_meta()) {
  std::mt19937 rng(7);
  TraceWriter w(path, m, steps);
  w.write_prefill(flat_evidence(m), {});
  for (int s = 0; s < steps; ++s) testing::write_random_step(w, rng, m, s);
  m.n_steps = steps;
  w.commit(m, testing::token_ids(m.prompt_len + steps), testing::token_texts(m.prompt_len + steps));
}

// Message of the InputError TraceReader throws for `path` ("" when it opens).
std::string reader_error(const std::string& path) {
  try {
    TraceReader r(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Rewrites one integer root attribute with the HDF5 C API.
void set_root_int(const std::string& path, const char* name, long long value) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(f, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_LLONG, &value);
  H5Aclose(a);
  H5Sclose(space);
  H5Fclose(f);
}

TEST(TraceWriterSafety, DestructorWithoutCommitLeavesNoFile) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  {
    TraceMeta m = testing::small_meta();
    TraceWriter w(path, m, 3);
    std::mt19937 rng(1);
    testing::write_random_step(w, rng, m, 0);
    EXPECT_TRUE(std::filesystem::exists(w.temp_path()));
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(TraceWriterSafety, MissingFolderIsAnInputErrorAndLeavesNoFile) {
  TempDir dir;
  const std::string path = dir.file("missing/t.h5");
  try {
    TraceWriter w(path, testing::small_meta(), 3);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": cannot create trace (No such file or directory)");
  }
  EXPECT_TRUE(dir.entries().empty());
}

std::string create_error(const std::string& path) {
  try {
    TraceWriter w(path, testing::small_meta(), 3);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A folder without its owner's write bit is refused on the mode bits, for root too (as root the
// OS would let the write through: the shared models' folders are 555).
TEST(TraceWriterSafety, ReadOnlyFolderIsAnInputErrorAndLeavesNoFile) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path.c_str(), 0555), 0);
  const std::string path = dir.file("t.h5");
  EXPECT_EQ(create_error(path), path + ": is in the read-only folder " + dir.path +
                                    " (its owner has no write permission); not writing into it");
  EXPECT_TRUE(dir.entries().empty());
  ::chmod(dir.path.c_str(), 0755);
}

// A folder writable by its owner but not by the caller is the OS's to refuse. The attempt runs in
// a child process that has dropped from root to user "nobody" (65534).
TEST(TraceWriterSafety, FolderOfAnotherUserIsAnInputErrorAndLeavesNoFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path.c_str(), 0755), 0);
  const std::string path = dir.file("t.h5");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    const std::string m = create_error(path);
    const bool ok = ::write(fds[1], m.data(), m.size()) == (ssize_t)m.size();
    ::_exit(ok ? 0 : 4);
  }
  ::close(fds[1]);
  std::string message;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) message.append(buf, (size_t)n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(message, path + ": cannot create trace (Permission denied)");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(TraceWriterSafety, OutputThatIsAFolderIsAnInputError) {
  TempDir dir;
  EXPECT_THROW(TraceWriter(dir.path, testing::small_meta(), 3), InputError);
  EXPECT_TRUE(dir.entries().empty());
}

// A model, tokenizer or prompt file given as the output by mistake stays as it was; an earlier
// trace and an empty file are replaced.
TEST(TraceWriterSafety, ExistingFileThatIsNotATraceIsNotReplaced) {
  TempDir dir;
  const std::string weights = dir.file("model.bin"), old_trace = dir.file("old.h5"), empty = dir.file("empty.h5");
  testing::write_bytes(weights, std::string("\x07\x00\x00\x00weights", 11));
  try {
    TraceWriter w(weights, testing::small_meta(), 1);
    FAIL() << "replaced a file that is not a trace";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              weights + ": exists and is not an HDF5 trace; not replacing it (remove it or choose another name)");
  }
  EXPECT_EQ(testing::read_bytes(weights), std::string("\x07\x00\x00\x00weights", 11));
  write_trace(old_trace, 1);
  write_trace(old_trace, 2);
  EXPECT_EQ(TraceReader(old_trace).meta().n_steps, 2);
  testing::write_bytes(empty, "");
  write_trace(empty, 1);
  EXPECT_EQ(TraceReader(empty).meta().n_steps, 1);
  std::vector<std::string> names = dir.entries();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"empty.h5", "model.bin", "old.h5"}));
}

// A file-size limit makes writes fail like a full disk does (EFBIG instead of ENOSPC).
TEST(TraceWriterSafety, WriteErrorMidRecordingRemovesTheTemporaryFile) {
  TempDir dir;
  const std::string path = dir.file("big.h5");
  TraceMeta m = testing::small_meta(4, 8, 4, 200);
  std::mt19937 rng(2);
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 256 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string message;
  {
    TraceWriter w(path, m, 100);
    try {
      for (int s = 0; s < 100; ++s) testing::write_random_step(w, rng, m, s);
    } catch (const InputError& e) {
      message = e.what();
    }
    EXPECT_TRUE(dir.entries().empty()) << "temporary file removed at the error";
    EXPECT_THROW(testing::write_random_step(w, rng, m, 0), std::exception);
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message, path + ": cannot write trace (File too large)");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(TraceReaderRejects, MissingFile) {
  TempDir dir;
  EXPECT_EQ(reader_error(dir.file("none.h5")), dir.file("none.h5") + ": no such file");
}

// A FIFO (or any file that is not regular) is refused before anything opens it: the open would
// block until a writer came.
TEST(TraceReaderRejects, FifoWithoutOpeningIt) {
  TempDir dir;
  const std::string path = dir.file("pipe.h5");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(reader_error(path), path + ": not a regular file");
}

TEST(TraceReaderRejects, NonHdf5File) {
  TempDir dir;
  const std::string path = dir.file("text.h5");
  testing::write_bytes(path, "this is not a trace\n");
  EXPECT_EQ(reader_error(path), path + ": not an HDF5 file");
  testing::write_bytes(path, "");
  EXPECT_EQ(reader_error(path), path + ": not an HDF5 file");
}

TEST(TraceReaderRejects, Hdf5WithoutFormatAttribute) {
  TempDir dir;
  const std::string path = dir.file("plain.h5");
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  const hsize_t n = 4;
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t ds = H5Dcreate2(f, "data", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dclose(ds);
  H5Sclose(space);
  H5Fclose(f);
  EXPECT_EQ(reader_error(path), path + ": not a kvscope trace");
}

TEST(TraceReaderRejects, WrongFormatName) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  write_trace(path, 1);
  set_root_int(path, "format", 3);  // a number where the string should be
  EXPECT_EQ(reader_error(path), path + ": not a kvscope trace");
}

TEST(TraceReaderRejects, NewerSchema) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  write_trace(path, 2);
  set_root_int(path, "schema_version", 7);
  EXPECT_EQ(reader_error(path), path + ": trace schema 7 is newer than this KVScope (1)");
}

TEST(TraceReaderRejects, IncompleteRecording) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  write_trace(path, 2);
  set_root_int(path, "complete", 0);
  EXPECT_NE(reader_error(path).find("incomplete trace"), std::string::npos);
}

TEST(TraceReaderRejects, ShapesThatDisagreeWithTheAttributes) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  write_trace(path, 3);
  set_root_int(path, "n_steps", 2);
  EXPECT_EQ(reader_error(path), path + ": /tokens/ids has shape [8], expected [7]");
  set_root_int(path, "n_steps", 3);
  set_root_int(path, "n_layers", 4000);  // would be a huge read if trusted
  EXPECT_EQ(reader_error(path), path + ": /attention/decode has shape [3,2,4,8], expected [3,4000,4,8]");
  set_root_int(path, "n_layers", 1 << 30);
  EXPECT_EQ(reader_error(path), path + ": root attribute n_layers = 1073741824 is outside 1..4096");
  set_root_int(path, "n_layers", 2);
  EXPECT_EQ(reader_error(path), "");
}

TEST(TraceReaderRejects, MissingDataset) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  write_trace(path, 2);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(H5Ldelete(f, "/tokens/text", H5P_DEFAULT), 0);
  H5Fclose(f);
  EXPECT_EQ(reader_error(path), path + ": missing dataset /tokens/text");
}

TEST(TraceReaderRejects, TruncatedFiles) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  write_trace(path, 6, testing::small_meta(2, 4, 2, 40));
  const std::string bytes = testing::read_bytes(path);
  ASSERT_GT(bytes.size(), 4096u);
  const std::string cut = dir.file("cut.h5");
  for (size_t len : {bytes.size() / 2, bytes.size() / 8, bytes.size() * 7 / 8, bytes.size() - 1, (size_t)100,
                     (size_t)8}) {
    testing::write_bytes(cut, bytes.substr(0, len));
    const std::string message = reader_error(cut);
    EXPECT_EQ(message.rfind(cut + ": ", 0), 0u) << "cut at " << len << ": " << message;
  }
}

TEST(TraceReaderRejects, TamperedPooledMapBlock) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  TraceMeta m = testing::small_meta();  // P = 5
  {
    PrefillEvidence ev = flat_evidence(m);
    ev.pool_block = 2;
    ev.n_pool = 3;
    ev.pooled.assign((size_t)m.shape.n_layers * m.shape.n_heads * 9, 0.25f);
    TraceWriter w(path, m, 0);
    w.write_prefill(ev, {});
    w.commit(m, testing::token_ids(5), testing::token_texts(5));
  }
  ASSERT_EQ(reader_error(path), "");
  EXPECT_EQ(TraceReader(path).read_prefill_pooled(1, 3).cells, std::vector<float>(9, 0.25f));
  auto set_block = [&](long long value) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, "/attention/prefill_pooled", H5P_DEFAULT);
    const hid_t a = H5Aopen(d, "block", H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_LLONG, &value);
    H5Aclose(a);
    H5Dclose(d);
    H5Fclose(f);
  };
  set_block(0);
  EXPECT_EQ(reader_error(path), path + ": /attention/prefill_pooled has block 0 for a prompt of 5 (want 1..5)");
  set_block(1);  // 5 x 5 cells expected
  EXPECT_EQ(reader_error(path), path + ": /attention/prefill_pooled has shape [2,4,3,3], expected [2,4,5,5]");
}

TEST(TraceReaderRejects, TamperedQueryPositions) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  write_trace(path, 2);
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  const hid_t ds = H5Dopen2(f, "/attention/decode_query_pos", H5P_DEFAULT);
  const int32_t bad[2] = {5, 1000};
  H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, bad);
  H5Dclose(ds);
  H5Fclose(f);
  EXPECT_EQ(reader_error(path), path + ": /attention/decode_query_pos holds position 1000 outside 0..6");
}

// Policies read decode rows as probabilities: a NaN, a negative value or a log-sum-exp that is
// not finite in a damaged trace is an error naming the step, layer, head and key.
TEST(TraceReaderRejects, DecodeValuesThatAreNotProbabilities) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  const auto set_value = [&](const char* dataset, std::vector<hsize_t> at, float v) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, dataset, H5P_DEFAULT);
    const hid_t space = H5Dget_space(ds);
    std::vector<hsize_t> one(at.size(), 1);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, at.data(), nullptr, one.data(), nullptr);
    const hid_t mem = H5Screate_simple((int)one.size(), one.data(), nullptr);
    EXPECT_GE(H5Dwrite(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, &v), 0);
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(ds);
    H5Fclose(f);
  };
  const auto step_error = [&](int step) -> std::string {
    TraceReader r(path);
    std::vector<float> rows, lse;
    try {
      r.read_decode_step(step, rows, lse);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  write_trace(path, 2);
  EXPECT_EQ(step_error(1), "");
  set_value("/attention/decode", {1, 1, 2, 3}, std::nanf(""));
  EXPECT_EQ(step_error(1), path + ": /attention/decode step 1 layer 1 head 2 key 3 holds nan, not a probability");
  EXPECT_EQ(step_error(0), "");
  write_trace(path, 2);
  set_value("/attention/decode", {0, 0, 0, 0}, -0.5f);
  EXPECT_EQ(step_error(0), path + ": /attention/decode step 0 layer 0 head 0 key 0 holds -0.500000, not a probability");
  // Values that are each a probability but a row that is no distribution: key 0 set to 1 (the
  // row's other keys hold more than 1e-2, so it sums to more than 1.01).
  write_trace(path, 2);
  set_value("/attention/decode", {1, 0, 1, 0}, 1.0f);
  const std::string sum_error = step_error(1);
  EXPECT_NE(sum_error.find(path + ": /attention/decode step 1 layer 0 head 1 sums to "), std::string::npos)
      << sum_error;
  EXPECT_NE(sum_error.find(", not 1 (not an attention row)"), std::string::npos) << sum_error;
  write_trace(path, 2);
  set_value("/attention/decode_lse", {1, 0, 3}, INFINITY);
  EXPECT_EQ(step_error(1), path + ": /attention/decode_lse step 1 layer 0 head 3 is not finite");
}

// A trace without the prompt's reductions (an external writer may leave them out) still runs the
// policies that read none; one that reads them says what it lacks.
TEST(TraceReaderRejects, OnlyPoliciesThatReadThePromptNeedItsReductions) {
  TempDir dir;
  const test::DecodeTrace t = test::write_decode_trace(dir.file("t.h5"), 2, 4, 2, 6, 4, 5);
  const TraceReader trace(t.path);
  ASSERT_FALSE(trace.has_prefill_evidence());
  for (const char* spec : {"full", "window", "streamingllm", "strided"}) {
    auto policy = make_policy(parse_policy_spec(spec, 4), trace.meta().shape);
    EXPECT_EQ(simulate(trace, *policy, {}).kept.size(), (size_t)4 * 2 * 2 * 10) << spec;
  }
  auto h2o = make_policy(parse_policy_spec("h2o", 4), trace.meta().shape);
  try {
    simulate(trace, *h2o, {});
    FAIL() << "h2o ran without the prompt's column sums";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--policy h2o: needs the prompt's attention column sums (the trace holds no prefill reductions)");
  }
}

// With no decode step there is nothing to measure a policy on.
TEST(TraceReaderRejects, SimulatingATraceWithoutDecodeSteps) {
  TempDir dir;
  const std::string path = dir.file("t.h5");
  write_trace(path, 0);
  const TraceReader trace(path);
  auto policy = make_policy(parse_policy_spec("h2o", 4), trace.meta().shape);
  try {
    simulate(trace, *policy, {});
    FAIL() << "simulated a trace without decode steps";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": no decode steps to run policies over");
  }
}

}  // namespace
}  // namespace kvs
