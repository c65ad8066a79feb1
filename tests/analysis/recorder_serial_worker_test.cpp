// SerialWorker: jobs run in order on one thread, the queue applies backpressure, and a failed
// job's exception comes back to the submitter (later jobs dropped).
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "analysis/serial_worker.h"

namespace kvs {
namespace {

TEST(SerialWorker, RunsJobsInOrder) {
  std::vector<int> order;
  SerialWorker w(2);
  for (int i = 0; i < 50; ++i) w.submit([&order, i] { order.push_back(i); });
  w.drain();
  ASSERT_EQ(order.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[i], i);
}

TEST(SerialWorker, ErrorComesBackAndLaterJobsAreDropped) {
  std::atomic<int> ran{0};
  SerialWorker w(8);
  w.submit([&] { ++ran; });
  w.submit([] { throw std::runtime_error("disk full"); });
  bool thrown = false;
  try {
    for (int i = 0; i < 100; ++i) w.submit([&] { ++ran; });
    w.drain();
  } catch (const std::runtime_error& e) {
    thrown = true;
    EXPECT_STREQ(e.what(), "disk full");
  }
  EXPECT_TRUE(thrown);
  EXPECT_THROW(w.drain(), std::runtime_error);
  EXPECT_THROW(w.submit([] {}), std::runtime_error);
  EXPECT_LT(ran.load(), 101);
}

TEST(SerialWorker, DestructorDropsPendingJobs) {
  std::atomic<int> ran{0};
  {
    SerialWorker w(100);
    for (int i = 0; i < 100; ++i) w.submit([&] { ++ran; });
  }
  EXPECT_LE(ran.load(), 100);
}

}  // namespace
}  // namespace kvs
