// The threads of one decode step, kept inside a single OpenMP parallel region for the whole token:
// a barrier that spins briefly before sleeping, per-thread counters that deal rows out in chunks,
// and thread 0 running the serial parts (hooks included) without letting an exception out of the
// region. Waking a sleeping worker costs tens of microseconds; one region per token pays that once
// instead of at every matrix (README, "Performance").
#pragma once
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>

namespace kvs {

class DecodeTeam {
 public:
  // Runs body(team) on every thread of one parallel region of `n_threads` threads (1: on the
  // calling thread alone), then rethrows what thread 0 caught in first(), if anything.
  template <class Body>
  void run(int n_threads, Body&& body) {
    if (heads_size_ < std::max(n_threads, 1)) {
      heads_size_ = std::max(n_threads, 1);
      heads_ = std::make_unique<Head[]>(heads_size_);
    }
    reset_heads(heads_size_);
    arrived_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    failed_.store(false, std::memory_order_relaxed);
    generation_.store(generation_.load(std::memory_order_relaxed) & ~1u, std::memory_order_relaxed);
    if (n_threads <= 1) {
      size_.store(1, std::memory_order_relaxed);
      body(*this);
    } else {
#pragma omp parallel num_threads(n_threads)
      {
        // Every thread stores the same count before it first arrives at the barrier.
        size_.store(omp_get_num_threads(), std::memory_order_relaxed);
        body(*this);
      }
    }
    if (error_) std::rethrow_exception(error_);
  }

  // On thread 0 only: runs f, keeping an exception for run() to rethrow. The other threads go on
  // to whatever follows (usually sync()).
  template <class F>
  void first(F&& f) {
    if (omp_get_thread_num() != 0) return;
    try {
      f();
    } catch (...) {
      error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }

  // Waits for every thread of the team, then returns false on all of them when a first() part
  // failed (the body should then return). Resets the dealing counters for the next deal().
  bool sync();

  // Deals [0, total) out in chunks of `chunk`, calling f(begin, end) for each chunk this thread
  // takes. Every thread calls it between two sync()s; each index goes to exactly one thread.
  // Thread t owns the t-th contiguous part and walks it front to back, so each thread reads one
  // long stream that the hardware prefetcher follows; a thread done with its part then takes
  // chunks from the front of the others' (a late thread 0 costs the team little).
  template <class F>
  void deal(long total, long chunk, F&& f) {
    const int n = size_.load(std::memory_order_relaxed), me = omp_get_thread_num();
    for (int k = 0; k < n; ++k) {
      const int part = (me + k) % n;
      const long first = total * part / n, end = total * (part + 1) / n;
      for (;;) {
        const long begin = first + heads_[part].taken.fetch_add(chunk, std::memory_order_relaxed);
        if (begin >= end) break;
        f(begin, std::min(end, begin + chunk));
      }
    }
  }

 private:
  std::atomic<int> size_{1};             // threads in the running region
  std::atomic<int> arrived_{0};          // threads at the current barrier
  std::atomic<unsigned> generation_{0};  // 2 x barriers completed, + 1 once a first() failed
  void reset_heads(int n) {
    for (int i = 0; i < n; ++i) heads_[i].taken.store(0, std::memory_order_relaxed);
  }
  struct alignas(64) Head {  // own cache line: a thread advances its own part's head alone
    std::atomic<long> taken{0};  // indices of the part dealt so far in the current deal()
  };
  std::unique_ptr<Head[]> heads_;  // [heads_size_], one per thread of the region
  int heads_size_ = 0;
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;             // written by thread 0 only
};

}  // namespace kvs
