#include "alloc_count.h"

#include <atomic>
#include <cerrno>
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MPT_COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MPT_COUNT_ALLOCS 0
#endif
#endif
#ifndef MPT_COUNT_ALLOCS
#define MPT_COUNT_ALLOCS 1
#endif

namespace {
std::atomic<uint64_t> g_allocs{0};
}

namespace mpt {
bool alloc_count_available() { return MPT_COUNT_ALLOCS != 0; }
uint64_t alloc_count() { return g_allocs.load(std::memory_order_relaxed); }
}  // namespace mpt

#if MPT_COUNT_ALLOCS
// glibc's allocator under its internal names; the definitions below take the public names for
// the whole process (the executable comes first in symbol lookup, libweft.so included).
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);

void* malloc(size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
void* memalign(size_t align, size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) {
  void* p = memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}
#endif
