// Dense fp32 products with a row-major weight matrix W [rows, cols] (the Linear layout):
// matvec for decode (one token) and a blocked matmul for prefill (many tokens), multi-threaded.
#pragma once
#include <span>

namespace kvs::ops {

// y[rows] = W[rows, cols] · x[cols]. Rows are split statically over the OpenMP threads.
void matvec(float* y, const float* w, const float* x, int rows, int cols);

// One product of matvec_rows: y[rows] = W[rows, cols] · x.
struct MatvecJob {
  float* y;
  const float* w;
  int rows;
};

// Rows [begin, end) of several matvecs sharing x[cols] (e.g. the q, k, v projections), counted
// through the jobs' rows stacked in order. Single-threaded: callers deal row ranges to threads.
void matvec_rows(std::span<const MatvecJob> jobs, const float* x, int cols, long begin, long end);

// Y[n, rows] = X[n, cols] · W[rows, cols]^T. Each weight tile is reused across several tokens.
void matmul(float* y, const float* x, const float* w, int n, int rows, int cols);

// y[i] += b[i] for every row of Y[n, dim] (bias of a Linear layer).
void add_bias(float* y, const float* b, int n, int dim);

}  // namespace kvs::ops
