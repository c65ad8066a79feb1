// DecodeTeam: every dealt index goes to exactly one thread, sync() orders the phases of a token
// (also when a thread is late enough that the others fall asleep), a failure in thread 0's serial
// part stops every thread at the next sync and is rethrown, and one thread runs on the caller.
#include "inference/decode_team.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kvs {
namespace {

TEST(DecodeTeam, DealGivesEveryIndexToExactlyOneThread) {
  DecodeTeam team;
  const std::vector<long> totals = {0, 1, 7, 100, 10007};
  std::vector<std::vector<std::atomic<int>>> hits;
  for (long n : totals) hits.emplace_back(n);
  std::atomic<int> bad_ranges{0};
  team.run(4, [&](DecodeTeam& t) {
    for (std::size_t d = 0; d < totals.size(); ++d) {
      t.deal(totals[d], 3, [&](long b, long e) {
        if (b < 0 || e > totals[d] || b >= e) bad_ranges.fetch_add(1);
        for (long i = b; i < e; ++i) hits[d][i].fetch_add(1);
      });
      t.sync();
    }
  });
  EXPECT_EQ(bad_ranges.load(), 0);
  for (std::size_t d = 0; d < totals.size(); ++d) {
    for (long i = 0; i < totals[d]; ++i) ASSERT_EQ(hits[d][i].load(), 1) << "total " << totals[d] << " index " << i;
  }
}

TEST(DecodeTeam, SyncOrdersPhasesEvenAfterTheOthersSleep) {
  DecodeTeam team;
  constexpr int kThreads = 4, kPhases = 300;
  std::vector<int> slot(kThreads, -1);  // written by its own thread, read by all after sync
  std::atomic<int> wrong{0}, sizes_seen{0};
  team.run(kThreads, [&](DecodeTeam& t) {
    const int me = omp_get_thread_num();
    if (omp_get_num_threads() == kThreads) sizes_seen.fetch_add(1);
    for (int phase = 0; phase < kPhases; ++phase) {
      // Every 50th phase thread 0 is 2 ms late: past the spin, so the others sleep.
      if (me == 0 && phase % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      slot[me] = phase;
      t.sync();
      for (int k = 0; k < kThreads; ++k) {
        if (slot[k] != phase) wrong.fetch_add(1);
      }
      t.sync();
    }
  });
  EXPECT_EQ(sizes_seen.load(), kThreads);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(DecodeTeam, FailureInFirstStopsEveryThreadAtTheNextSyncAndIsRethrown) {
  DecodeTeam team;
  std::vector<int> last_phase(3, -1);
  EXPECT_THROW(team.run(3, [&](DecodeTeam& t) {
    for (int phase = 0; phase < 10; ++phase) {
      t.first([&] {
        if (phase == 4) throw std::invalid_argument("hook failed");
      });
      if (!t.sync()) return;
      last_phase[omp_get_thread_num()] = phase;
    }
  }), std::invalid_argument);
  EXPECT_EQ(last_phase, (std::vector<int>{3, 3, 3}));
  // The team is whole again for the next token.
  int runs = 0;
  team.run(3, [&](DecodeTeam& t) {
    t.first([&] { ++runs; });
    EXPECT_TRUE(t.sync());
  });
  EXPECT_EQ(runs, 1);
}

// Thread 0 arrives last at a barrier the others sleep at, then fails at once in its next serial
// part, before the sleepers have woken: they must still pass that barrier and stop at the next.
TEST(DecodeTeam, FailureJustAfterABarrierDoesNotLetSleepersLeaveIt) {
  DecodeTeam team;
  for (int round = 0; round < 20; ++round) {
    std::vector<int> passed(3, 0);
    EXPECT_THROW(team.run(3, [&](DecodeTeam& t) {
      if (omp_get_thread_num() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (!t.sync()) return;
      ++passed[omp_get_thread_num()];
      t.first([] { throw std::runtime_error("controller failed"); });
      if (!t.sync()) return;
      ++passed[omp_get_thread_num()];
    }), std::runtime_error);
    ASSERT_EQ(passed, (std::vector<int>{1, 1, 1})) << "round " << round;
  }
}

TEST(DecodeTeam, OneThreadRunsOnTheCaller) {
  DecodeTeam team;
  const auto caller = std::this_thread::get_id();
  long dealt = 0;
  bool on_caller = false;
  team.run(1, [&](DecodeTeam& t) {
    on_caller = std::this_thread::get_id() == caller;
    t.deal(1000, 8, [&](long b, long e) { dealt += e - b; });
    EXPECT_TRUE(t.sync());
  });
  EXPECT_TRUE(on_caller);
  EXPECT_EQ(dealt, 1000);
}

}  // namespace
}  // namespace kvs
