// The CUDA emulator's devices, contexts, error state and driver entry points (emulator.h).
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/cuda_emulator/emulator.h"
#include "tests/cuda_emulator/state.h"

namespace weft::emu {
namespace {

constexpr int kMaxDevices = 16;
constexpr int kMultiProcessors = 132;  // an H100's

// A context is the address of its device's entry here (CUcontext is an opaque pointer).
struct Context {
  int device;
};
Context g_contexts[kMaxDevices] = {{0},  {1},  {2},  {3},  {4},  {5},  {6},  {7},
                                   {8},  {9},  {10}, {11}, {12}, {13}, {14}, {15}};

thread_local cudaError_t t_last_error = cudaSuccess;
// The runtime binds a thread to device 0's primary context on first use; cudaSetDevice binds
// another; the driver API can unbind (cuCtxSetCurrent(NULL)).
thread_local Context* t_context = nullptr;
thread_local int t_device = 0;

CUresult ctx_get_current(CUcontext* out) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<CUcontext>(t_context);
  return CUDA_SUCCESS;
}

CUresult ctx_set_current(CUcontext ctx) {
  auto* c = reinterpret_cast<Context*>(ctx);
  if (c && (c < g_contexts || c >= g_contexts + device_count())) return CUDA_ERROR_INVALID_CONTEXT;
  t_context = c;
  if (c) t_device = c->device;
  return CUDA_SUCCESS;
}

// As the driver: unknown memory is not an error, its attributes are zero/false.
CUresult pointer_get_attributes(unsigned int n, CUpointer_attribute* attrs, void** data, CUdeviceptr ptr) {
  if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  const Region r = lookup(reinterpret_cast<const void*>(ptr));
  for (unsigned int i = 0; i < n; ++i) {
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: {
        unsigned int type = 0;
        if (r.kind == Kind::pinned) type = CU_MEMORYTYPE_HOST;
        if (r.kind == Kind::device || r.kind == Kind::managed) type = CU_MEMORYTYPE_DEVICE;
        *static_cast<unsigned int*>(data[i]) = type;
        break;
      }
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        // The driver writes a bool here (one byte): callers that read more must zero first.
        *static_cast<bool*>(data[i]) = r.kind == Kind::managed;
        break;
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int*>(data[i]) = r.kind == Kind::unregistered ? -2 : std::max(r.device, 0);
        break;
      default:
        return CUDA_ERROR_INVALID_VALUE;  // not modelled: say so rather than answer wrongly
    }
  }
  return CUDA_SUCCESS;
}

struct ErrorName {
  cudaError_t err;
  const char* name;
  const char* text;
};
constexpr ErrorName kErrors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
};

const ErrorName* error_entry(cudaError_t err) {
  for (const ErrorName& e : kErrors) {
    if (e.err == err) return &e;
  }
  return nullptr;
}

}  // namespace

cudaError_t fail(cudaError_t err) {
  t_last_error = err;
  return err;
}

int device_count() {
  static const int n = [] {
    const char* env = std::getenv("WEFT_EMU_DEVICES");
    int v = env && *env ? std::atoi(env) : 1;
    return std::clamp(v, 0, kMaxDevices);
  }();
  return n;
}

int bind_current_device() {
  if (!t_context) t_context = &g_contexts[t_device];
  return t_context->device;
}

int current_device() { return bind_current_device(); }

}  // namespace weft::emu

using namespace weft::emu;

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = device_count();
  if (*count == 0) return fail(cudaErrorNoDevice);
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  t_device = device;
  t_context = &g_contexts[device];  // CUDA 12+: cudaSetDevice initialises the primary context
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  if (device_count() == 0) return fail(cudaErrorNoDevice);
  *device = t_context ? t_context->device : t_device;  // no context is created by asking
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  std::snprintf(prop->name, sizeof prop->name, "weft emulated GPU %d", device);
  // The same devices in every process of the machine, as real GPUs: the UUID names the device.
  for (int i = 0; i < 16; ++i) prop->uuid.bytes[i] = static_cast<char>(0x5e + i);
  prop->uuid.bytes[15] = static_cast<char>(device);
  prop->totalGlobalMem = size_t{80} << 30;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = kMultiProcessors;
  prop->pciBusID = 0x10 + device;
  prop->unifiedAddressing = 1;
  prop->managedMemory = 1;
  return cudaSuccess;
}

// The attributes kernels/cuda asks for; any other is "not modelled" (an error, not a guess).
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return fail(cudaErrorInvalidValue);
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = kMultiProcessors; return cudaSuccess;
    default: return fail(cudaErrorInvalidValue);
  }
}

cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

const char* cudaGetErrorName(cudaError_t err) {
  const ErrorName* e = error_entry(err);
  return e ? e->name : "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t err) {
  const ErrorName* e = error_entry(err);
  return e ? e->text : "unknown error";
}

// The driver functions weft reaches through the runtime (transports/cuda/cuda_util.cpp); any
// other name is "not found", which callers must handle anyway (older drivers).
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult* status) {
  if (!symbol || !fn) return fail(cudaErrorInvalidValue);
  *fn = nullptr;
  if (std::strcmp(symbol, "cuCtxGetCurrent") == 0) *fn = reinterpret_cast<void*>(&ctx_get_current);
  if (std::strcmp(symbol, "cuCtxSetCurrent") == 0) *fn = reinterpret_cast<void*>(&ctx_set_current);
  if (std::strcmp(symbol, "cuPointerGetAttributes") == 0) *fn = reinterpret_cast<void*>(&pointer_get_attributes);
  if (status) *status = *fn ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

}  // extern "C"
