// Cross-check of the block decoders against gguf-py (the `gguf` PyPI package, llama.cpp's own
// Python reader): random Q2_K..Q6_K, IQ4_XS, Q5_0, Q5_1 and IQ4_NL tensors in a GGUF file, read
// by GgufFile and by
// tests/python/dequantize_gguf.py, must give the same weights. Skips when the wheel that
// scripts/install-deps.sh caches (in $KVSCOPE_WHEELS, default ~/.cache/kvscope/wheels) is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gguf_writer.h"
#include "inference/gguf_file.h"
#include "quant_blocks.h"
#include "tests/run_command.h"
#include "tests/test_paths.h"

namespace kvs {
namespace {

namespace fs = std::filesystem;

// Path of the cached gguf wheel (a pure-Python wheel works on PYTHONPATH), "" when absent.
std::string gguf_wheel() {
  const char* env = std::getenv("KVSCOPE_WHEELS");
  const char* home = std::getenv("HOME");
  const fs::path dir = env && *env ? fs::path(env)
                                   : fs::path(home ? home : "") / ".cache" / "kvscope" / "wheels";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("gguf-") && name.ends_with(".whl")) return e.path().string();
  }
  return "";
}

// The raw float32 values [file size / 4] of `path`; empty when it cannot be read.
std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(in ? static_cast<std::size_t>(in.tellg()) / sizeof(float) : 0);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

TEST(GgufPyQuant, DecodersMatchGgufPy) {
  const std::string wheel = gguf_wheel();
  if (wheel.empty()) GTEST_SKIP() << "no gguf wheel cached (scripts/install-deps.sh fetches it)";
  if (std::system("/usr/bin/python3 -c 'import numpy, yaml' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 lacks numpy or yaml (gguf-py needs both)";

  // 40 rows of 512 weights per format; fp16 factors over the whole finite range, subnormals
  // included, and every other byte random.
  const uint64_t cols = 512, rows = 40;
  std::mt19937 rng(2024);
  testing::TempDir dir;
  testing::GgufWriter w;
  const auto& formats = testing::mixed_formats();
  for (const testing::BlockFormat& f : formats)
    w.add_tensor(f.name, {cols, rows}, f.type, testing::random_blocks(f, cols * rows / f.weights, rng, 30));
  const std::string path = dir.file("kquants.gguf");
  w.write(path);
  const std::string out_dir = dir.file("py");
  fs::create_directory(out_dir);
  const std::string out =
      test::run_command("PYTHONPATH='" + wheel + "' /usr/bin/python3 " +
          test::source_path("tests/python/dequantize_gguf.py") + " '" + path + "' '" + out_dir + "'");
  ASSERT_NE(out.find("OK " + std::to_string(formats.size())), std::string::npos) << out;

  GgufFile g(path);
  for (const testing::BlockFormat& f : formats) {
    const std::vector<float> ours = g.read_f32(*g.find_tensor(f.name));
    const std::vector<float> theirs = read_f32_file(out_dir + "/" + f.name + ".f32");
    ASSERT_EQ(ours.size(), cols * rows) << f.name;
    ASSERT_EQ(theirs.size(), cols * rows) << f.name;
    // Bit for bit. Q3_K, Q6_K and IQ4_XS round (d*sc)*q in the same order on both sides; in the
    // formats with a min, an fp16 factor (11 significant bits) times a scale of at most six bits
    // times a quant of at most five is exact in fp32, so a fused multiply-add rounds like numpy.
    for (std::size_t i = 0; i < ours.size(); ++i) {
      ASSERT_TRUE(std::isfinite(ours[i])) << f.name << " weight " << i;
      ASSERT_EQ(ours[i], theirs[i]) << f.name << " weight " << i;
    }
  }
}

}  // namespace
}  // namespace kvs
