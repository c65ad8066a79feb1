// Trace writing and reading speed of decode rows (float32, the default, and float16), the
// recorder's per-step cost, at two shapes: SmolLM2-135M (30 layers x 9 heads) at ~2K tokens and
// Llama-3-8B (32 x 32) at ~8K. KVScope packs each (step, layer) chunk itself on the OpenMP threads
// and hands it to HDF5 (analysis/chunk_codec.h), or stores a float32 chunk mostly full of values
// unpacked, and reads them back the same way; the baseline is what HDF5 does by itself with the
// same filters (shuffle + deflate): one [1, L, H, T] chunk per step, compressed, converted and
// decompressed on the calling thread (the writer's layout before). Prints ms per step, MB/s of
// rows in their stored type, file size, and the speed-up over the baseline.
//
//   bench_trace_io [--steps N] [--dir DIR]     (files are written to DIR, default /tmp, and removed)
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <omp.h>

#include "analysis/float16.h"
#include "analysis/h5_util.h"
#include "analysis/trace.h"
#include "analysis/trace_schema.h"
#include "app/cli/args.h"
#include "bench/bench_args.h"
#include "inference/errors.h"

using namespace kvs;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
  const char* name;
  int L, H, P;
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Decode rows [L, H, q + 1] of one step: heavy-tailed weights (a few keys hold most of the mass,
// the rest a long noisy tail, as real heads), a sink on key 0, normalised per row.
std::vector<float> step_rows(const Shape& sh, int q, std::mt19937& rng) {
  std::exponential_distribution<float> ex(1.0f);
  const size_t n = (size_t)q + 1;
  std::vector<float> rows((size_t)sh.L * sh.H * n);
  for (size_t r = 0; r < (size_t)sh.L * sh.H; ++r) {
    float* row = rows.data() + r * n;
    double sum = 0.0;
    for (size_t k = 0; k < n; ++k) sum += row[k] = std::pow(ex(rng), 4.0f);
    row[0] += (float)(0.3 * sum);
    sum *= 1.3;
    for (size_t k = 0; k < n; ++k) row[k] = (float)(row[k] / sum);
  }
  return rows;
}

struct Timing {
  double write_s = 0, read_s = 0;
  uint64_t file_bytes = 0;
};

// Reads the file once so that both readers are timed on a file in the page cache: KVScope's
// writer leaves its rows out of it (direct writes), HDF5's writes leave them in.
void warm_page_cache(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> buf(1 << 20);
  while (f.read(buf.data(), (std::streamsize)buf.size()) || f.gcount() > 0) {
  }
}

// KVScope's writer and reader.
Timing run_kvscope(const Shape& sh, const std::string& dtype, const std::vector<std::vector<float>>& steps,
                   const std::string& path) {
  TraceMeta m;
  m.model = "bench";
  m.shape = {sh.L, sh.H, sh.H, 64};
  m.vocab_size = 32000;
  m.prompt_len = sh.P;
  m.decode_dtype = dtype;
  const int n = (int)steps.size();
  Timing t;
  {
    TraceWriter w(path, m, n);
    const std::vector<float> lse((size_t)sh.L * sh.H, 0.0f);
    const auto t0 = Clock::now();
    for (int s = 0; s < n; ++s) w.write_decode_step(s, sh.P + s, steps[s], lse);
    w.settle();  // the file driver writes in the background: timed until the bytes are in the file
    t.write_s = seconds_since(t0);
    m.n_steps = n;
    const std::vector<int32_t> ids(m.total_len(), 1);
    w.commit(m, ids, std::vector<std::string>(m.total_len(), "x"));
  }
  t.file_bytes = std::filesystem::file_size(path);
  warm_page_cache(path);
  TraceReader r(path);
  std::vector<float> rows, lse;
  const auto t0 = Clock::now();
  for (int s = 0; s < n; ++s) r.read_decode_step(s, rows, lse);
  t.read_s = seconds_since(t0);
  return t;
}

// HDF5 alone: the same rows through H5Dwrite / H5Dread with HDF5's shuffle + deflate filters (and
// its float16 -> float32 conversion on reading), one chunk per step.
Timing run_hdf5(const Shape& sh, const std::string& dtype, const std::vector<std::vector<float>>& steps,
                const std::string& path) {
  std::lock_guard<std::recursive_mutex> lock(h5::mutex());
  h5::init();
  const hsize_t n = steps.size(), L = sh.L, H = sh.H, T = sh.P + n;
  Timing t;
  {
    h5::Handle fapl = h5::file_access();
    h5::Handle file = h5::file_handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "create");
    h5::Handle f16 = h5::float16_type();
    const bool half = dtype == "float16";
    const hid_t type = half ? f16.get() : H5T_IEEE_F32LE;
    h5::Handle ds = h5::create_dataset(file, "/d", type, {0, L, H, T}, {{H5S_UNLIMITED, L, H, T}, {1, L, H, T}, 1});
    std::vector<uint16_t> halves;  // [L, H, len] converted as KVScope does; HDF5 runs the filters
    const auto t0 = Clock::now();
    for (hsize_t s = 0; s < n; ++s) {
      const hsize_t len = sh.P + s + 1;
      h5::set_extent(ds, {s + 1, L, H, T});
      if (half) {
        halves.resize(steps[s].size());
        floats_to_halves(steps[s], halves.data());
        h5::write_box(ds, f16, {s, 0, 0, 0}, {1, L, H, len}, halves.data());
      } else {
        h5::write_box(ds, H5T_NATIVE_FLOAT, {s, 0, 0, 0}, {1, L, H, len}, steps[s].data());
      }
      h5::check(H5Fflush(file, H5F_SCOPE_LOCAL), "flush");
    }
    t.write_s = seconds_since(t0);
  }
  t.file_bytes = std::filesystem::file_size(path);
  warm_page_cache(path);
  h5::Handle fapl = h5::file_access();
  h5::Handle file = h5::file_handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "open");
  h5::Handle ds = h5::open_dataset(file, "/d");
  std::vector<float> rows(L * H * T);
  const auto t0 = Clock::now();
  for (hsize_t s = 0; s < n; ++s) h5::read_box(ds, H5T_NATIVE_FLOAT, {s, 0, 0, 0}, {1, L, H, T}, rows.data());
  t.read_s = seconds_since(t0);
  return t;
}

// The table: each shape's rows written and read n_steps steps, their files under `dir`.
int run(int n_steps, const std::string& dir) {
  std::printf("trace I/O of decode rows, %d steps per shape, %d OpenMP threads\n\n", n_steps, omp_get_max_threads());
  std::printf("| shape | rows | MB of rows / step | | ms / step | MB/s | file MB | speed-up over HDF5 alone |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const Shape shapes[] = {{"SmolLM2-135M (30 x 9) at 2K", 30, 9, 2048 - n_steps},
                          {"Llama-3-8B (32 x 32) at 8K", 32, 32, 8192 - n_steps}};
  for (const Shape& sh : shapes) {
    std::mt19937 rng(7);
    std::vector<std::vector<float>> steps;
    for (int s = 0; s < n_steps; ++s) steps.push_back(step_rows(sh, sh.P + s, rng));
    for (const std::string dtype : {"float32", "float16"}) {
      double mb = 0;  // rows of all steps, in the stored type
      for (const auto& rows : steps) mb += rows.size() * (dtype == "float16" ? 2 : 4) / 1e6;
      const std::string base = dir + "/kvscope_bench_trace_io_" + std::to_string(::getpid());
      const Timing ours = run_kvscope(sh, dtype, steps, base + "_kvscope.h5");
      const Timing hdf5 = run_hdf5(sh, dtype, steps, base + "_hdf5.h5");
      std::filesystem::remove(base + "_kvscope.h5");
      std::filesystem::remove(base + "_hdf5.h5");
      const auto row = [&](const char* what, double ours_s, double hdf5_s) {
        std::printf("| %s | %s | %.1f | %s KVScope | %.1f | %.0f | %.1f | **%.1fx** |\n", sh.name, dtype.c_str(),
                    mb / n_steps, what, 1e3 * ours_s / n_steps, mb / ours_s, ours.file_bytes / 1e6, hdf5_s / ours_s);
        std::printf("| | | | %s HDF5 alone | %.1f | %.0f | %.1f | 1.0x |\n", what, 1e3 * hdf5_s / n_steps,
                    mb / hdf5_s, hdf5.file_bytes / 1e6);
      };
      row("write", ours.write_s, hdf5.write_s);
      row("read", ours.read_s, hdf5.read_s);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main("bench_trace_io", [&] {
    const kvs::Args args(std::vector<std::string>(argv + 1, argv + argc), {"--steps", "--dir"}, {});
    if (!args.positional().empty())
      throw kvs::input_error(args.positional()[0], "unexpected (usage: bench_trace_io [--steps N] [--dir DIR])");
    return run(args.integer("--steps", 8, 1, 1000), args.str("--dir", "/tmp"));
  });
}
