// DecodeTeam's job board and workers. Each product is one epoch: the caller writes the job, then
// moves the epoch on; workers see it, take chunks, and count what they finished. Rows are split
// into one contiguous part per thread, walked front to back (one long stream per thread that the
// hardware prefetcher follows); a thread done with its part takes chunks from the front of the
// others'.
// The epoch is a sequence lock: odd while the caller writes the next job, even once it is
// published. A worker that wakes late reads the job, then checks that the epoch has not moved;
// each part's counter carries the epoch in its high half, so it cannot take rows of another job.
#include "inference/decode_team.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kvs {
namespace {

// How long a waiting thread spins before it sleeps. Longer than the serial parts between two
// products of a token (norms, RoPE, hooks: microseconds), far shorter than a token.
constexpr auto kSpin = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Waits until word != old: spins for kSpin, then sleeps on the word. Returns the new value.
template <class T>
T wait_change(const std::atomic<T>& word, T old) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    const T now = word.load(std::memory_order_acquire);
    if (now != old) return now;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) word.wait(old, std::memory_order_acquire);
  }
}

inline uint64_t tagged(uint32_t epoch, uint32_t taken) { return uint64_t{epoch} << 32 | taken; }

}  // namespace

struct DecodeTeam::Shared {
  struct alignas(64) Part {           // own cache line: its owner advances it alone until others steal
    std::atomic<uint64_t> head{0};    // epoch << 32 | indices of the part taken so far
  };
  std::atomic<uint32_t> epoch{0};     // 2 per product: odd while its job is written, even after
  std::atomic<bool> stop{false};      // set with the last epoch: workers leave
  alignas(64) std::atomic<long> done{0};  // indices finished in the current epoch
  // The current job, written before its epoch is published (atomics: a late worker may read them
  // while the next job is written, and then discards what it read).
  std::atomic<long> total{0}, chunk{1};
  std::atomic<Call> call{nullptr};
  std::atomic<void*> fn{nullptr};
  int n = 1;                          // threads of the team, the caller included
  std::vector<Part> parts;            // [n]
  std::vector<std::thread> workers;   // [n - 1], worker i + 1 owns parts[i + 1]

  // Takes and runs chunks of the job of (even) epoch e, own part first; returns when none is left
  // or the job has moved on.
  void work(uint32_t e, int me) {
    const long t = total.load(std::memory_order_relaxed), c = chunk.load(std::memory_order_relaxed);
    const Call f = call.load(std::memory_order_relaxed);
    void* const arg = fn.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (epoch.load(std::memory_order_relaxed) != e) return;  // those reads may mix two jobs
    long finished = 0;  // indices this thread ran, counted into `done` once on leaving
    for (int k = 0; k < n; ++k) {
      const int p = (me + k) % n;
      const long first = t * p / n, end = t * (p + 1) / n;
      uint64_t head = parts[p].head.load(std::memory_order_relaxed);
      for (;;) {
        if (static_cast<uint32_t>(head >> 32) != e) return report(finished, t);  // the product moved on
        const long begin = first + static_cast<long>(static_cast<uint32_t>(head));
        if (begin >= end) break;
        const long stop_at = std::min(end, begin + c);
        if (!parts[p].head.compare_exchange_weak(head, tagged(e, static_cast<uint32_t>(stop_at - first)),
                                                 std::memory_order_relaxed)) {
          continue;
        }
        f(arg, begin, stop_at);
        finished += stop_at - begin;
        head = parts[p].head.load(std::memory_order_relaxed);
      }
    }
    report(finished, t);
  }

  // Counts a thread's finished indices into `done` (one shared write per thread and product, not
  // one per chunk) and wakes the caller when they complete the product's `t`.
  void report(long finished, long t) {
    if (finished > 0 && done.fetch_add(finished, std::memory_order_acq_rel) + finished == t) done.notify_all();
  }
};

DecodeTeam::DecodeTeam() : shared_(std::make_unique<Shared>()) { shared_->parts = std::vector<Shared::Part>(1); }

DecodeTeam::~DecodeTeam() { resize(1); }

int DecodeTeam::size() const { return shared_->n; }

void DecodeTeam::resize(int n) {
  Shared& s = *shared_;
  n = std::max(n, 1);
  if (n == s.n) return;
  if (!s.workers.empty()) {
    s.stop.store(true, std::memory_order_relaxed);
    publish(0, 1, nullptr, nullptr);  // wakes them to see `stop`
    for (std::thread& t : s.workers) t.join();
    s.workers.clear();
    s.stop.store(false, std::memory_order_relaxed);
  }
  s.n = n;
  s.parts = std::vector<Shared::Part>(n);
  const uint32_t start = s.epoch.load(std::memory_order_relaxed);
  for (int me = 1; me < n; ++me) {
    try {
      s.workers.emplace_back([&s, me, start] {
        pthread_setname_np(pthread_self(), "kvs-decode");  // as top and perf show it
        for (uint32_t seen = start;;) {
          do seen = wait_change(s.epoch, seen); while (seen & 1u);
          if (s.stop.load(std::memory_order_relaxed)) return;
          s.work(seen, me);
        }
      });
    } catch (const std::system_error&) {
      break;  // no more threads: the parts of missing workers are taken by the others
    }
  }
}

void DecodeTeam::publish(long total, long chunk, Call call, void* fn) {
  Shared& s = *shared_;
  const uint32_t e = s.epoch.load(std::memory_order_relaxed) + 2;
  s.epoch.store(e - 1, std::memory_order_relaxed);  // writing
  std::atomic_thread_fence(std::memory_order_release);
  s.total.store(total, std::memory_order_relaxed);
  s.chunk.store(std::max(chunk, 1L), std::memory_order_relaxed);
  s.call.store(call, std::memory_order_relaxed);
  s.fn.store(fn, std::memory_order_relaxed);
  s.done.store(0, std::memory_order_relaxed);
  for (int p = 0; p < s.n; ++p) s.parts[p].head.store(tagged(e, 0), std::memory_order_relaxed);
  s.epoch.store(e, std::memory_order_release);
  if (s.n > 1) s.epoch.notify_all();
}

void DecodeTeam::finish() {
  Shared& s = *shared_;
  const long total = s.total.load(std::memory_order_relaxed);
  s.work(s.epoch.load(std::memory_order_relaxed), 0);
  // Every chunk is taken; wait for workers still inside theirs.
  for (long d = s.done.load(std::memory_order_acquire); d != total;) d = wait_change(s.done, d);
}

}  // namespace kvs
