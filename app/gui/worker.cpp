// Background job thread with superseding per-key queue and a UI-thread result queue.
#include "app/gui/worker.h"

#include <exception>

#include "inference/host_memory.h"
#include "inference/thread_team.h"

namespace kvs {

Worker::Worker() : thread_([this] { loop(); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
    cancel_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Worker::submit(const std::string& key, const std::string& label, Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->key == key) it = queue_.erase(it);
      else ++it;
    }
    queue_.push_back(Item{key, label, std::move(job)});
  }
  cv_.notify_all();
}

void Worker::cancel_all() {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
  if (running_) cancel_ = true;
  idle_cv_.notify_all();
}

bool Worker::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ || !queue_.empty();
}

std::string Worker::running_label() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ ? running_label_ : std::string();
}

void Worker::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return !running_ && queue_.empty(); });
}

void Worker::post(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(post_mu_);
  posted_.push_back(std::move(fn));
}

void Worker::drain() {
  std::deque<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

void Worker::loop() {
  start_thread_team();  // the jobs' parallel regions' team, while memory has room for it
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
      running_label_ = item.label;
      cancel_ = false;
      progress_ = 0.0f;
    }
    JobContext ctx(cancel_, progress_);
    try {
      item.job(ctx);
    } catch (const std::exception& e) {
      // Jobs report expected errors themselves; anything else reaches the error handler.
      post([this, what = error_text(e)] {
        if (error_handler_) error_handler_(what);
      });
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = false;
      running_label_.clear();
    }
    idle_cv_.notify_all();
  }
}

}  // namespace kvs
