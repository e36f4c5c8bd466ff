// Small device-memory helpers: fill with an element pattern, and copy. Queued on `stream`.
#pragma once

#include <cstddef>

namespace weft::kernels::cuda {

// Sets count elements of elem_bytes (1, 2, 4 or 8) bytes each to the pattern at `value` (host
// memory, read before returning).
void fill(void* dst, size_t elem_bytes, const void* value, size_t count, void* stream);
// Copies bytes between device buffers (or any buffers CUDA can address); no-op when dst == src.
void copy(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace weft::kernels::cuda
