#include "core/comm/executor.h"

namespace weft {

void Task::run() noexcept {
  Status status = Status::ok;
  std::string message;
  try {
    invoke();
  } catch (const Error& e) {
    status = e.status();
    message = e.message();
  } catch (const std::bad_alloc&) {
    status = Status::out_of_memory;
    message = "out of memory";
  } catch (const std::exception& e) {
    status = Status::internal;
    message = std::string("internal error: ") + e.what();
  }
  release();
  std::lock_guard<std::mutex> lock(mutex_);
  status_ = status;
  message_ = std::move(message);
  done_ = true;
  cv_.notify_all();
}

void Task::cancel(const Error& e) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_) return;
  release();
  status_ = e.status();
  message_ = e.message();
  done_ = true;
  cv_.notify_all();
}

void Task::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
}

bool Task::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void Task::rethrow() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (status_ != Status::ok) throw Error(status_, message_);
}

bool Executor::begin_inline() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (busy_ || !queue_.empty()) return false;
  busy_ = true;
  return true;
}

Executor::InlineRun::~InlineRun() {
  std::lock_guard<std::mutex> l(e->mutex_);
  e->busy_ = false;
  e->cv_.notify_all();
}

std::shared_ptr<Task> Executor::enqueue(std::shared_ptr<Task> task) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) {
    task->cancel(Error(Status::invalid_argument, "the communicator is being destroyed"));
    return task;
  }
  queue_.push_back(task);
  if (!thread_.joinable()) thread_ = std::thread([this] { worker_loop(); });
  cv_.notify_all();
  return task;
}

void Executor::wake() {
  std::lock_guard<std::mutex> lock(mutex_);
  cv_.notify_all();
}

void Executor::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // An inline blocking call may hold busy_; wait for it so tasks never run concurrently.
    cv_.wait(lock, [&] { return (!queue_.empty() && !busy_) || (stopping_ && queue_.empty()); });
    if (queue_.empty()) return;
    std::shared_ptr<Task> task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    task->run();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void Executor::shutdown() {
  std::thread t;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    cv_.notify_all();
    t = std::move(thread_);
  }
  if (t.joinable()) t.join();
  // Inline work may still be running on another thread only if the caller broke the
  // one-thread-per-communicator rule; wait for it anyway rather than free under it.
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return !busy_; });
}

}  // namespace weft
