// Whether a pointer is CUDA device memory, asked of the CUDA driver only when the process has
// already loaded it (dlopen RTLD_NOLOAD: this never loads the driver itself), without weft's own
// CUDA runtime. Used where weft cannot use its runtime: a build without CUDA, or a CUDA build
// whose runtime failed to start (e.g. weft's CUDA 13 runtime on a driver too old for it, while
// the application's own older runtime works and hands weft device pointers). Either way a
// device pointer must be refused, not handed to the host algorithms (which would fault).
#pragma once

namespace weft::gpu {

// False when the driver is not loaded (then no pointer can be device memory) or says no.
bool driver_says_device_memory(const void* ptr);

}  // namespace weft::gpu
