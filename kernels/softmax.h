// Numerically stable softmax in fp32 (max-subtracted), returning the log-sum-exp.
#pragma once

namespace kvs::ops {

// In place: x[n] <- softmax(x). Returns log(sum_j exp(x_j)) of the input. n must be >= 1.
float softmax(float* x, int n);

// In place: x[n] <- exp(x - max); *max = the largest input. Returns the sum of the new x (fp32).
// softmax without the normalization, for attention split over key ranges. n must be >= 1.
float exp_shifted(float* x, int n, float* max);

}  // namespace kvs::ops
