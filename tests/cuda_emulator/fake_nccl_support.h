// The stand-in NCCL's plumbing (fake_nccl.cpp says what is modelled): the last-error text,
// environment switches, the sleeping wait every reader uses, and the files ranks exchange
// through (each written whole and renamed into place).
#pragma once

#pragma GCC visibility push(default)
#include <nccl.h>
#pragma GCC visibility pop

#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::fake_nccl {

constexpr uint32_t kFileMagic = 0x66616b65;  // starts every record a rank publishes

// NCCL keeps one process-wide last-error text (ncclGetLastError ignores its argument).
extern char g_last_error[1024];

// Records the text for ncclGetLastError (and prints it under NCCL_DEBUG) and returns r.
ncclResult_t fail(ncclResult_t r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

bool env_flag(const char* name, bool fallback);
long env_long(const char* name, long fallback);

void sleep_us(long us);

// Sleeps with growing steps (5 us .. 1 ms) until ready() holds; false when a stop flag was
// raised first (ncclCommAbort), so that an abort ends any wait within about a millisecond.
template <class Ready>
bool wait_until(const std::atomic<bool>& stop, const std::atomic<bool>* stop2, Ready ready) {
  long us = 5;
  while (!ready()) {
    if (stop.load(std::memory_order_acquire) || (stop2 && stop2->load(std::memory_order_acquire))) return false;
    sleep_us(us);
    us = std::min(us * 2, 1000L);
  }
  return true;
}

bool exists(const std::string& path);
bool write_all(int fd, const void* data, size_t bytes);
bool read_all(int fd, void* data, size_t bytes, off_t at);

// Writes head + body to a temporary name and moves it to dir/name in one step, so a reader sees
// all of it or nothing. exclusive: fail (EEXIST) rather than replace an existing file.
bool publish(const std::string& dir, const std::string& name, const void* head, size_t head_bytes, const void* body,
             size_t body_bytes, bool exclusive = false);

void remove_tree(const std::string& dir);

}  // namespace weft::fake_nccl
