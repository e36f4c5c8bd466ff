// The CUDA emulator's streams and events (emulator.h). Every stream has a worker thread that
// runs its work in order, each item after WEFT_EMU_OP_DELAY_US (default 100) so that host code
// that does not wait for a stream sees stale data. The legacy default stream's rules hold:
// work on it waits for the device's blocking streams, and work on a blocking stream waits for
// it. Everything is held by shared_ptr: work may outlive a destroyed stream or event, as on a
// GPU (cudaStreamDestroy returns at once; queued work still runs).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/cuda_emulator/emulator.h"
#include "tests/cuda_emulator/state.h"

namespace weft::emu {

struct Stream {
  int device = 0;
  bool blocking = true;  // created without cudaStreamNonBlocking: ordered with the legacy stream
  bool is_default = false;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  bool closing = false;  // cudaStreamDestroy was called: the handle is dead, queued work still runs
};

namespace {

struct Event {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t recorded = 0;  // generation of the latest cudaEventRecord
  uint64_t completed = 0;
  bool timing = true;
  std::chrono::steady_clock::time_point when;
};

// Enqueue order is global (the legacy stream's rules compare positions on several streams).
std::mutex g_order;
std::map<Stream*, std::shared_ptr<Stream>>& streams() {
  static auto* m = new std::map<Stream*, std::shared_ptr<Stream>>;  // leaked: workers outlive exit
  return *m;
}
std::map<Event*, std::shared_ptr<Event>>& events() {
  static auto* m = new std::map<Event*, std::shared_ptr<Event>>;
  return *m;
}
std::shared_ptr<Stream> g_defaults[16];

std::chrono::microseconds op_delay() {
  static const auto d = [] {
    const char* env = std::getenv("WEFT_EMU_OP_DELAY_US");
    return std::chrono::microseconds(env && *env ? std::atoi(env) : 100);
  }();
  return d;
}

void work_loop(std::shared_ptr<Stream> s) {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(s->mutex);
      s->changed.wait(lock, [&] { return !s->queue.empty() || s->closing; });
      if (s->queue.empty()) break;  // destroyed and drained
      work = std::move(s->queue.front());
      s->queue.pop_front();
    }
    work();
    std::lock_guard<std::mutex> lock(s->mutex);
    ++s->completed;
    s->changed.notify_all();
  }
  // A destroyed stream counts for device synchronisation and the legacy stream's ordering until
  // its work is done, as on a GPU; now it is.
  std::lock_guard<std::mutex> order(g_order);
  streams().erase(s.get());
}

std::shared_ptr<Stream> start_stream(int device, bool blocking, bool is_default) {
  auto s = std::make_shared<Stream>();
  s->device = device;
  s->blocking = blocking;
  s->is_default = is_default;
  std::thread(work_loop, s).detach();
  return s;
}

// Work that holds its stream until `other` has run `count` items.
std::function<void()> wait_for(std::shared_ptr<Stream> other, uint64_t count) {
  return [other, count] {
    std::unique_lock<std::mutex> lock(other->mutex);
    other->changed.wait(lock, [&] { return other->completed >= count; });
  };
}

void push(Stream& s, std::function<void()> work) {
  std::lock_guard<std::mutex> lock(s.mutex);
  s.queue.push_back(std::move(work));
  ++s.enqueued;
  s.changed.notify_all();
}

std::shared_ptr<Stream> default_stream_locked(int device) {
  if (!g_defaults[device]) g_defaults[device] = start_stream(device, true, true);
  return g_defaults[device];
}

uint64_t enqueued_count(Stream& s) {
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.enqueued;
}

std::shared_ptr<Event> find_event(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(g_order);
  auto it = events().find(reinterpret_cast<Event*>(e));
  return it == events().end() ? nullptr : it->second;
}

}  // namespace

Stream* find_stream(cudaStream_t handle) {
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
    const int device = bind_current_device();
    std::lock_guard<std::mutex> lock(g_order);
    return default_stream_locked(device).get();
  }
  std::lock_guard<std::mutex> lock(g_order);
  auto it = streams().find(reinterpret_cast<Stream*>(handle));
  if (it == streams().end()) return nullptr;
  std::lock_guard<std::mutex> state(it->second->mutex);
  return it->second->closing ? nullptr : it->second.get();
}

int stream_device(const Stream& s) { return s.device; }

void enqueue_on(Stream& s, std::function<void()> work) {
  std::lock_guard<std::mutex> order(g_order);
  if (s.is_default) {
    for (auto& [raw, other] : streams()) {
      if (other->device != s.device || !other->blocking) continue;
      const uint64_t n = enqueued_count(*other);
      push(s, wait_for(other, n));
    }
  } else if (s.blocking) {
    auto d = default_stream_locked(s.device);
    push(s, wait_for(d, enqueued_count(*d)));
  }
  const auto delay = op_delay();
  push(s, [work = std::move(work), delay] {
    std::this_thread::sleep_for(delay);
    work();
  });
}

void late_write(Stream& s) {
  // One more delay: the write lands after work a non-blocking stream got at the same time (each
  // item waits one delay), without slowing every test that uploads its inputs much.
  const auto hold = op_delay();
  enqueue_on(s, [hold] { std::this_thread::sleep_for(hold); });
}

void drain(Stream& s) {
  std::unique_lock<std::mutex> lock(s.mutex);
  const uint64_t target = s.enqueued;
  s.changed.wait(lock, [&] { return s.completed >= target; });
}

void synchronize_device(int device) {
  std::vector<std::shared_ptr<Stream>> all;
  {
    std::lock_guard<std::mutex> lock(g_order);
    all.push_back(default_stream_locked(device));
    for (auto& [raw, s] : streams()) {
      if (s->device == device) all.push_back(s);
    }
  }
  for (auto& s : all) drain(*s);
}

cudaError_t enqueue(cudaStream_t stream, std::function<void()> work) {
  Stream* s = find_stream(stream);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  enqueue_on(*s, std::move(work));
  return cudaSuccess;
}

}  // namespace weft::emu

using namespace weft::emu;

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* out, unsigned int flags) {
  if (!out) return fail(cudaErrorInvalidValue);
  auto s = start_stream(bind_current_device(), (flags & cudaStreamNonBlocking) == 0, false);
  std::lock_guard<std::mutex> lock(g_order);
  streams()[s.get()] = s;
  *out = reinterpret_cast<cudaStream_t>(s.get());
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* out) { return cudaStreamCreateWithFlags(out, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t handle) {
  std::lock_guard<std::mutex> order(g_order);
  auto it = streams().find(reinterpret_cast<Stream*>(handle));
  if (it == streams().end()) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(it->second->mutex);
  if (it->second->closing) return fail(cudaErrorInvalidResourceHandle);
  it->second->closing = true;  // the worker finishes what is queued, then ends (and leaves the table)
  it->second->changed.notify_all();
  return cudaSuccess;
}

cudaError_t cudaStreamGetDevice(cudaStream_t handle, int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  Stream* s = find_stream(handle);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  *device = s->device;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t handle) {
  Stream* s = find_stream(handle);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  drain(*s);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t handle) {
  Stream* s = find_stream(handle);
  if (!s) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->completed >= s->enqueued ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaDeviceSynchronize(void) {
  synchronize_device(bind_current_device());
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t handle, cudaHostFn_t fn, void* data) {
  if (!fn) return fail(cudaErrorInvalidValue);
  return enqueue(handle, [fn, data] { fn(data); });
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* out, unsigned int flags) {
  if (!out) return fail(cudaErrorInvalidValue);
  bind_current_device();
  auto e = std::make_shared<Event>();
  e->timing = (flags & cudaEventDisableTiming) == 0;
  std::lock_guard<std::mutex> lock(g_order);
  events()[e.get()] = e;
  *out = reinterpret_cast<cudaEvent_t>(e.get());
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* out) { return cudaEventCreateWithFlags(out, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t handle) {
  std::lock_guard<std::mutex> lock(g_order);
  if (events().erase(reinterpret_cast<Event*>(handle)) == 0) return fail(cudaErrorInvalidResourceHandle);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t handle, cudaStream_t stream) {
  auto e = find_event(handle);
  Stream* s = find_stream(stream);
  if (!e || !s) return fail(cudaErrorInvalidResourceHandle);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    generation = ++e->recorded;
  }
  enqueue_on(*s, [e, generation] {
    std::lock_guard<std::mutex> lock(e->mutex);
    e->completed = std::max(e->completed, generation);
    e->when = std::chrono::steady_clock::now();
    e->changed.notify_all();
  });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t handle) {
  auto e = find_event(handle);
  if (!e) return fail(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(e->mutex);
  return e->completed >= e->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t handle) {
  auto e = find_event(handle);
  if (!e) return fail(cudaErrorInvalidResourceHandle);
  std::unique_lock<std::mutex> lock(e->mutex);
  const uint64_t target = e->recorded;
  e->changed.wait(lock, [&] { return e->completed >= target; });
  return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t handle, unsigned int) {
  auto e = find_event(handle);
  Stream* s = find_stream(stream);
  if (!e || !s) return fail(cudaErrorInvalidResourceHandle);
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    target = e->recorded;  // the latest record at the time of the call, as CUDA
  }
  std::lock_guard<std::mutex> order(g_order);
  push(*s, [e, target] {
    std::unique_lock<std::mutex> lock(e->mutex);
    e->changed.wait(lock, [&] { return e->completed >= target; });
  });
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  auto a = find_event(start);
  auto b = find_event(end);
  if (!ms || !a || !b) return fail(!ms ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
  auto state = [](Event& e) {
    std::lock_guard<std::mutex> lock(e.mutex);  // one at a time: start and end may be the same event
    return std::make_tuple(e.timing, e.completed >= e.recorded, e.when);
  };
  const auto [a_timing, a_done, a_when] = state(*a);
  const auto [b_timing, b_done, b_when] = state(*b);
  if (!a_timing || !b_timing) return fail(cudaErrorInvalidResourceHandle);
  if (!a_done || !b_done) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(b_when - a_when).count();
  return cudaSuccess;
}

}  // extern "C"
