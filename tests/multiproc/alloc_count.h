// Heap allocations made by the whole process (every thread) since it started: malloc, calloc,
// realloc, aligned allocations and, through them, operator new. Counted by replacing glibc's
// allocator entry points in the test program (they forward to glibc's own __libc_* functions).
// Not available in sanitizer builds, whose runtime owns the allocator: then available() is false.
#pragma once

#include <cstdint>

namespace mpt {

bool alloc_count_available();
uint64_t alloc_count();

}  // namespace mpt
