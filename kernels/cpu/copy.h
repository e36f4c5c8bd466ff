// Bulk copies for the collectives' copy-out of large results.
#pragma once

#include <cstddef>

namespace weft::kernels {

// Copies with non-temporal (streaming) stores where the destination is 16-byte aligned in its
// middle part: the destination lines are written without first being read into the cache.
// For results much larger than the cache this saves a third of the memory traffic of a copy
// (glibc's memcpy only streams single copies above ~3/4 of the last-level cache, and the
// collectives copy in cache-sized chunks). Call store_fence() before other threads may read
// the destination.
void copy_streaming(void* dst, const void* src, size_t bytes);
void store_fence();

// Results at least this large are copied out with copy_streaming.
constexpr size_t kStreamingCopyBytes = 8u << 20;

}  // namespace weft::kernels
