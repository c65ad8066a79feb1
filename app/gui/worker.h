// A background thread for the app's slow work (trace I/O, recording, simulation). Jobs carry a
// key; a job submitted under a key replaces a queued, not yet started job of that key (a newer
// request supersedes an older one). Results return to the UI thread through post()/drain().
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace kvs {

// Handed to a running job: progress reporting and cancellation polling.
class JobContext {
 public:
  explicit JobContext(std::atomic<bool>& cancel, std::atomic<float>& progress)
      : cancel_(cancel), progress_(progress) {}
  bool cancelled() const { return cancel_.load(); }
  void progress(float fraction) { progress_.store(fraction); }
 private:
  std::atomic<bool>& cancel_;
  std::atomic<float>& progress_;
};

class Worker {
 public:
  using Job = std::function<void(JobContext&)>;
  Worker();
  ~Worker();  // cancels the running job and joins
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues `job` under `key` with a label shown while it runs.
  void submit(const std::string& key, const std::string& label, Job job);
  // Drops queued jobs and asks the running one to stop.
  void cancel_all();
  bool busy() const;               // running or queued work
  std::string running_label() const;
  float progress() const { return progress_.load(); }
  // Blocks until nothing is queued or running (headless rendering, tests).
  void wait_idle();

  // Closures to run on the UI thread (results of jobs). Thread-safe.
  void post(std::function<void()> fn);
  // Runs the posted closures; called once per frame by the UI thread.
  void drain();
  // Receives (on the UI thread) the message of an exception a job let escape.
  void set_error_handler(std::function<void(const std::string&)> handler) { error_handler_ = std::move(handler); }

 private:
  struct Item {
    std::string key, label;
    Job job;
  };
  void loop();

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Item> queue_;
  std::string running_label_;
  bool running_ = false;
  bool stop_ = false;
  std::atomic<bool> cancel_{false};
  std::atomic<float> progress_{0.0f};
  std::mutex post_mu_;
  std::deque<std::function<void()>> posted_;
  std::function<void(const std::string&)> error_handler_;
  std::thread thread_;
};

}  // namespace kvs
