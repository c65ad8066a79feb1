// Helpers for the loader and tokenizer tests: model paths, a temporary folder, file bytes, and
// a check that a call throws InputError with a given message.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "inference/errors.h"
#include "tests/test_paths.h"

namespace kvs::testing {

inline std::string shared_model(const std::string& rel) { return test::shared_path("models/" + rel); }

// A fresh folder under /tmp, removed with its contents at destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kvscope-test-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const void* data, std::size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
}

inline void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  write_bytes(path, bytes.data(), bytes.size());
}

// Runs `fn` and returns the InputError message (fails the test when nothing is thrown).
inline std::string input_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

}  // namespace kvs::testing
