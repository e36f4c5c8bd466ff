// Private to the CUDA emulator (emulator.h says what it is): the state its three parts share.
// runtime.cpp: devices, contexts, errors, driver entry points; memory.cpp: allocations and
// copies; streams.cpp: streams, events and their worker threads.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>

namespace weft::emu {

// Records `err` as the calling thread's last error (cudaGetLastError) and returns it.
cudaError_t fail(cudaError_t err);

// WEFT_EMU_DEVICES (default 1, at most 16).
int device_count();

// The calling thread's current device; binds its context as the runtime does on first use.
int bind_current_device();

// Blocks until every stream of `device` (default stream included) has run all it was given.
void synchronize_device(int device);

// The stream a handle names (0, cudaStreamLegacy and cudaStreamPerThread: the current device's
// default stream); nullptr for a handle that is not a live stream.
struct Stream;
Stream* find_stream(cudaStream_t handle);
int stream_device(const Stream& s);
// Enqueues work on s after the ordering rules of the legacy default stream.
void enqueue_on(Stream& s, std::function<void()> work);
// Blocks until s has run everything enqueued so far.
void drain(Stream& s);
// Holds s for one more operation delay, so that the copy or memset queued next on it lands after
// work a non-blocking stream is given meanwhile (a DMA still in flight when the call returned).
void late_write(Stream& s);

// Memory: kinds as the driver reports them.
enum class Kind { unregistered, pinned, device, managed };
struct Region {
  Kind kind = Kind::unregistered;
  int device = -1;
  char* base = nullptr;  // the address handed out (device memory: not host-accessible)
  size_t bytes = 0;
};
// The allocation containing ptr (Kind::unregistered when none).
Region lookup(const void* ptr);

}  // namespace weft::emu
