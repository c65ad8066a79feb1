// Robustness: byte-level corruptions of model headers (llama2.c, GGUF, safetensors, tokenizer.bin)
// either load or throw InputError naming the file; never crash or throw anything else.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "inference/llama2c_tokenizer.h"
#include "inference/loader.h"
#include "loader_test_util.h"

namespace kvs {
namespace {

using testing::read_bytes;
using testing::shared_model;
using testing::TempDir;
using testing::write_bytes;

// Applies `trials` random corruptions (1-4 bytes overwritten within the first `span` bytes) to
// `original`, writes each to `path` and runs `load`.
void corrupt_and_load(const std::vector<char>& original, std::size_t span, const std::string& path,
                      int trials, const std::function<void()>& load) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<char> bytes = original;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) {
      const std::size_t at = rng() % std::min(span, bytes.size());
      bytes[at] = static_cast<char>(rng() % 2 ? rng() & 0xff : (bytes[at] ^ (1 << (rng() % 8))));
    }
    write_bytes(path, bytes);
    try {
      load();
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find(path), 0u) << "trial " << trial << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "trial " << trial << ": unexpected exception " << e.what();
    }
  }
}

TEST(LoaderCorrupt, Llama2cHeader) {
  TempDir dir;
  const std::string path = dir.file("model.bin");
  corrupt_and_load(read_bytes(shared_model("stories260K/stories260K.bin")), 28, path, 100,
                   [&] { load_model(path); });
}

TEST(LoaderCorrupt, GgufMetadataAndTensorInfos) {
  TempDir dir;
  const std::string path = dir.file("model.gguf");
  corrupt_and_load(read_bytes(shared_model("stories260K/stories260K.gguf")), 14152, path, 300, [&] {
    const Model m = load_model(path);
    load_tokenizer(m, "");
  });
}

TEST(LoaderCorrupt, SafetensorsHeaderAndConfig) {
  TempDir dir;
  const std::string hf = shared_model("stories260K-hf");
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(hf + "/" + f, dir.file(f));
  }
  const std::string path = dir.file("model.safetensors");
  corrupt_and_load(read_bytes(hf + "/model.safetensors"), 6000, path, 200,
                   [&] { load_model(dir.file("")); });
}

TEST(LoaderCorrupt, TokenizerBin) {
  TempDir dir;
  const std::string path = dir.file("tok.bin");
  corrupt_and_load(read_bytes(shared_model("stories260K/tok512.bin")), 6227, path, 200, [&] {
    const auto tok = load_llama2c_tokenizer(path);
    tok->decode(tok->encode("Once upon a time \xF0\x9F\x99\x82", true));
  });
}

}  // namespace
}  // namespace kvs
