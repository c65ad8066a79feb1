// Paths the loaders are given that are not plain model files: FIFOs (told by stat, never opened,
// which would block) as the model, the tokenizer or a file inside a Hugging Face folder; a folder
// the user may not read.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
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

// stat inside a folder the user may not read fails: a one-line InputError, not the internal
// "filesystem error: status: Permission denied". Root reads any folder, so as root the load runs
// in a child process that drops to nobody (65534).
TEST(LoaderPaths, UnreadableFolderIsAnInputError) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.file("").c_str(), 0755), 0);
  const std::string locked = dir.file("locked");
  std::filesystem::create_directory(locked);
  std::filesystem::copy_file(shared_model("stories260K-hf/config.json"), locked + "/config.json");
  ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
  if (::geteuid() != 0) {
    EXPECT_EQ(input_error_of([&] { load_model(locked); }),
              locked + "/config.json: cannot access (Permission denied)");
  } else {
    EXPECT_EXIT(
        {
          if (::setgid(65534) != 0 || ::setuid(65534) != 0) std::_Exit(3);
          try {
            load_model(locked);
          } catch (const InputError& e) {
            std::fprintf(stderr, "%s\n", e.what());
            std::_Exit(2);
          }
          std::_Exit(0);
        },
        ::testing::ExitedWithCode(2), "locked/config.json: cannot access \\(Permission denied\\)");
  }
  ::chmod(locked.c_str(), 0755);  // so that TempDir can remove it
}

}  // namespace
}  // namespace kvs
