// DecodeTeam: every index of a product runs exactly once and is finished when parallel() returns
// (also after the workers fell asleep, and across many tiny products where late workers race the
// next job), the workers really help, meanwhile() overlaps the product and its exception comes
// out after the product is complete, and body's exception leaves run() with the team reusable.
#include "inference/decode_team.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kvs {
namespace {

TEST(DecodeTeam, EveryIndexRunsOnceAndIsDoneWhenParallelReturns) {
  DecodeTeam team;
  const std::vector<long> totals = {0, 1, 7, 100, 10007};
  int wrong = 0;
  team.run(4, [&] {
    for (int round = 0; round < 50; ++round) {
      // Every 10th round the caller is 2 ms late: past the spin, so the workers sleep.
      if (round % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      for (long total : totals) {
        std::vector<std::atomic<int>> hits(total);
        team.parallel(total, 3, [&](long b, long e) {
          for (long i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
        });
        for (long i = 0; i < total; ++i) wrong += hits[i].load(std::memory_order_relaxed) != 1;
      }
    }
  });
  EXPECT_EQ(wrong, 0);
}

// Stress: a hundred thousand products of one to three indices on more threads than cores, so
// workers keep waking late, while the next job is being written; each index must still run once,
// with its own product's function.
TEST(DecodeTeam, LateWorkersNeverRunAnotherProductsRows) {
  DecodeTeam team;
  constexpr int kProducts = 100000;
  std::vector<std::atomic<int>> runs(kProducts * 3);
  team.run(6, [&] {
    for (int p = 0; p < kProducts; ++p) {
      team.parallel(1 + p % 3, 1, [&, p](long b, long e) {
        for (long i = b; i < e; ++i) runs[p * 3 + i].fetch_add(1, std::memory_order_relaxed);
      });
    }
  });
  int wrong = 0;
  for (int p = 0; p < kProducts; ++p) {
    for (int i = 0; i < 3; ++i) wrong += runs[p * 3 + i].load() != (i < 1 + p % 3 ? 1 : 0);
  }
  EXPECT_EQ(wrong, 0);
}

TEST(DecodeTeam, WorkersTakeChunks) {
  DecodeTeam team;
  std::mutex m;
  std::set<int> threads;
  team.run(3, [&] {
    for (int p = 0; p < 20; ++p) {
      team.parallel(30, 1, [&](long, long) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard<std::mutex> lock(m);
        threads.insert(omp_get_thread_num());
      });
    }
  });
  EXPECT_GE(threads.size(), 2u);
}

TEST(DecodeTeam, MeanwhileOverlapsAndItsExceptionComesAfterTheProduct) {
  DecodeTeam team;
  std::vector<std::atomic<int>> hits(5000);
  bool product_complete_at_throw = false;
  EXPECT_THROW(team.run(3, [&] {
    try {
      team.parallel(
          5000, 16, [&](long b, long e) { for (long i = b; i < e; ++i) hits[i].fetch_add(1); },
          [&] { throw std::runtime_error("hook failed"); });
    } catch (const std::runtime_error&) {
      product_complete_at_throw = true;
      for (auto& h : hits) product_complete_at_throw &= h.load() == 1;
      throw;
    }
  }), std::runtime_error);
  EXPECT_TRUE(product_complete_at_throw);
}

TEST(DecodeTeam, BodyExceptionLeavesRunAndTheTeamIsReusable) {
  DecodeTeam team;
  EXPECT_THROW(team.run(3, [&] {
    team.parallel(100, 4, [](long, long) {});
    throw std::invalid_argument("controller failed");
  }), std::invalid_argument);
  long sum = 0;
  std::mutex m;
  team.run(3, [&] {
    team.parallel(1000, 7, [&](long b, long e) {
      std::lock_guard<std::mutex> lock(m);
      for (long i = b; i < e; ++i) sum += i;
    });
  });
  EXPECT_EQ(sum, 999L * 1000 / 2);
}

TEST(DecodeTeam, OneThreadRunsOnTheCaller) {
  DecodeTeam team;
  const auto caller = std::this_thread::get_id();
  long dealt = 0;
  bool on_caller = true;
  team.run(1, [&] {
    team.parallel(1000, 8, [&](long b, long e) {
      on_caller &= std::this_thread::get_id() == caller;
      dealt += e - b;
    });
  });
  EXPECT_TRUE(on_caller);
  EXPECT_EQ(dealt, 1000);
}

}  // namespace
}  // namespace kvs
