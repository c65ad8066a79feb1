// The threads of one decode step. The calling thread runs the token (norms, RoPE, the cache, the
// hooks) and hands each product to the team with parallel(); the other threads of one OpenMP
// region, kept for the whole token, wait for the next product by spinning briefly, then sleeping.
// Waking a sleeping worker costs tens of microseconds: one region per token pays that once
// instead of at every matrix. Nothing waits for a worker that is not there: a worker the OS has
// descheduled simply takes no rows, so a busy machine costs the token that worker's share only.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <utility>

namespace kvs {

class DecodeTeam {
 public:
  DecodeTeam();
  ~DecodeTeam();
  DecodeTeam(const DecodeTeam&) = delete;
  DecodeTeam& operator=(const DecodeTeam&) = delete;

  // Runs body() on the calling thread while the other n_threads - 1 threads of one parallel
  // region help with its parallel() calls (n_threads <= 1: no region). body's exception, if any,
  // leaves run() after the workers have stopped.
  template <class Body>
  void run(int n_threads, Body&& body) {
    std::exception_ptr error;
    run_region(n_threads, [](void* b) { (*static_cast<Body*>(b))(); }, &body, error);
    if (error) std::rethrow_exception(error);
  }

  // From body only. Deals [0, total) out in chunks of `chunk`: f(begin, end) runs for every chunk,
  // on this thread or a worker. Meanwhile this thread first runs `meanwhile()` (work that the
  // product does not read or write, such as the hooks), then takes chunks itself. Returns when
  // every chunk is done; rethrows what meanwhile() threw after that.
  template <class F, class G>
  void parallel(long total, long chunk, F&& f, G&& meanwhile) {
    publish(total, chunk, [](void* fn, long b, long e) { (*static_cast<F*>(fn))(b, e); }, &f);
    std::exception_ptr error;
    try {
      meanwhile();
    } catch (...) {
      error = std::current_exception();
    }
    finish();
    if (error) std::rethrow_exception(error);
  }
  template <class F>
  void parallel(long total, long chunk, F&& f) {
    parallel(total, chunk, std::forward<F>(f), [] {});
  }

 private:
  using Call = void (*)(void* fn, long begin, long end);
  struct Shared;  // the job board the threads share; see decode_team.cpp

  void run_region(int n_threads, void (*body)(void*), void* arg, std::exception_ptr& error);
  void publish(long total, long chunk, Call call, void* fn);
  void finish();

  std::unique_ptr<Shared> shared_;
};

}  // namespace kvs
