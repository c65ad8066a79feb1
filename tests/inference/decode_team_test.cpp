// DecodeTeam: every index of a product runs exactly once and is finished when parallel() returns
// (also after the workers fell asleep, and across many tiny products where late workers race the
// next job), the workers really help, meanwhile() overlaps the product and its exception comes
// out after the product is complete, and resizing starts and stops workers.
#include "inference/decode_team.h"

#include <gtest/gtest.h>

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
  team.resize(4);
  const std::vector<long> totals = {0, 1, 7, 100, 10007};
  int wrong = 0;
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
  EXPECT_EQ(wrong, 0);
}

// Stress: a hundred thousand products of one to three indices on more threads than cores, so
// workers keep waking late, while the next job is being written; each index must still run once,
// with its own product's function.
TEST(DecodeTeam, LateWorkersNeverRunAnotherProductsRows) {
  DecodeTeam team;
  team.resize(6);
  constexpr int kProducts = 100000;
  std::vector<std::atomic<int>> runs(kProducts * 3);
  for (int p = 0; p < kProducts; ++p) {
    team.parallel(1 + p % 3, 1, [&, p](long b, long e) {
      for (long i = b; i < e; ++i) runs[p * 3 + i].fetch_add(1, std::memory_order_relaxed);
    });
  }
  int wrong = 0;
  for (int p = 0; p < kProducts; ++p) {
    for (int i = 0; i < 3; ++i) wrong += runs[p * 3 + i].load() != (i < 1 + p % 3 ? 1 : 0);
  }
  EXPECT_EQ(wrong, 0);
}

// Runs 10 products of 30 slow chunks; returns the threads that took chunks.
std::set<std::thread::id> threads_taking_chunks(DecodeTeam& team) {
  std::mutex m;
  std::set<std::thread::id> threads;
  for (int p = 0; p < 10; ++p) {
    team.parallel(30, 1, [&](long, long) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      std::lock_guard<std::mutex> lock(m);
      threads.insert(std::this_thread::get_id());
    });
  }
  return threads;
}

TEST(DecodeTeam, WorkersTakeChunksAndResizeStartsAndStopsThem) {
  DecodeTeam team;
  EXPECT_EQ(team.size(), 1);
  EXPECT_EQ(threads_taking_chunks(team), std::set<std::thread::id>{std::this_thread::get_id()});
  team.resize(3);
  EXPECT_EQ(team.size(), 3);
  const std::set<std::thread::id> three = threads_taking_chunks(team);
  EXPECT_GE(three.size(), 2u);
  EXPECT_LE(three.size(), 3u);
  team.resize(1);
  EXPECT_EQ(threads_taking_chunks(team), std::set<std::thread::id>{std::this_thread::get_id()});
  team.resize(2);
  EXPECT_GE(threads_taking_chunks(team).size(), 2u);
}

TEST(DecodeTeam, MeanwhileOverlapsAndItsExceptionComesAfterTheProduct) {
  DecodeTeam team;
  team.resize(3);
  std::vector<std::atomic<int>> hits(5000);
  bool complete_at_throw = false;
  try {
    team.parallel(
        5000, 16, [&](long b, long e) { for (long i = b; i < e; ++i) hits[i].fetch_add(1); },
        [&] { throw std::runtime_error("hook failed"); });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "hook failed");
    complete_at_throw = true;
    for (auto& h : hits) complete_at_throw &= h.load() == 1;
  }
  EXPECT_TRUE(complete_at_throw);
  // The team goes on with the next product.
  long sum = 0;
  std::mutex m;
  team.parallel(1000, 7, [&](long b, long e) {
    std::lock_guard<std::mutex> lock(m);
    for (long i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum, 999L * 1000 / 2);
}

}  // namespace
}  // namespace kvs
