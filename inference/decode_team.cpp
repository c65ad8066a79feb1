// DecodeTeam's barrier: the last thread to arrive resets the dealing counters and opens the next
// generation (with the failure state of the parts before it); the others spin for a bounded time (the gaps inside a token are microseconds) and
// then sleep on the generation word, so a busy machine loses no more than that spin per barrier.
#include "inference/decode_team.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kvs {
namespace {

// How long a waiting thread spins before it sleeps. Longer than the serial parts between two
// parallel parts of a token (norms, RoPE, hooks: microseconds), far shorter than a token.
constexpr auto kSpin = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace

bool DecodeTeam::sync() {
  const unsigned gen = generation_.load(std::memory_order_acquire);
  unsigned next;
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == size_.load(std::memory_order_relaxed)) {
    // Nobody can arrive at the next barrier, or deal, before the generation below moves on.
    arrived_.store(0, std::memory_order_relaxed);
    reset_heads(size_.load(std::memory_order_relaxed));
    next = ((gen & ~1u) + 2) | (failed_.load(std::memory_order_relaxed) ? 1u : 0u);
    generation_.store(next, std::memory_order_release);
    generation_.notify_all();
  } else {
    const auto deadline = std::chrono::steady_clock::now() + kSpin;
    for (int i = 1; (next = generation_.load(std::memory_order_acquire)) == gen; ++i) {
      cpu_relax();
      if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) {
        generation_.wait(gen, std::memory_order_acquire);
        i = 0;
      }
    }
  }
  // The failure bit travels in the generation word: thread 0 may fail in its next serial part
  // before a slow waiter gets here, and that must not make this waiter leave a barrier early.
  return (next & 1u) == 0;
}

}  // namespace kvs
