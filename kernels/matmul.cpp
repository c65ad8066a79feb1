// Matvec (one streamed weight row at a time) and blocked matmul (register tiles of R weight rows x
// T tokens) over row-major fp32 weights, with 8-wide GCC vector extensions (AVX/FMA when native).
#include "kernels/matmul.h"

#include <cstring>

namespace kvs::ops {
namespace {

using f32x8 = float __attribute__((vector_size(32)));

inline f32x8 load8(const float* p) {
  f32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float hsum(f32x8 v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// out[t * out_stride + r] = dot(w[r], x[t]) for an R x T tile; w rows and x rows have `cols`
// contiguous floats, consecutive rows `cols` apart.
template <int R, int T>
inline void tile(float* out, int out_stride, const float* w, const float* x, int cols) {
  f32x8 acc[R][T] = {};
  int k = 0;
  for (; k + 8 <= cols; k += 8) {
    f32x8 xv[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) xv[t] = load8(x + static_cast<long>(t) * cols + k);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const f32x8 wv = load8(w + static_cast<long>(r) * cols + k);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) acc[r][t] += wv * xv[t];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float s = hsum(acc[r][t]);
      const float* wr = w + static_cast<long>(r) * cols;
      const float* xt = x + static_cast<long>(t) * cols;
      for (int j = k; j < cols; ++j) s += wr[j] * xt[j];
      out[static_cast<long>(t) * out_stride + r] = s;
    }
  }
}

// dot(w, x) over n floats with four independent accumulators. One weight row at a time keeps a
// single sequential stream, which the hardware prefetcher follows at full memory bandwidth.
inline float dot_row(const float* w, const float* x, int n) {
  f32x8 acc[4] = {};
  int k = 0;
  for (; k + 32 <= n; k += 32) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) acc[u] += load8(w + k + 8 * u) * load8(x + k + 8 * u);
  }
  for (; k + 8 <= n; k += 8) acc[0] += load8(w + k) * load8(x + k);
  float s = hsum((acc[0] + acc[1]) + (acc[2] + acc[3]));
  for (; k < n; ++k) s += w[k] * x[k];
  return s;
}

// Work below this many multiply-adds runs on one thread: waking a worker costs tens of
// microseconds, more than a quarter-million multiply-adds take on one core.
constexpr long kParallelMinWork = 1L << 18;

}  // namespace

// Rows are dealt out dynamically in chunks of 64: a worker that wakes late takes fewer rows
// instead of holding everyone at the join (static halves measured 0.72-0.75 of the bandwidth
// limit on stories110M, dynamic 0.78-0.85).
void matvec(float* y, const float* w, const float* x, int rows, int cols) {
#pragma omp parallel for schedule(dynamic, 64) if (static_cast<long>(rows) * cols >= kParallelMinWork)
  for (int r = 0; r < rows; ++r) y[r] = dot_row(w + static_cast<long>(r) * cols, x, cols);
}

void matvec_rows(std::span<const MatvecJob> jobs, const float* x, int cols, long begin, long end) {
  std::size_t j = 0;
  long first = 0;  // stacked index of jobs[j]'s row 0
  for (long r = begin; r < end; ++r) {
    while (r - first >= jobs[j].rows) first += jobs[j++].rows;
    const long row = r - first;
    jobs[j].y[row] = dot_row(jobs[j].w + row * cols, x, cols);
  }
}

void matmul(float* y, const float* x, const float* w, int n, int rows, int cols) {
  constexpr int kTokenChunk = 64;  // tokens whose activations stay cache-resident per weight pass
  const int row_tiles = (rows + 3) / 4;
  const bool parallel = static_cast<long>(rows) * cols * n >= kParallelMinWork;
  for (int t0 = 0; t0 < n; t0 += kTokenChunk) {
    const int nt = n - t0 < kTokenChunk ? n - t0 : kTokenChunk;
#pragma omp parallel for schedule(static) if (parallel)
    for (int i = 0; i < row_tiles; ++i) {
      // Weight rows r0..r0+R-1 against tokens t0..t0+nt-1, four tokens at a time.
      const int r0 = 4 * i;
      const float* wr = w + static_cast<long>(r0) * cols;
      for (int t = t0; t < t0 + nt;) {
        float* yt = y + static_cast<long>(t) * rows + r0;
        const float* xt = x + static_cast<long>(t) * cols;
        const bool four_tokens = t + 4 <= t0 + nt;
        if (r0 + 4 <= rows) {
          four_tokens ? tile<4, 4>(yt, rows, wr, xt, cols) : tile<4, 1>(yt, rows, wr, xt, cols);
        } else {
          for (int r = 0; r < rows - r0; ++r) {
            const float* w1 = wr + static_cast<long>(r) * cols;
            four_tokens ? tile<1, 4>(yt + r, rows, w1, xt, cols) : tile<1, 1>(yt + r, rows, w1, xt, cols);
          }
        }
        t += four_tokens ? 4 : 1;
      }
    }
  }
}

void add_bias(float* y, const float* b, int n, int dim) {
  for (int t = 0; t < n; ++t) {
    float* yt = y + static_cast<long>(t) * dim;
#pragma omp simd
    for (int i = 0; i < dim; ++i) yt[i] += b[i];
  }
}

}  // namespace kvs::ops
