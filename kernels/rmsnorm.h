// RMSNorm: out = x / sqrt(mean(x^2) + eps) * weight, for one vector or many rows.
#pragma once

namespace kvs::ops {

// out[dim] = rmsnorm(x[dim]) * w[dim]; out may alias x.
void rmsnorm(float* out, const float* x, const float* w, int dim, float eps);

// Row-wise over X[n, dim] -> OUT[n, dim], rows split over the OpenMP threads.
void rmsnorm_rows(float* out, const float* x, const float* w, int n, int dim, float eps);

}  // namespace kvs::ops
