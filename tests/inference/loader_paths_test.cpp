// Paths the loaders are given that are not plain model files: FIFOs (told by stat, never opened,
// which would block) as the model, the tokenizer or a file inside a Hugging Face folder.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "inference/loader.h"
#include "loader_test_util.h"
#include "safetensors_writer.h"

namespace kvs {
namespace {

using testing::copy_side_files;
using testing::input_error_of;
using testing::shared_model;
using testing::TempDir;

void make_fifo(const std::string& path) { ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path; }

TEST(LoaderPaths, FifoAsModelOrTokenizerIsNotARegularFile) {
  TempDir dir;
  const std::string fifo = dir.file("model.gguf");
  make_fifo(fifo);
  EXPECT_EQ(input_error_of([&] { load_model(fifo); }), fifo + ": not a regular file");
  const Model m = load_model(shared_model("stories260K/stories260K.bin"));
  EXPECT_EQ(input_error_of([&] { load_tokenizer(m, fifo); }), fifo + ": not a regular file");
}

TEST(LoaderPaths, FifoInsideAHuggingFaceFolderIsNotARegularFile) {
  TempDir weights;
  copy_side_files(weights);
  make_fifo(weights.file("model.safetensors"));
  EXPECT_EQ(input_error_of([&] { load_model(weights.file("")); }),
            weights.file("model.safetensors") + ": not a regular file");
  TempDir config;
  make_fifo(config.file("config.json"));
  std::filesystem::copy_file(shared_model("stories260K-hf/model.safetensors"),
                             config.file("model.safetensors"));
  EXPECT_EQ(input_error_of([&] { load_model(config.file("")); }),
            config.file("config.json") + ": not a regular file");
}

}  // namespace
}  // namespace kvs
