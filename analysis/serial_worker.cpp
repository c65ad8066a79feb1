// SerialWorker: ordered background jobs with backpressure and error hand-back.
#include "analysis/serial_worker.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inference/thread_team.h"

namespace kvs {

SerialWorker::SerialWorker(std::size_t max_queued, const char* name)
    : max_queued_(max_queued ? max_queued : 1), name_(name), thread_([this] { run(); }) {}

SerialWorker::~SerialWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    jobs_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

void SerialWorker::submit(std::function<void()> job) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return jobs_.size() < max_queued_ || error_; });
  if (error_) std::rethrow_exception(error_);
  jobs_.push_back(std::move(job));
  cv_.notify_all();
}

void SerialWorker::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return (jobs_.empty() && !busy_) || error_; });
  if (error_) std::rethrow_exception(error_);
}

void SerialWorker::run() {
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);  // see the header; may fail: harmless
  pthread_setname_np(pthread_self(), name_);
  start_thread_team();  // the jobs' parallel regions' team, while memory has room for it
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return closing_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // closing
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      job();
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (failure && !error_) {
      error_ = failure;
      jobs_.clear();
    }
    cv_.notify_all();
  }
}

}  // namespace kvs
