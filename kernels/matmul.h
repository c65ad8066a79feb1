// Dense fp32 products with a weight matrix W[rows, cols] (the Linear layout): matvec for decode
// (one token) and a blocked matmul for prefill (many tokens), multi-threaded. A model's weights
// are kept packed in panels (below): one stream per panel, read by decode's matvec with one load
// of x per kPanelRows weights and by prefill's matmul without packing them again. Row-major
// matvec and matmul remain for other operands (attention's keys and values, the CUDA twins).
#pragma once
#include <cstddef>
#include <span>

#include "kernels/quant_panels.h"
#include "kernels/simd.h"

namespace kvs::ops {

// Panels: W's rows in groups of kPanelRows, each group stored column by column,
//   packed[(p * cols + k) * kPanelRows + i] = W[p * kPanelRows + i, k],
// zero for the rows past W's last in its last panel.
constexpr int kPanelRows = kLanes == 16 ? 32 : 16;
constexpr long panel_count(long rows) { return (rows + kPanelRows - 1) / kPanelRows; }
constexpr std::size_t packed_floats(long rows, long cols) {
  return static_cast<std::size_t>(panel_count(rows)) * kPanelRows * static_cast<std::size_t>(cols);
}
// packed[packed_floats(rows, cols)] from row-major w[rows, cols], panels on the OpenMP threads.
void pack_panels(float* packed, const float* w, int rows, int cols);
// Row-major w[rows, cols] from packed.
void unpack_panels(float* w, const float* packed, int rows, int cols);
// out[cols] = W[r, :] of a packed W.
void panel_row(float* out, const float* packed, int cols, int r);

// A packed W as the products read it: fp32 panels, or quantized ones (kernels/quant_panels.h).
struct PanelWeights {
  const float* f32 = nullptr;  // [packed_floats(rows, cols)] where not quantized
  QuantPanels quant;
  PanelWeights(const float* panels) : f32(panels) {}  // NOLINT: fp32 panels convert implicitly
  PanelWeights(QuantPanels q) : quant(q) {}           // NOLINT
};

// y[rows] = W[rows, cols] · x[cols], W row-major. Rows dealt out to the OpenMP threads in chunks of 64.
void matvec(float* y, const float* w, const float* x, int rows, int cols);
// The same with W packed; panels dealt out to the OpenMP threads.
void matvec_packed(float* y, PanelWeights w, const float* x, int rows, int cols);

// One product of matvec_panels: y[rows] = W[rows, cols] · x, W packed.
struct MatvecJob {
  float* y;
  PanelWeights w;
  int rows;
};

// Panels [begin, end) of several matvecs sharing x[cols] (e.g. the q, k, v projections), counted
// through the jobs' panels stacked in order (panel_count(rows) each). Single-threaded: callers
// deal panel ranges to threads. Row i of a product is y[i] = (sum of W[i, k] x[k] over even k)
// + (the same over odd k), each sum in k order, whichever range it falls in.
void matvec_panels(std::span<const MatvecJob> jobs, const float* x, int cols, long begin, long end);
// The panels of jobs, stacked.
long panel_count(std::span<const MatvecJob> jobs);

// Y[n, rows] = X[n, cols] · W[rows, cols]^T, W row-major. Each weight tile is reused across
// several tokens.
void matmul(float* y, const float* x, const float* w, int n, int rows, int cols);
// The same with W packed (no packing on the way); quantized panels are expanded to fp32 one at a
// time, by the thread that takes it, for each chunk of tokens.
void matmul_packed(float* y, const float* x, PanelWeights w, int n, int rows, int cols);

// y[i] += b[i] for every row of Y[n, dim] (bias of a Linear layer).
void add_bias(float* y, const float* b, int n, int dim);

}  // namespace kvs::ops
