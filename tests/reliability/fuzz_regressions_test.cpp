// Replays every kept fuzz input (tests/fuzz/regressions/<target>/*, the inputs that once crashed,
// and the seed corpora tests/fuzz/corpus/<target>/*) through the fuzz targets' own entry points.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/fuzz/fuzz_entries.h"

namespace kvs {
namespace {

namespace fs = std::filesystem;

// Feeds every file of <root>/<target>/ to the target's entry; returns the number of files.
int replay_folder(const std::string& root) {
  int n = 0;
  for (const auto& e : fuzz::all_entries()) {
    const fs::path dir = fs::path(root) / e.name;
    if (!fs::is_directory(dir)) continue;
    for (const auto& f : fs::directory_iterator(dir)) {
      std::ifstream in(f.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), {});
      SCOPED_TRACE(f.path().string());
      EXPECT_NO_THROW(e.fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
      ++n;
    }
  }
  return n;
}

TEST(FuzzRegressions, CrashingInputsAreRejectedCleanly) {
  const std::string root = KVSCOPE_SOURCE_DIR "/tests/fuzz/regressions";
  if (replay_folder(root) == 0) GTEST_SKIP() << "no regression inputs in " << root;
}

TEST(FuzzRegressions, SeedCorporaParse) {
  EXPECT_GT(replay_folder(KVSCOPE_SOURCE_DIR "/tests/fuzz/corpus"), 10);
}

// fuzz_trace_bytes: a run's "kept" dataset declaring chunks larger than its fixed extent made HDF5 read
// past its chunk buffer; the reader now refuses it with InputError.
TEST(FuzzRegressions, TraceChunkLargerThanDatasetIsAnInputError) {
  const std::string path = KVSCOPE_SOURCE_DIR "/tests/fuzz/regressions/trace_bytes/chunk-larger-than-dataset.h5";
  TraceReader r(path);
  std::vector<uint8_t> kept;  // [L, Hkv, T]
  bool rejected = false;
  for (const std::string& name : r.run_names()) {
    try {
      r.read_run_kept_step(name, 0, kept);
    } catch (const InputError& e) {
      rejected = true;
      EXPECT_NE(std::string(e.what()).find("chunk dimension"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(rejected);
}

// fuzz_trace_bytes: a chunk index claiming a 4 GiB chunk made HDF5 allocate it while reading the
// prefill column sums; the reader now refuses chunks larger than the file with InputError.
TEST(FuzzRegressions, TraceChunkIndexLargerThanFileIsAnInputError) {
  const std::string path = KVSCOPE_SOURCE_DIR "/tests/fuzz/regressions/trace_bytes/chunk-index-claims-4gb.h5";
  try {
    TraceReader r(path);
    (void)r.read_prefill();
    ADD_FAILURE() << "read_prefill accepted " << path;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("more than the file's"), std::string::npos) << e.what();
  }
}

// Every target has an entry and a fuzz target source file.
TEST(FuzzRegressions, EveryEntryHasATarget) {
  for (const auto& e : fuzz::all_entries())
    EXPECT_TRUE(fs::exists(fs::path(KVSCOPE_SOURCE_DIR "/tests/fuzz") / ("fuzz_" + std::string(e.name) + ".cpp")))
        << e.name;
}

}  // namespace
}  // namespace kvs
