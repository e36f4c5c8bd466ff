// Runs a communicator's collectives one at a time, in issue order. Blocking calls run on the
// caller's thread when nothing is queued (no thread hop on the fast path); asynchronous calls
// go to a worker thread that starts on first use.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "core/common/status.h"

namespace weft {

// A queued piece of work and its outcome. The work itself lives in WorkTask<Work>, so that one
// allocation holds both (a std::function member needed its own for any capture over 16 bytes:
// an asynchronous collective's buffers, count, dtype and op).
class Task {
 public:
  virtual ~Task() = default;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  // Runs the work once, recording its outcome; never throws.
  void run() noexcept;
  // Blocks until run() has finished.
  void wait();
  bool done() const;
  // Throws the recorded error, if any (call after done()).
  void rethrow() const;
  // Fails the task without running it (executor shut down or communicator aborted).
  void cancel(const Error& e) noexcept;

 protected:
  Task() = default;

 private:
  virtual void invoke() = 0;
  // Drops the work's captured state (buffers' owners) as soon as the task is over.
  virtual void release() noexcept = 0;

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_ = Status::ok;
  std::string message_;
};

template <class Work>
class WorkTask final : public Task {
 public:
  explicit WorkTask(Work work) : work_(std::move(work)) {}

 private:
  void invoke() override { (*work_)(); }
  void release() noexcept override { work_.reset(); }
  std::optional<Work> work_;
};

class Executor {
 public:
  Executor() = default;
  ~Executor() { shutdown(); }
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs work after everything queued before it; throws its error. With nothing queued it runs
  // on the calling thread without wrapping the work in a std::function: the blocking fast path
  // makes no heap allocation (tests/multiproc/syscall-budget counts them).
  template <class Work>
  void run_blocking(Work&& work) {
    if (begin_inline()) {
      InlineRun done{this};
      work();
      return;
    }
    // Something is queued: hand the work over and wait, so it may refer to the caller's frame.
    std::shared_ptr<Task> task = submit([&work] { work(); });
    task->wait();
    task->rethrow();
  }
  // Queues work (any callable, taken by value); the returned task completes when it has run.
  template <class Work>
  std::shared_ptr<Task> submit(Work&& work) {
    return enqueue(std::make_shared<WorkTask<std::decay_t<Work>>>(std::forward<Work>(work)));
  }
  // Wakes the worker (used by abort: queued tasks then see the abort flag when they run).
  void wake();
  // Lets queued work finish, then stops the worker thread. Idempotent.
  void shutdown();

 private:
  std::shared_ptr<Task> enqueue(std::shared_ptr<Task> task);
  void worker_loop();
  // Claims the executor for a call on this thread when nothing is queued or running.
  bool begin_inline();
  // Releases it again (also when the work throws).
  struct InlineRun {
    Executor* e;
    ~InlineRun();
  };

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool busy_ = false;  // a task (queued or inline) is running
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace weft
