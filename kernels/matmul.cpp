// Matvec (one streamed weight row, or one packed panel, at a time) and blocked matmul
// (outer-product tiles of 12 tokens x 32 rows with AVX-512, 6 x 16 otherwise, over packed
// panels) of fp32 weights, with GCC vector extensions (AVX/FMA when native); panel packing.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/simd.h"

namespace kvs::ops {
namespace {

inline float hsum(f32x8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

constexpr int kPanel = kPanelRows;  // weight rows per packed panel

// A panel's column is two fvecs. A micro-tile holds kTile tokens' accumulators in registers:
// 12 x 2 of AVX-512's 32, 6 x 2 of AVX2's 16; per column, kVecs panel loads and kTile broadcasts
// feed kTile * kVecs multiply-adds. With AVX-512, 12 x 1 over 16-row panels (13 loads for 12
// multiply-adds) ran at 0.69-0.70 of the FMA peak on SmolLM2's layer (bench_prefill), 12 x 2 at
// 0.87-0.90; 14 x 2 spills (0.54), 8 x 2 is no faster at 4K tokens and slower at 512.
constexpr int kTile = kLanes == 16 ? 12 : 6;
constexpr int kVecs = kPanel / kLanes;  // vectors per panel column

// y[t * y_stride + r] = sum_k x[t * cols + k] * panel[k * kPanel + r] for tokens t < NT and
// the panel's rows r < n_rows (the panel is zero past them). Outer products: no horizontal sums.
template <int NT>
inline void micro_tile(float* y, long y_stride, const float* x, const float* panel, int cols, int n_rows) {
  fvec acc[NT][kVecs] = {};
  for (int k = 0; k < cols; ++k) {
    fvec w[kVecs];
    for (int v = 0; v < kVecs; ++v) w[v] = load_as<fvec>(panel + k * kPanel + v * kLanes);
#pragma GCC unroll 12
    for (int t = 0; t < NT; ++t) {
      const float xt = x[static_cast<long>(t) * cols + k];
      for (int v = 0; v < kVecs; ++v) acc[t][v] += xt * w[v];
    }
  }
  for (int t = 0; t < NT; ++t) {
    float full[kPanel];
    std::memcpy(full, acc[t], sizeof full);
    std::memcpy(y + t * y_stride, full, sizeof(float) * n_rows);
  }
}

// The last n < kTile tokens of a panel's tokens: micro_tile<n>.
template <int NT = kTile - 1>
void tail_tile(int n, float* y, long y_stride, const float* x, const float* panel, int cols, int n_rows) {
  if constexpr (NT > 0) {
    if (n == NT) micro_tile<NT>(y, y_stride, x, panel, cols, n_rows);
    else tail_tile<NT - 1>(n, y, y_stride, x, panel, cols, n_rows);
  }
}

// Tokens [t0, t1) against one packed panel of n_rows rows starting at row r0.
void panel_rows(float* y, int rows, const float* x, const float* panel, int cols, int r0, int n_rows, int t0,
                int t1) {
  int t = t0;
  for (; t + kTile <= t1; t += kTile)
    micro_tile<kTile>(y + static_cast<long>(t) * rows + r0, rows, x + static_cast<long>(t) * cols, panel, cols, n_rows);
  tail_tile(t1 - t, y + static_cast<long>(t) * rows + r0, rows, x + static_cast<long>(t) * cols, panel, cols, n_rows);
}

// How far ahead of its loads a product asks for the weight stream (software prefetch into L1):
// about what one core must keep in flight to read its half of ~80 GB/s. With two threads at the
// development VM's fast level each core has to sustain ~40 GB/s, and the hardware prefetcher
// alone left the stories110M decode at 0.85-0.89 of the bandwidth limit where the plain sum of
// the probe reached it; 4 KB ahead: 0.89-0.93 (2 KB and 1 KB: no gain or a loss; 6-8 KB about
// the same as 4; prefetchnta lost at that level). At ~50 GB/s it gains 0-2%. Over packed
// panels, 2 KB and 16 KB read 0.88 and 0.86 of the probe where 4 and 8 KB read 0.93-0.94.
constexpr int kPrefetchBytes = 4096;

// dot(w, x) over n floats of a row-major row with eight independent accumulators: one row at a
// time keeps a single sequential stream, which the hardware prefetcher follows and the software
// prefetch runs kPrefetchBytes ahead of (past a row's end into the next row, the same stream;
// past the last row it asks for a few lines it never reads). Eight loads of w per step, not
// four: 0.95 of the streaming probe against 0.89 when this was decode's kernel (sixteen spill
// registers: 0.75).
inline float dot_row(const float* w, const float* x, int n) {
  f32x8 acc[8] = {};
  int k = 0;
  for (; k + 64 <= n; k += 64) {
    for (int line = 0; line < 256; line += 64) prefetch_ahead(w + k, kPrefetchBytes + line);
#pragma GCC unroll 8
    for (int u = 0; u < 8; ++u) acc[u] += load_as<f32x8>(w + k + 8 * u) * load_as<f32x8>(x + k + 8 * u);
  }
  for (; k + 8 <= n; k += 8) acc[0] += load_as<f32x8>(w + k) * load_as<f32x8>(x + k);
  float s = hsum(((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])));
  for (; k < n; ++k) s += w[k] * x[k];
  return s;
}

// Work below this many multiply-adds runs on one thread: waking a worker costs tens of
// microseconds, more than a quarter-million multiply-adds take on one core.
constexpr long kParallelMinWork = 1L << 18;

// y[i] = W[i, :] · x for a packed panel's n_rows rows: the even and the odd columns summed in
// two chains of kPanelRows / 8 vectors each (x[k] broadcast once for the panel's rows), then
// added. The panel is one stream, asked for kPrefetchBytes ahead (past its end: the next panel).
// Against a dot per row-major row (each 8 weights with their own 8 loads of x), stand-alone
// passes over stories110M's matrices alternating with the probe read 0.98-0.99 of it instead of
// 0.93-0.95 at ~33 GB/s and 0.95-0.98 instead of 0.78-0.90 at ~50 (docs/performance.md,
// 2026-11-28); one chain of 16-wide vectors read 0.87 against two chains' 0.92 on SmolLM2's.
void panel_dot(float* y, const float* panel, const float* x, int cols, int n_rows) {
  constexpr int V = kPanel / 8;  // 8-wide vectors per panel column
  f32x8 even[V] = {}, odd[V] = {};
  int k = 0;
  for (; k + 2 <= cols; k += 2) {
    const float* w = panel + static_cast<long>(k) * kPanel;
    for (int line = 0; line < 2 * kPanel * static_cast<int>(sizeof(float)); line += 64)
      prefetch_ahead(w, kPrefetchBytes + line);
    const float x0 = x[k], x1 = x[k + 1];
    for (int u = 0; u < V; ++u) even[u] += load_as<f32x8>(w + 8 * u) * x0;
    for (int u = 0; u < V; ++u) odd[u] += load_as<f32x8>(w + kPanel + 8 * u) * x1;
  }
  if (k < cols)
    for (int u = 0; u < V; ++u) even[u] += load_as<f32x8>(panel + static_cast<long>(k) * kPanel + 8 * u) * x[k];
  float out[kPanel];
  for (int u = 0; u < V; ++u) store_as(out + 8 * u, even[u] + odd[u]);
  std::memcpy(y, out, sizeof(float) * n_rows);
}

// Packs rows kPanel p .. kPanel p + kPanel - 1 of W k-major into panel[cols, kPanel] (column k
// holds the panel's rows, zero past the last row of W).
void pack_panel(float* panel, const float* w, int p, int rows, int cols) {
  const int r0 = p * kPanel, n_rows = std::min(kPanel, rows - r0);
  for (int r = 0; r < kPanel; ++r) {
    const float* wr = w + static_cast<long>(r0 + r) * cols;
    for (int k = 0; k < cols; ++k) panel[static_cast<std::size_t>(k) * kPanel + r] = r < n_rows ? wr[k] : 0.0f;
  }
}

// Tokens per chunk of a matmul: 96 x cols floats of X, resident in the L2 cache.
constexpr int kTokenChunk = 96;

// Tokens [0, n) in chunks whose activations stay in the L2 cache while every panel of W passes
// over them; panels dealt out to the threads. panel(p) gives panel p, packed.
template <class Panel>
void matmul_panels(float* y, const float* x, int n, int rows, int cols, Panel panel) {
  const int n_panels = static_cast<int>(panel_count(rows));
  const bool parallel = static_cast<long>(rows) * cols * n >= kParallelMinWork;
  for (int t0 = 0; t0 < n; t0 += kTokenChunk) {
    const int t1 = std::min(n, t0 + kTokenChunk);
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int p = 0; p < n_panels; ++p) {
      const int r0 = p * kPanel;
      panel_rows(y, rows, x, panel(p), cols, r0, std::min(kPanel, rows - r0), t0, t1);
    }
  }
}

}  // namespace

void pack_panels(float* packed, const float* w, int rows, int cols) {
  const long n = panel_count(rows);
  const std::size_t panel_floats = static_cast<std::size_t>(cols) * kPanel;
#pragma omp parallel for schedule(static) if (static_cast<long>(rows) * cols >= kParallelMinWork)
  for (long p = 0; p < n; ++p) pack_panel(packed + p * panel_floats, w, static_cast<int>(p), rows, cols);
}

void unpack_panels(float* w, const float* packed, int rows, int cols) {
  for (int r = 0; r < rows; ++r) panel_row(w + static_cast<long>(r) * cols, packed, cols, r);
}

void panel_row(float* out, const float* packed, int cols, int r) {
  const float* p = packed + static_cast<std::size_t>(r / kPanel) * cols * kPanel + r % kPanel;
  for (int k = 0; k < cols; ++k) out[k] = p[static_cast<std::size_t>(k) * kPanel];
}

// Rows are dealt out dynamically in chunks of 64: a worker that wakes late takes fewer rows
// instead of holding everyone at the join (static halves measured 0.72-0.75 of the bandwidth
// limit on stories110M, dynamic 0.78-0.85).
void matvec(float* y, const float* w, const float* x, int rows, int cols) {
#pragma omp parallel for schedule(dynamic, 64) if (static_cast<long>(rows) * cols >= kParallelMinWork)
  for (int r = 0; r < rows; ++r) y[r] = dot_row(w + static_cast<long>(r) * cols, x, cols);
}

void matvec_panels(std::span<const MatvecJob> jobs, const float* x, int cols, long begin, long end) {
  const std::size_t panel_floats = static_cast<std::size_t>(cols) * kPanel;
  long first = 0;  // stacked index of the job's panel 0
  for (const MatvecJob& job : jobs) {
    if (first >= end) break;
    const long n = panel_count(job.rows);
    for (long p = std::max(begin - first, 0L); p < std::min(end - first, n); ++p) {
      const int n_rows = static_cast<int>(std::min<long>(kPanel, job.rows - p * kPanel));
      if (job.w.f32 != nullptr) panel_dot(job.y + p * kPanel, job.w.f32 + p * panel_floats, x, cols, n_rows);
      else quant_panel_dot(job.y + p * kPanel, job.w.quant, p, x, cols, n_rows);
    }
    first += n;
  }
}

long panel_count(std::span<const MatvecJob> jobs) {
  long n = 0;
  for (const MatvecJob& job : jobs) n += panel_count(job.rows);
  return n;
}

void matvec_packed(float* y, PanelWeights w, const float* x, int rows, int cols) {
  const MatvecJob job[] = {{y, w, rows}};
  const long n = panel_count(rows);
#pragma omp parallel for schedule(dynamic, 2) if (static_cast<long>(rows) * cols >= kParallelMinWork)
  for (long p = 0; p < n; ++p) matvec_panels(job, x, cols, p, p + 1);
}

void matmul_packed(float* y, const float* x, PanelWeights w, int n, int rows, int cols) {
  const std::size_t panel_floats = static_cast<std::size_t>(cols) * kPanel;
  if (w.f32 != nullptr) {
    matmul_panels(y, x, n, rows, cols, [&](int p) { return w.f32 + p * panel_floats; });
    return;
  }
  matmul_panels(y, x, n, rows, cols, [&](int p) {
    thread_local std::vector<float> own;  // [cols, kPanel] this thread's panel, expanded
    own.resize(panel_floats);
    quant_panel_to_f32(own.data(), w.quant, cols, p);
    return static_cast<const float*>(own.data());
  });
}

// Packing a panel costs 1/96 of its multiply-adds per token chunk, a tenth of a long prompt's
// prefill when repeated for every chunk: with several chunks and a W of at most 64 MiB, all
// panels are packed once into one buffer first; otherwise each thread packs the panel it takes
// into a buffer of its own, chunk by chunk.
void matmul(float* y, const float* x, const float* w, int n, int rows, int cols) {
  constexpr std::size_t kPackOnceBytes = std::size_t{64} << 20;
  const std::size_t panel_floats = static_cast<std::size_t>(cols) * kPanel;
  if (n > kTokenChunk && packed_floats(rows, cols) * sizeof(float) <= kPackOnceBytes) {
    // The caller's thread_local buffer, reached from the OpenMP threads through a plain pointer
    // (the name would mean each thread's own).
    thread_local std::vector<float> packed_buffer;  // [panel_count(rows), cols, kPanel]
    packed_buffer.resize(packed_floats(rows, cols));
    pack_panels(packed_buffer.data(), w, rows, cols);
    matmul_packed(y, x, packed_buffer.data(), n, rows, cols);
    return;
  }
  matmul_panels(y, x, n, rows, cols, [&](int p) {
    thread_local std::vector<float> own;  // [cols, kPanel] this thread's packed panel
    own.resize(panel_floats);
    pack_panel(own.data(), w, p, rows, cols);
    return static_cast<const float*>(own.data());
  });
}

void add_bias(float* y, const float* b, int n, int dim) {
  for (int t = 0; t < n; ++t) {
    float* yt = y + static_cast<long>(t) * dim;
#pragma omp simd
    for (int i = 0; i < dim; ++i) yt[i] += b[i];
  }
}

}  // namespace kvs::ops
