// SerialWorker: one background thread running jobs in submission order, with a bounded queue
// (submit blocks while it is full) and the first job's exception kept and rethrown to the
// submitting side. The trace recorder uses it to overlap writing with inference. The thread runs
// at the lowest priority (nice 19): on a machine whose cores all run decode threads, a writer of
// equal priority preempted them mid-product, and the team's join then waited for the preempted
// one (capture cost +16-18% at a 512-token context on 2 cores, +8-10% at nice 19). It cannot fall
// behind for long: a full queue blocks the submitter, which frees a core.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace kvs {

class SerialWorker {
 public:
  // `name` is the thread's, as top and perf show it (15 characters at most).
  explicit SerialWorker(std::size_t max_queued, const char* name = "kvs-writer");
  ~SerialWorker();  // drops jobs not yet started, waits for the running one
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  // Queues a job; rethrows the exception of an earlier failed job (later jobs are dropped).
  void submit(std::function<void()> job);
  // Waits until every queued job has run; rethrows a failed job's exception.
  void drain();

 private:
  void run();

  std::size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool busy_ = false;
  bool closing_ = false;
  std::exception_ptr error_;
  const char* name_;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace kvs
