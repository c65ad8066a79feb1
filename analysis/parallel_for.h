// parallel_for: f(i) for i in [0, n) on the OpenMP threads (dynamic, one index at a time), with
// the first exception any call threw rethrown once all have run; on the calling thread alone
// when `parallel` is false (work too small to wake a team for). The trace writer and reader pack
// and unpack chunks of attention with it.
#pragma once
#include <exception>

namespace kvs {

template <class F>
void parallel_for(int n, F&& f, bool parallel = true) {
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) if (parallel && n > 1)
  for (int i = 0; i < n; ++i) {
    try {
      f(i);
    } catch (...) {
#pragma omp critical(kvs_parallel_for_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace kvs
