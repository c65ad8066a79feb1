// Helpers shared by the trace and recorder tests: a scratch folder, a small model shape, and
// synthetic softmax rows.
#pragma once
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "analysis/trace.h"

namespace kvs::testing {

// A fresh folder under /tmp, removed with everything in it.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kvs_trace_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path)) names.push_back(e.path().filename().string());
    return names;
  }
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), (std::streamsize)bytes.size());
}

inline TraceMeta small_meta(int L = 2, int H = 4, int Hkv = 2, int P = 5) {
  TraceMeta m;
  m.writer_version = "test";
  m.model = "synthetic";
  m.model_path = "/models/synthetic.bin";
  m.arch = "llama";
  m.shape = {L, H, Hkv, 8};
  m.vocab_size = 32;
  m.prompt_len = P;
  m.prompt = "Once upon a time";
  return m;
}

// Softmax over `n` random logits; also returns their log-sum-exp.
inline std::vector<float> softmax(std::mt19937& rng, int n, float* lse = nullptr) {
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> logits(n), p(n);
  float mx = -1e30f;
  for (float& x : logits) mx = std::max(mx, x = dist(rng));
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp((double)logits[i] - mx);
  for (int i = 0; i < n; ++i) p[i] = (float)(std::exp((double)logits[i] - mx) / sum);
  if (lse) *lse = (float)(mx + std::log(sum));
  return p;
}

// Decode rows of one step, [L, H, q + 1]: every (layer, head) a softmax over keys 0..q.
inline std::vector<float> decode_rows(std::mt19937& rng, const TraceMeta& m, int q, std::vector<float>& lse) {
  const int LH = m.shape.n_layers * m.shape.n_heads;
  std::vector<float> rows;
  lse.assign(LH, 0.0f);
  for (int i = 0; i < LH; ++i) {
    const auto row = softmax(rng, q + 1, &lse[i]);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

// Writes decode step s (query at P + s) with random rows; returns the rows [L, H, P + s + 1].
inline std::vector<float> write_random_step(TraceWriter& w, std::mt19937& rng, const TraceMeta& m, int s) {
  std::vector<float> lse;
  const std::vector<float> rows = decode_rows(rng, m, m.prompt_len + s, lse);
  w.write_decode_step(s, m.prompt_len + s, rows, lse);
  return rows;
}

inline std::vector<std::string> token_texts(int T) {
  std::vector<std::string> texts;
  for (int i = 0; i < T; ++i) {
    std::string t = "t";
    t += std::to_string(i);
    texts.push_back(i == 0 ? std::string("<s>") : i % 3 == 0 ? std::string("\xE2\x96\x81h\xC3\xA9llo") : t);
  }
  return texts;
}

inline std::vector<int32_t> token_ids(int T) {
  std::vector<int32_t> ids;
  for (int i = 0; i < T; ++i) ids.push_back(1 + (i * 7) % 31);
  return ids;
}

}  // namespace kvs::testing
