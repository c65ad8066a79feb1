// Numerically stable softmax in fp32 (max-subtracted), returning the log-sum-exp.
#pragma once

namespace kvs::ops {

// In place: x[n] <- softmax(x). Returns log(sum_j exp(x_j)) of the input. n must be >= 1.
float softmax(float* x, int n);

}  // namespace kvs::ops
