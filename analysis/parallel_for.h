// parallel_for: f(i) for i in [0, n) on the OpenMP threads (dynamic, one index at a time), with
// the first exception any call threw rethrown once all have run; on the calling thread alone
// when `parallel` is false (work too small to wake a team for). The trace writer and reader pack
// and unpack chunks of attention with it.
#pragma once
#include <exception>

namespace kvs {

// Whether `entries` entries of light work (a few operations each, the policies' and the live
// run's per-layer passes) are worth waking a team for: about 0.1 ms on one thread, above the
// tens of microseconds a sleeping team can take to wake on a VM. The 8B shape's 32 heads reach it
// from 4K keys; SmolLM2's 9 not within its context, so the CPU engine, whose own team runs
// beside the hooks, keeps them on one thread there.
inline bool worth_a_team(long entries) { return entries >= (1L << 17); }

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
