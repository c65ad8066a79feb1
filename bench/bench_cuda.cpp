// Prefill and decode throughput of the CUDA backend at long contexts on a Llama-3-8B-shaped model
// with random weights: hooks off, decode rows copied to the host, and a whole trace recorded
// (TraceRecorder, as `kvscope record` does); decode against the GPU's memory-bandwidth limit.
// scripts/bench-hf-eager.py measures HF transformers (eager attention, output_attentions=True) on
// the same shapes and prints the same first columns, for the side-by-side in README.
//
// Usage: bench_cuda [--shape 8b|small|135m|tiny] [--contexts 1024,4096,8192,32768] [--steps 32]
//                   [--capture both|rows|trace|none] [--decode-dtype float32|float16]
//                   [--gpu-dtype fp16|bf16|fp32,...] [--overlap on|off|both] [--ops | --only-ops]
//                   [--policy SPEC]...
// --ops first times each decode kernel alone on the shape's sizes, as GB/s against the copy bandwidth;
// --only-ops does that and stops (no model: a few seconds, for a profiler to watch the kernels).
// --gpu-dtype fp16,bf16 (any list of fp16, bf16, fp32) measures each storage type on one model built
// once (an engine each). --shape 135m is SmolLM2-135M's, a model whose decode waits on kernel
// launches rather than bytes: `--gpu-dtype fp16,fp32` there says what fp32 storage, auto's choice
// for such models, costs.
// --overlap: the decode kernels launched to overlap the one before them (kernels/cuda_launch.cuh;
// on by default), or not; both: hooks-off decode is run four times, on, off, on, off, and a
// table compares the two.
// --policy SPEC (e.g. streamingllm, h2o; repeatable): also prefill and decode with that policy live
// at a budget of half the context, evicting every step (the cache controller path of `rerun
// --device cuda`; h2o reads every layer's rows, streamingllm none).
// Without a CUDA build or a GPU it prints why in one line and exits 0. --shape tiny is for checking
// the harness itself: a toy model and small probes, a run of seconds (the CPU emulation of CUDA
// runs it in the test suite as emu_bench_cuda); its numbers mean nothing.
//
// Per context T: prefill T random tokens twice (hooks off; the faster counts), each followed by
// --steps decode steps fed fixed random tokens (forced, so every mode does the same work):
// the first with hooks off, the second with an observer that copies every decode row into a
// dense host buffer ("rows": the engine's own capture cost). Then, with --capture trace or both,
// a third prefill + decode with a TraceRecorder writing an HDF5 trace under /tmp and the per-step
// analyses in the background (as kvscope record on a GPU), timed including the wait for both
// threads, and the file removed afterwards.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/parallel_for.h"
#include "analysis/policy.h"
#include "analysis/prefill_evidence.h"
#include "analysis/recorder.h"
#include "analysis/step_analyses.h"
#include "analysis/trace.h"
#include "bench/cuda_probe.h"
#include "bench/random_model.h"
#include "inference/cuda_backend.h"
#include "inference/engine.h"
#include "inference/errors.h"
#include "inference/model.h"

#ifndef KVSCOPE_VERSION
#define KVSCOPE_VERSION "unknown"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using kvs::bench::copy_bandwidth;
using kvs::bench::median;
using kvs::bench::print_gpu;
using kvs::bench::print_ops;
using kvs::bench::set_overlap;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
  std::string shape = "8b";
  std::vector<int> contexts = {1024, 4096, 8192, 32768};
  int steps = 32;
  bool rows = true;   // decode with rows copied to a host buffer
  bool trace = true;  // prefill + decode with a TraceRecorder
  std::string decode_dtype = "float32";
  std::vector<kvs::GpuDtype> gpu_dtypes = {kvs::GpuDtype::Fp16};  // weights and cache on the device
  std::string overlap = "on";  // on, off or both
  bool ops = false;       // also time the decode kernels one by one
  bool only_ops = false;  // ... and nothing else
  std::vector<std::string> policies;  // also decode with each of these live at a budget of half the context
};

// The shapes --shape names (scripts/bench-hf-eager.py has the same table).
struct Shape {
  const char* key;
  const char* name;
  int dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size;
};
constexpr Shape kShapes[] = {
    {"8b", "random Llama-3-8B-shaped", 4096, 14336, 32, 32, 8, 128, 128256},
    {"small", "random small Llama-shaped", 1024, 3584, 8, 8, 2, 128, 32000},  // the same proportions, a quick run
    {"135m", "random SmolLM2-135M-shaped", 576, 1536, 30, 9, 3, 64, 49152},   // launch-bound: fp16 against fp32
    {"tiny", "random tiny Llama-shaped", 64, 128, 2, 4, 2, 16, 256},          // the harness's own check
};

const Shape* find_shape(const std::string& key) {
  for (const Shape& s : kShapes)
    if (key == s.key) return &s;
  return nullptr;
}

constexpr const char* kUsage =
    "usage: bench_cuda [--shape 8b|small|135m|tiny] [--contexts 1024,4096,8192,32768] [--steps 32]\n"
    "                  [--capture both|rows|trace|none] [--decode-dtype float32|float16]\n"
    "                  [--gpu-dtype fp16|bf16|fp32,...] [--overlap on|off|both] [--ops | --only-ops]\n"
    "                  [--policy SPEC]...\n";

// Parses argv; on a bad argument prints why and the usage and returns false.
bool parse_options(int argc, char** argv, Options& o) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "bench_cuda: %s\n%s", msg.c_str(), kUsage);
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    }
    if (a == "--ops" || a == "--only-ops") {
      o.ops = true;
      o.only_ops = o.only_ops || a == "--only-ops";
      continue;
    }
    if (i + 1 >= argc) return fail(a + " needs a value (or is unknown)");
    const std::string v = argv[++i];
    try {
      if (a == "--shape") {
        if (!find_shape(v)) return fail("--shape: expected 8b, small, 135m or tiny, got '" + v + "'");
        o.shape = v;
      } else if (a == "--contexts") {
        o.contexts.clear();
        std::stringstream ss(v);
        for (std::string item; std::getline(ss, item, ',');) {
          std::size_t used = 0;
          const int t = std::stoi(item, &used);
          if (used != item.size() || t < 1) return fail("--contexts: '" + item + "' is not a positive integer");
          o.contexts.push_back(t);
        }
        if (o.contexts.empty()) return fail("--contexts: empty list");
      } else if (a == "--steps") {
        std::size_t used = 0;
        o.steps = std::stoi(v, &used);
        if (used != v.size() || o.steps < 1) return fail("--steps: expected a positive integer, got '" + v + "'");
      } else if (a == "--capture") {
        if (v != "both" && v != "rows" && v != "trace" && v != "none")
          return fail("--capture: expected both, rows, trace or none, got '" + v + "'");
        o.rows = v == "both" || v == "rows";
        o.trace = v == "both" || v == "trace";
      } else if (a == "--decode-dtype") {
        if (v != "float32" && v != "float16") return fail("--decode-dtype: expected float32 or float16, got '" + v + "'");
        o.decode_dtype = v;
      } else if (a == "--gpu-dtype") {
        o.gpu_dtypes.clear();
        bool all_known = true;
        std::stringstream list(v);
        for (std::string item; std::getline(list, item, ',');) {
          const auto d = kvs::parse_gpu_dtype(item);
          all_known = all_known && d && *d != kvs::GpuDtype::Auto;
          if (all_known) o.gpu_dtypes.push_back(*d);
        }
        if (!all_known || o.gpu_dtypes.empty())
          return fail("--gpu-dtype: expected fp16, bf16 or fp32 (or a comma list of them), got '" + v + "'");
      } else if (a == "--policy") {
        kvs::parse_policy_spec(v, 1);  // InputError: malformed (its parameters are checked on the model's shape)
        o.policies.push_back(v);
      } else if (a == "--overlap") {
        if (v != "on" && v != "off" && v != "both") return fail("--overlap: expected on, off or both, got '" + v + "'");
        o.overlap = v;
      } else {
        return fail("unknown argument '" + a + "'");
      }
    } catch (const kvs::InputError& e) {
      return fail(e.what());
    } catch (const std::exception&) {  // std::stoi
      return fail(a + ": '" + v + "' is not a number");
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The model: Llama-3-8B's shape (or a small one), random weights, built in host memory

kvs::ModelConfig config_for(const Options& o) {
  const Shape& s = *find_shape(o.shape);  // parse_options checked it
  kvs::ModelConfig c;
  c.arch = "llama";
  c.name = s.name;
  c.dim = s.dim;
  c.hidden_dim = s.hidden_dim;
  c.n_layers = s.n_layers;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads;
  c.head_dim = s.head_dim;
  c.vocab_size = s.vocab_size;
  c.rope_theta = 500000.0f;
  c.rms_eps = 1e-5f;
  c.rope_style = kvs::RopeStyle::RotateHalf;
  c.tied_classifier = false;
  c.seq_len = *std::max_element(o.contexts.begin(), o.contexts.end()) + o.steps + 16;
  return c;
}

// Bytes the bandwidth probe copies: 2 GiB, far past L2; 16 MiB for the tiny shape.
std::size_t probe_bytes(const Options& o) { return o.shape == "tiny" ? std::size_t{16} << 20 : std::size_t{2} << 30; }

uint64_t parameter_count(const kvs::ModelConfig& c) {
  const uint64_t d = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim(), V = c.vocab_size;
  const uint64_t per_layer = q * d + 2 * kv * d + d * q + 3 * h * d + 2 * d;
  return V * d * (c.tied_classifier ? 1 : 2) + c.n_layers * per_layer + d;
}

// Bytes of one stored value: 2 (fp16, bf16) or 4 (fp32).
double stored_bytes(kvs::GpuDtype d) { return d == kvs::GpuDtype::Fp32 ? 4.0 : 2.0; }

// Bytes a decoded token reads from the weights stored as d: every matrix and the classifier. The
// embedding table (untied) is left out, since a token reads one row of it; norms are fp32 on the
// device. (2 bytes x every parameter, the brief's first estimate, is printed beside it.)
double weight_bytes_read(const kvs::ModelConfig& c, kvs::GpuDtype d) {
  const double dim = c.dim, h = c.hidden_dim, q = c.q_dim(), kv = c.kv_dim(), V = c.vocab_size;
  const double matrices = c.n_layers * (q * dim + 2 * kv * dim + dim * q + 3 * h * dim) + V * dim;
  const double norms = (2.0 * c.n_layers + 1) * dim;
  return stored_bytes(d) * matrices + 4.0 * norms;
}

// K and V bytes of one position over all layers and KV heads, stored as d.
double kv_entry_bytes(const kvs::ModelConfig& c, kvs::GpuDtype d) {
  return 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * stored_bytes(d);
}

// MemAvailable of /proc/meminfo in bytes, 0 when unknown.
double host_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (f >> key >> kib) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return 0.0;
}

// ---------------------------------------------------------------------------------------------
// Observers and runs

// Copies every decode row into a dense [layers, heads, seq_len] host buffer (reused per step),
// as the recorder assembles a step (a layer's long rows on several threads): the capture cost
// inside the engine's thread, without writing anything. Only attached after a hooks-off prefill.
class RowSink : public kvs::AttentionObserver {
 public:
  explicit RowSink(const kvs::ModelConfig& c)
      : heads_(c.n_heads), width_(c.seq_len),
        rows_(static_cast<std::size_t>(c.n_layers) * c.n_heads * c.seq_len, 0.0f) {}
  void on_attention(const kvs::AttentionBlock& b) override {
    if (!b.decode) return;
    float* row = rows_.data() + (static_cast<std::size_t>(b.layer) * heads_ + b.head) * width_;
    if (b.n_keys == b.q_pos0 + 1 && b.key(0) == 0 && b.key(b.n_keys - 1) == b.q_pos0) {
      std::memcpy(row, b.probs, static_cast<std::size_t>(b.n_keys) * sizeof(float));  // every key: as TraceRecorder
    } else {
      for (int j = 0; j < b.n_keys; ++j) row[b.key(j)] = b.probs[j];
    }
  }
  void on_attention_heads(std::span<const kvs::AttentionBlock> heads) override {
    const bool wide = !heads.empty() && heads[0].n_keys >= kvs::TraceRecorder::kDefaultParallelRowKeys;
    kvs::parallel_for(static_cast<int>(heads.size()), [&](int i) { on_attention(heads[i]); }, wide);
  }
  kvs::PrefillNeed prefill_need() const override { return {false, 1}; }

 private:
  int heads_, width_;
  std::vector<float> rows_;  // [layers, heads, seq_len]
};

std::vector<int> random_tokens(int n, uint64_t seed, int vocab) {
  std::vector<int> t(n);
  for (int i = 0; i < n; ++i) {
    const float u = 0.5f * (kvs::bench::hash_uniform(seed, static_cast<std::size_t>(i)) + 1.0f);  // [0, 1)
    t[i] = std::min(vocab - 1, static_cast<int>(u * static_cast<float>(vocab)));
  }
  return t;
}

// Seconds of each decode step, fed `forced` one after the other.
std::vector<double> decode_steps(kvs::Engine& engine, const std::vector<int>& forced) {
  std::vector<double> s;
  s.reserve(forced.size());
  for (int token : forced) {
    const auto t0 = Clock::now();
    engine.decode(token);
    s.push_back(seconds_since(t0));
  }
  return s;
}

double timed_prefill(kvs::Engine& engine, const std::vector<int>& prompt) {
  engine.reset();
  const auto t0 = Clock::now();
  engine.prefill(prompt);
  return seconds_since(t0);
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

struct TraceRun {
  double prefill_s = 0.0;        // engine.prefill with the recorder attached
  double prefill_write_s = 0.0;  // then the wait for the prefill evidence to be written
  std::vector<double> step_s;    // each decode step
  double drain_s = 0.0;          // the wait for the last queued steps after the last decode
  double commit_s = 0.0;         // finish(): ids, texts, meta, fsync, rename
  double file_bytes = 0.0;
  std::string note;              // the recorder's capture note
  double sustained_step_s() const { return (sum(step_s) + drain_s) / static_cast<double>(step_s.size()); }
};

// Prefill + decode with a TraceRecorder writing to a file under /tmp; removes the file.
TraceRun record_trace(kvs::Engine& engine, const std::vector<int>& prompt, const std::vector<int>& forced,
                      const std::string& decode_dtype) {
  const kvs::ModelConfig& c = engine.model().config;
  kvs::TraceMeta meta;
  meta.writer_version = KVSCOPE_VERSION;
  meta.created = utc_now();
  meta.model = c.name;
  meta.model_path = "(random weights in memory: bench_cuda)";
  meta.arch = c.arch;
  meta.device = "cuda";
  meta.shape = kvs::shape_of(c);
  meta.vocab_size = c.vocab_size;
  meta.prompt_len = static_cast<int>(prompt.size());
  meta.prompt = std::to_string(prompt.size()) + " random token ids";
  meta.decode_dtype = decode_dtype;
  std::string path = "/tmp/kvscope-bench-cuda-";
  path += std::to_string(getpid());
  path += "-";
  path += std::to_string(prompt.size());
  path += ".h5";
  TraceRun r;
  struct RemoveFile {
    std::string path;
    ~RemoveFile() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } remove_file{path};
  kvs::StepAnalyses analyses(meta.shape, meta.prompt_len);  // as kvscope record beside a GPU: in the background
  kvs::TraceRecorder rec(path, meta, static_cast<int>(forced.size()));
  rec.on_step = [&](int, int q_pos, std::span<const float> rows, std::span<const float> lse) {
    analyses.add(q_pos, rows, lse);
  };
  rec.on_step_in_background = true;
  engine.reset();
  engine.set_observer(&rec);
  try {
    auto t0 = Clock::now();
    engine.prefill(prompt);
    r.prefill_s = seconds_since(t0);
    t0 = Clock::now();
    rec.writer();  // waits for the prefill evidence to be written
    r.prefill_write_s = seconds_since(t0);
    r.step_s = decode_steps(engine, forced);
    t0 = Clock::now();
    rec.writer();  // waits for the steps still queued
    r.drain_s = seconds_since(t0);
  } catch (...) {
    engine.set_observer(nullptr);
    throw;
  }
  engine.set_observer(nullptr);
  const auto t0 = Clock::now();
  rec.finish([](int id) { return std::to_string(id); });
  r.commit_s = seconds_since(t0);
  r.note = rec.capture_note();
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  r.file_bytes = ec ? 0.0 : static_cast<double>(size);
  return r;
}

struct ContextResult {
  int T = 0;
  std::string error;            // the InputError of this context (out of memory), or ""
  double prefill_s = 0.0;       // best of the hooks-off prefills
  double off_step_s = 0.0;      // median decode step, hooks off
  double plain_step_s = 0.0;    // median decode step, hooks off, without the overlap (--overlap both)
  double bytes_per_token = 0.0; // weights + K/V read, mean over the steps
  double row_floats_per_step = 0.0;  // layers x heads x keys of a decode step, mean over the steps
  double rows_step_s = 0.0;     // median decode step, rows to a host buffer (0: not run)
  int policy_budget = 0;        // --policy: entries each keeps per KV head
  std::vector<double> policy_step_s;  // [policies] median decode step with it as the cache controller
  bool has_trace = false;
  TraceRun trace;
};

// Median decode step with `spec` enforced live at `budget` entries per KV head (the cache
// controller path of `kvscope rerun --device cuda`): the prefill with its evidence collected,
// then the decode steps with the policy alone, evicting every step once the budget is reached.
double policy_decode(kvs::Engine& engine, const std::vector<int>& prompt, const std::vector<int>& forced,
                     const std::string& spec, int budget) {
  const kvs::ModelConfig& c = engine.model().config;
  const kvs::ModelShape shape = kvs::shape_of(c);
  const std::unique_ptr<kvs::Policy> policy = kvs::make_policy(kvs::parse_policy_spec(spec, budget), shape);
  kvs::PrefillReducer reducer(shape, kvs::kDefaultPrefillWindow);
  kvs::PolicyContext context;
  context.shape = shape;
  context.prompt_len = static_cast<int>(prompt.size());
  context.prefill = &reducer.evidence();
  policy->begin(context);
  engine.reset();
  engine.set_observer(&reducer);
  engine.set_controller(policy.get());
  double step_s = 0.0;
  try {
    engine.prefill(prompt);
    engine.set_observer(nullptr);
    step_s = median(decode_steps(engine, forced));
  } catch (...) {
    engine.set_observer(nullptr);
    engine.set_controller(nullptr);
    throw;
  }
  engine.set_controller(nullptr);
  return step_s;
}

ContextResult run_context(kvs::Engine& engine, int T, const Options& o, kvs::GpuDtype dtype, double weight_bytes) {
  const kvs::ModelConfig& c = engine.model().config;
  ContextResult r;
  r.T = T;
  const std::vector<int> prompt = random_tokens(T, 1000 + static_cast<uint64_t>(T), c.vocab_size);
  const std::vector<int> forced = random_tokens(o.steps, 7, c.vocab_size);
  try {
    // Hooks off.
    engine.set_observer(nullptr);
    r.prefill_s = timed_prefill(engine, prompt);
    std::vector<double> off = decode_steps(engine, forced);
    if (o.overlap == "both") {
      // The same steps again over the same prompt: off, on, off (alternating, so that a drift of
      // the GPU's clocks or memory falls on both); each variant's median over its runs.
      std::vector<double> plain;
      for (const bool overlap : {false, true, false}) {
        set_overlap(overlap);
        engine.rewind(T);
        const std::vector<double> s = decode_steps(engine, forced);
        std::vector<double>& into = overlap ? off : plain;
        into.insert(into.end(), s.begin(), s.end());
      }
      set_overlap(true);
      r.plain_step_s = median(plain);
    }
    r.off_step_s = median(off);
    // Step i reads the weights and T + i + 1 cached entries (its own included).
    r.bytes_per_token = weight_bytes + kv_entry_bytes(c, dtype) * (T + 0.5 * (o.steps + 1));
    r.row_floats_per_step = static_cast<double>(c.n_layers) * c.n_heads * (T + 0.5 * (o.steps + 1));
    // Second hooks-off prefill (the faster counts), then decode with rows copied out.
    r.prefill_s = std::min(r.prefill_s, timed_prefill(engine, prompt));
    if (o.rows) {
      RowSink sink(c);
      engine.set_observer(&sink);
      try {
        r.rows_step_s = median(decode_steps(engine, forced));
      } catch (...) {
        engine.set_observer(nullptr);
        throw;
      }
      engine.set_observer(nullptr);
    }
    if (o.trace) {
      r.trace = record_trace(engine, prompt, forced, o.decode_dtype);
      r.has_trace = true;
    }
    r.policy_budget = std::max(1, T / 2);
    for (const std::string& spec : o.policies)
      r.policy_step_s.push_back(policy_decode(engine, prompt, forced, spec, r.policy_budget));
  } catch (const kvs::InputError& e) {  // cuda::OutOfMemory among them
    engine.set_observer(nullptr);
    engine.set_controller(nullptr);
    r.error = e.what();
  }
  engine.reset();
  return r;
}

const char* mark(bool ok) { return ok ? "met" : "NOT met"; }

// One line per finished context with its main figures, so that a run stopped before the tables
// (the GPU check caps each step) still reports what it measured.
void print_progress(const ContextResult& r, const Options& o, double seconds, double bandwidth) {
  std::printf("context %d: done in %.1f s (prefill %.0f tok/s, decode %.1f tok/s hooks off, %.2f of the limit",
              r.T, seconds, r.T / r.prefill_s, 1.0 / r.off_step_s, r.bytes_per_token / r.off_step_s / bandwidth);
  if (r.rows_step_s > 0) std::printf("; rows to host %+.1f%%", 100.0 * (r.rows_step_s / r.off_step_s - 1.0));
  if (r.has_trace) std::printf("; trace %+.1f%%", 100.0 * (r.trace.sustained_step_s() / r.off_step_s - 1.0));
  if (r.plain_step_s > 0) std::printf("; overlap on / off %.3f", r.plain_step_s / r.off_step_s);
  for (std::size_t i = 0; i < r.policy_step_s.size(); ++i)
    std::printf("; %s live %.1f tok/s", o.policies[i].c_str(), 1.0 / r.policy_step_s[i]);
  std::printf(")\n");
}

void print_tables(const std::vector<ContextResult>& results, const Options& o, double bandwidth) {
  constexpr double kFractionTarget = 0.80, kOverheadTarget = 15.0;
  std::printf("\n| context | prefill tok/s | decode tok/s, hooks off | fraction of limit (target >= %.2f) | "
              "decode tok/s, capture on | capture overhead (target <= %.0f%%) | targets |\n",
              kFractionTarget, kOverheadTarget);
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const ContextResult& r : results) {
    if (!r.error.empty()) {
      std::printf("| %d | failed (see below) | | | | | |\n", r.T);
      continue;
    }
    const double off_tps = 1.0 / r.off_step_s;
    const double fraction = off_tps * r.bytes_per_token / bandwidth;
    const bool frac_ok = fraction >= kFractionTarget;
    std::string cap_tps = "-", cap_over = "-", targets = std::string("fraction ") + mark(frac_ok);
    if (r.has_trace) {
      const double step = r.trace.sustained_step_s();
      const double over = 100.0 * (step / r.off_step_s - 1.0);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f", 1.0 / step);
      cap_tps = buf;
      std::snprintf(buf, sizeof buf, "%+.1f%%", over);
      cap_over = buf;
      targets += std::string("; overhead ") + mark(over <= kOverheadTarget);
    }
    std::printf("| %d | %.0f | %.1f | %.2f | %s | %s | %s |\n", r.T, r.T / r.prefill_s, off_tps, fraction,
                cap_tps.c_str(), cap_over.c_str(), targets.c_str());
  }
  std::printf("\ncapture on = a TraceRecorder writing the HDF5 trace (decode rows %s) under /tmp, with the "
              "head statistics and layer similarity beside it, as `kvscope record` does: decode tok/s = steps / "
              "(their time + the wait for the writing and analysis threads after the last one); overhead "
              "against the hooks-off median step.\n",
              o.decode_dtype.c_str());

  std::printf("\nDetails:\n\n| context | MB read/token (weights + KV) | limit tok/s | decode tok/s, rows to host "
              "(no trace) | rows overhead | prefill tok/s, trace on | + prefill evidence write | "
              "trace MB/step | trace file | commit |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const ContextResult& r : results) {
    if (!r.error.empty()) continue;
    std::string rows = "-", rows_over = "-", tp = "-", tw = "-", tmb = "-", tf = "-", tc = "-";
    char buf[64];
    if (r.rows_step_s > 0) {
      std::snprintf(buf, sizeof buf, "%.1f", 1.0 / r.rows_step_s);
      rows = buf;
      std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * (r.rows_step_s / r.off_step_s - 1.0));
      rows_over = buf;
    }
    if (r.has_trace) {
      const TraceRun& t = r.trace;
      std::snprintf(buf, sizeof buf, "%.0f", r.T / t.prefill_s);
      tp = buf;
      std::snprintf(buf, sizeof buf, "%.2f s", t.prefill_write_s);
      tw = buf;
      const double elem = o.decode_dtype == "float16" ? 2.0 : 4.0;
      std::snprintf(buf, sizeof buf, "%.1f", r.row_floats_per_step * elem / 1e6);
      tmb = buf;
      std::snprintf(buf, sizeof buf, "%.2f GB", t.file_bytes / 1e9);
      tf = buf;
      std::snprintf(buf, sizeof buf, "%.2f s", t.commit_s);
      tc = buf;
    }
    std::printf("| %d | %.1f | %.1f | %s | %s | %s | %s | %s | %s | %s |\n", r.T, r.bytes_per_token / 1e6,
                bandwidth / r.bytes_per_token, rows.c_str(), rows_over.c_str(), tp.c_str(), tw.c_str(),
                tmb.c_str(), tf.c_str(), tc.c_str());
  }
  if (o.overlap == "both") {
    std::printf("\nOverlapped launches (kernels/cuda_launch.cuh), hooks off, median of %d steps each:\n\n"
                "| context | tok/s, overlap on | fraction of limit | tok/s, overlap off | fraction of limit | "
                "on / off |\n|---|---|---|---|---|---|\n", 2 * o.steps);
    for (const ContextResult& r : results) {
      if (!r.error.empty() || r.plain_step_s <= 0) continue;
      const double on = 1.0 / r.off_step_s, plain = 1.0 / r.plain_step_s;
      std::printf("| %d | %.1f | %.3f | %.1f | %.3f | %.3f |\n", r.T, on, on * r.bytes_per_token / bandwidth, plain,
                  plain * r.bytes_per_token / bandwidth, on / plain);
    }
  }
  if (!o.policies.empty()) {
    std::printf("\nLive policies (the cache controller path of rerun --device cuda), median of %d steps; the "
                "cache holds the budget, so each step reads less than hooks off:\n\n"
                "| context | policy | budget per KV head | tok/s, policy live | tok/s, hooks off | policy / hooks off |\n"
                "|---|---|---|---|---|---|\n", o.steps);
    for (const ContextResult& r : results) {
      if (!r.error.empty()) continue;
      for (std::size_t i = 0; i < r.policy_step_s.size(); ++i)
        std::printf("| %d | %s | %d | %.1f | %.1f | %.3f |\n", r.T, o.policies[i].c_str(), r.policy_budget,
                    1.0 / r.policy_step_s[i], 1.0 / r.off_step_s, r.off_step_s / r.policy_step_s[i]);
    }
  }
  for (const ContextResult& r : results) {
    if (!r.error.empty()) std::printf("\ncontext %d: %s\n", r.T, r.error.c_str());
    else if (r.has_trace && !r.trace.note.empty()) std::printf("\ncontext %d, trace: %s\n", r.T, r.trace.note.c_str());
  }
}

// Uploads `model` as `dtype`, warms up, measures every context and prints the tables.
void measure(const kvs::Model& model, const Options& o, kvs::GpuDtype dtype, double bandwidth) {
  const kvs::ModelConfig& c = model.config;
  const double params = static_cast<double>(parameter_count(c));
  std::printf("\n## Weights and cache as %s\n\n", kvs::gpu_dtype_name(dtype));
  auto t0 = Clock::now();
  kvs::EngineOptions eo;
  eo.device = kvs::Device::Cuda;
  eo.gpu_dtype = dtype;
  std::unique_ptr<kvs::Engine> engine;
  try {
    engine = std::make_unique<kvs::Engine>(model, eo);
  } catch (const kvs::InputError& e) {  // cuda::OutOfMemory: the weights do not fit
    std::printf("bench_cuda: nothing measured as %s: %s\n", kvs::gpu_dtype_name(dtype), e.what());
    return;
  }
  const double weight_bytes = weight_bytes_read(c, dtype);
  std::printf("uploaded as %s in %.1f s; weights read per decoded token %.2f GB (2 bytes x every "
              "parameter: %.2f GB; the embedding table is read one row a token); K+V %.0f KiB per "
              "position (%s)\n",
              kvs::gpu_dtype_name(dtype), seconds_since(t0), weight_bytes / 1e9, 2.0 * params / 1e9,
              kv_entry_bytes(c, dtype) / 1024.0, kvs::gpu_dtype_name(dtype));
  std::printf("limit per decoded token = (weight bytes + K/V bytes of the T + i + 1 cached positions) / "
              "bandwidth; decode: %d steps fed forced random tokens after a random T-token prompt, "
              "median step\n", o.steps);

  // Warm-up: kernels, cuBLAS, pinned copies, the observer path.
  {
    const int n = std::min(64, c.seq_len - 8);
    const std::vector<int> warm = random_tokens(n, 3, c.vocab_size);
    engine->prefill(warm);
    decode_steps(*engine, random_tokens(4, 5, c.vocab_size));
    RowSink sink(c);
    engine->set_observer(&sink);
    decode_steps(*engine, random_tokens(2, 6, c.vocab_size));
    engine->set_observer(nullptr);
    engine->reset();
  }

  std::vector<ContextResult> results;
  for (int T : o.contexts) {
    t0 = Clock::now();
    results.push_back(run_context(*engine, T, o, dtype, weight_bytes));
    const ContextResult& r = results.back();
    if (!r.error.empty())
      std::printf("context %d: %s\n", T, r.error.c_str());
    else
      print_progress(r, o, seconds_since(t0), bandwidth);
    std::fflush(stdout);
  }
  engine.reset();  // gives the GPU memory back for the second probe
  const double bandwidth_after = copy_bandwidth(probe_bytes(o), 10);
  std::printf("GPU memory bandwidth measured again after the runs: %.0f GB/s\n", bandwidth_after / 1e9);
  print_tables(results, o, bandwidth);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows through a pipe (tee) and survives a kill
  Options o;
  if (!parse_options(argc, argv, o)) return 2;
  std::string why;
  if (!kvs::cuda_usable(&why)) {
    std::printf("bench_cuda: nothing measured: %s\n", why.c_str());
    return 0;
  }
  try {
    const kvs::ModelConfig c = config_for(o);
    for (const std::string& spec : o.policies)  // InputError: unknown policy or parameter, a filter layer past the last, ...
      kvs::make_policy(kvs::parse_policy_spec(spec, 1), kvs::shape_of(c));
    print_gpu();
    const double bandwidth = copy_bandwidth(probe_bytes(o), 10);
    std::printf("GPU memory bandwidth: %.0f GB/s (device-to-device copy of %.0f MiB, bytes read + written, "
                "best of 10)\n", bandwidth / 1e9, static_cast<double>(probe_bytes(o)) / (1 << 20));

    set_overlap(o.overlap != "off");
    if (o.ops) print_ops(c, o.contexts, bandwidth, o.gpu_dtypes.front());
    if (o.only_ops) return 0;

    const double params = static_cast<double>(parameter_count(c));
    const double host_need = 4.0 * params, host_free = host_available_bytes();
    if (host_free > 0 && host_need > 0.95 * host_free) {
      std::printf("bench_cuda: nothing measured: the fp32 host model needs %.1f GB, %.1f GB available\n",
                  host_need / 1e9, host_free / 1e9);
      return 0;
    }
    auto t0 = Clock::now();
    const kvs::Model model = kvs::bench::random_model(c, 0.02f, 0.02f, 0.02f);  // uniform in ±0.02, norms 1
    std::printf("model: %s, dim %d, hidden %d, %d layers, %d heads (%d KV) x %d, vocab %d, untied, "
                "rope_theta %.0f, seq_len %d; %.2fB parameters, random fp32 weights built in %.1f s\n",
                c.name.c_str(), c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim,
                c.vocab_size, c.rope_theta, c.seq_len, params / 1e9, seconds_since(t0));

    for (const kvs::GpuDtype dtype : o.gpu_dtypes) measure(model, o, dtype, bandwidth);
    std::printf("\nHF transformers side by side: python3 scripts/bench-hf-eager.py --shape %s --contexts "
                "<the same> --steps %d (target: decode >= 10x HF eager with attentions at 4096)\n",
                o.shape.c_str(), o.steps);
    return 0;
  } catch (const kvs::InputError& e) {
    std::fprintf(stderr, "bench_cuda: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda: %s\n", e.what());
    return 1;
  }
}
