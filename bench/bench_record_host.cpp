// The host's share of recording a trace beside a GPU (`kvscope record --device cuda`) on the
// Llama-3-8B shape (32 layers x 32 query heads), at long contexts: per step, the recorder takes
// each layer's 32 decode rows as the CUDA backend delivers them (TraceRecorder::on_attention_heads,
// a layer's rows together, over every key), and its writing thread writes the step into the HDF5
// trace and runs the per-step analyses (analysis/step_analyses.h: head statistics and OmniKV's
// similarity), as `kvscope record` does on a GPU. No GPU or model is needed: the rows are random,
// heavy-tailed like real heads'. Each figure is set against the GPU's hooks-off decode step at the
// memory-bandwidth limit (bench/llama8b_limit.h); above 1, a recording waits for the host whatever
// the GPU does. Printed per context: the sustained time a step (N steps, to the last one in the
// file) with the rows alone written and with the analyses too, and the analyses' own time a step.
//
//   bench_record_host [--contexts 4096,32768] [--steps 16] [--dir DIR]   (trace files in DIR, default /tmp,
//                                                                         removed)
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <omp.h>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/recorder.h"
#include "analysis/step_analyses.h"
#include "bench/bench_args.h"
#include "bench/llama8b_limit.h"
#include "inference/errors.h"
#include "inference/hooks.h"
#include "inference/model.h"

namespace {

using Clock = std::chrono::steady_clock;
using kvs::AttentionBlock;

constexpr int L = bench::kLayers8b, H = bench::kHeads8b;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Options {
  std::vector<int> contexts{4096, 32768};
  int steps = 16;
  std::string dir = "/tmp";
};

// Decode rows as the GPU leaves them in pinned memory: [copies][L, H, cap], each row over keys
// 0..cap-1 heavy-tailed (a few keys hold most of the mass), a sink on key 0, normalized over its
// first `keys` keys. Copies enough that a step's rows are read from memory, not from a cache that
// held the last step's (64 MB or more in all).
struct Rows {
  Rows(int keys, int cap) : cap(cap) {
    const std::size_t step = static_cast<std::size_t>(L) * H * cap;
    const int copies = static_cast<int>(std::max<std::size_t>(1, ((64u << 20) / 4 + step - 1) / step));
    values.resize(step * copies);
    std::mt19937 rng(5);
    std::exponential_distribution<float> ex(1.0f);
    for (std::size_t r = 0; r < static_cast<std::size_t>(L) * H; ++r) {
      float* row = values.data() + r * cap;
      double sum = 0.0;
      for (int k = 0; k < cap; ++k) row[k] = std::pow(ex(rng), 4.0f);
      for (int k = 0; k < keys; ++k) sum += row[k];
      row[0] += static_cast<float>(0.3 * sum);
      for (int k = 0; k < cap; ++k) row[k] = static_cast<float>(row[k] / (1.3 * sum));
    }
    for (int c = 1; c < copies; ++c) std::copy_n(values.begin(), step, values.begin() + c * step);
    lse.assign(static_cast<std::size_t>(L) * H, 2.0f);
    positions.resize(cap);
    std::iota(positions.begin(), positions.end(), 0);
  }
  const float* layer(int step, int l) const {
    const std::size_t per_step = static_cast<std::size_t>(L) * H * cap;
    const std::size_t copies = values.size() / per_step;
    return values.data() + (step % copies) * per_step + static_cast<std::size_t>(l) * H * cap;
  }
  int cap;
  std::vector<float> values;        // [copies, L, H, cap]
  std::vector<float> lse;           // [L, H]
  std::vector<int32_t> positions;   // [cap] the held positions 0..cap-1
};

struct Result {
  double analyses_s = 0.0;  // mean writing-thread time a step in the analyses (0: none)
  double sustained_s = 0.0; // (first step's rows to the last step in the file) / steps
};

// A recording of `steps` decode steps after a T-token prompt, the analyses on the writing thread
// when `analyses` (as kvscope record beside a GPU). The prompt's evidence is not recorded: this
// times the decode steps only.
Result record(const Options& o, int T, const Rows& rows, bool analyses) {
  kvs::TraceMeta meta;
  meta.writer_version = KVSCOPE_VERSION;
  meta.model = "bench_record_host";
  meta.arch = "llama";
  meta.shape = kvs::ModelShape{L, H, bench::kKvHeads8b, bench::kHeadDim8b};
  meta.vocab_size = 128256;
  meta.prompt_len = T;
  meta.prompt = std::to_string(T) + " tokens (none recorded)";
  meta.decode_dtype = "float32";
  meta.device = "cuda";
  const std::string path = o.dir + "/kvscope-bench-record-" + std::to_string(getpid()) + ".h5";
  kvs::StepAnalyses step_analyses(meta.shape, T);
  std::atomic<double> analyses_s{0.0};
  Result r;
  {
    kvs::TraceRecorder rec(path, meta, o.steps, kvs::kDefaultCaptureBudget, 1);
    if (analyses) {
      rec.on_step = [&](int, int q_pos, std::span<const float> step_rows, std::span<const float> lse) {
        const auto t0 = Clock::now();
        step_analyses.add(q_pos, step_rows, lse);
        analyses_s = analyses_s + seconds_since(t0);
      };
      rec.on_step_in_background = true;
    }
    std::vector<AttentionBlock> blocks(H);  // [H] a layer's rows
    const auto start = Clock::now();
    for (int s = 0; s < o.steps; ++s) {
      const int pos = T + s;
      for (int l = 0; l < L; ++l) {
        const float* layer = rows.layer(s, l);
        for (int h = 0; h < H; ++h)
          blocks[h] = AttentionBlock::decode_row(l, h, pos, pos + 1, rows.positions.data(),
                                                 layer + static_cast<std::size_t>(h) * rows.cap,
                                                 rows.lse.data() + static_cast<std::size_t>(l) * H + h);
        rec.on_attention_heads(blocks);
      }
    }
    rec.writer();  // the steps still queued, into the file
    r.sustained_s = seconds_since(start) / o.steps;
  }  // unfinished: the recorder removes its temporary file
  r.analyses_s = analyses_s / o.steps;
  return r;
}

std::vector<int> parse_contexts(const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(kvs::parse_integer("--contexts", item, 2, 1 << 17));
  if (out.empty()) throw kvs::input_error("--contexts", "expected comma-separated lengths");
  return out;
}

int run(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw kvs::input_error(a, "expected a value after it");
    const std::string v = argv[++i];
    if (a == "--contexts")
      o.contexts = parse_contexts(v);
    else if (a == "--steps")
      o.steps = kvs::parse_integer("--steps", v, 1, 10000);
    else if (a == "--dir")
      o.dir = v;
    else
      throw kvs::input_error(a, "unknown flag (--contexts, --steps, --dir)");
  }
  if (!std::filesystem::is_directory(o.dir)) throw kvs::input_error("--dir", o.dir + " is not a directory");
  std::printf("host time of a recorded decode step beside a GPU, Llama-3-8B shape (32 layers x 32 heads), float32 "
              "rows, %d steps, OpenMP threads: %d, trace in %s\n\n",
              o.steps, omp_get_max_threads(), o.dir.c_str());
  std::printf("| context | MB of rows / step | GPU step at the limit, ms "
              "| rows written: ms / step, MB/s, ÷ GPU step "
              "| + analyses: ms / step, ÷ GPU step (keep below 1) | analyses alone, ms / step |\n"
              "|---|---|---|---|---|---|\n");
  for (int T : o.contexts) {
    const Rows rows(T + o.steps, T + o.steps);
    const Result plain = record(o, T, rows, false);
    const Result full = record(o, T, rows, true);
    const double gpu = bench::gpu_step_at_limit(T + o.steps / 2);
    const double mb = 4.0 * L * H * (T + o.steps / 2) / 1e6;
    std::printf("| %d | %.1f | %.2f | %.2f, %.0f, %.2f | %.2f, %.2f | %.2f |\n", T, mb, 1e3 * gpu,
                1e3 * plain.sustained_s, mb / plain.sustained_s, plain.sustained_s / gpu, 1e3 * full.sustained_s,
                full.sustained_s / gpu, 1e3 * full.analyses_s);
    std::fflush(stdout);
  }
  std::printf("\nThe GPU step is the hooks-off limit: (%.2f GB of weights + %.0f KB of K/V a position) / %.2f TB/s.\n"
              "The engine's thread copies each layer's rows into the step; a writing thread writes the step and\n"
              "another runs the analyses, each while the next steps decode. The copy of the rows from the GPU into\n"
              "pinned memory is not counted here. Rows written at the GPU's pace need the trace's disk to take\n"
              "MB of rows / step ÷ the GPU step; where it cannot, a recording runs at the disk's pace.\n",
              bench::kWeightBytes8b / 1e9, bench::kKvBytesPerPosition8b / 1e3, bench::kCopyBandwidth / 1e12);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::run_main("bench_record_host", [&] { return run(argc, argv); }); }
