// The threads of decode. The calling thread runs each token (norms, RoPE, the cache, the hooks)
// and hands every product to the team with parallel(); the team's workers are threads of their
// own that live as long as the team and wait for the next product by spinning briefly, then
// sleeping. Waking a sleeping thread costs tens of microseconds on a quiet machine and up to
// milliseconds on a VM whose idle vCPU has been halted; back-to-back products and tokens find
// the workers still spinning. Nothing waits for a worker that is not there: a worker the OS has
// descheduled simply takes no rows, so a busy machine costs the token that worker's share only.
#pragma once
#include <exception>
#include <memory>
#include <utility>

namespace kvs {

class DecodeTeam {
 public:
  DecodeTeam();
  ~DecodeTeam();  // stops and joins the workers
  DecodeTeam(const DecodeTeam&) = delete;
  DecodeTeam& operator=(const DecodeTeam&) = delete;

  // Uses n threads from now on: the caller and n - 1 workers, started here (n <= 1: none).
  void resize(int n);
  int size() const;

  // Deals [0, total) out in chunks of `chunk`: f(begin, end) runs for every chunk, on this thread
  // or a worker. Meanwhile this thread first runs `meanwhile()` (work that the product does not
  // read or write, such as the hooks), then takes chunks itself. Returns when every chunk is
  // done; rethrows what meanwhile() threw after that. One caller at a time.
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
  struct Shared;  // the job board and the workers; see decode_team.cpp

  void publish(long total, long chunk, Call call, void* fn);
  void finish();

  std::unique_ptr<Shared> shared_;
};

}  // namespace kvs
