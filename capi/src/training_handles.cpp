#include "capi/src/training_handles.h"

#include "capi/src/registry.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"

namespace weft::capi {

namespace {

auto& bucketers() {
  static auto* r = new Registry<weft_bucketer, kBucketerMagic>("a bucketer from weft_bucketer_create",
                                                               "a live bucketer", "destroyed");
  return *r;
}
auto& zeros() {
  static auto* r = new Registry<weft_zero, kZeroMagic>("a ZeRO handle from weft_zero_create", "a live ZeRO handle",
                                                       "destroyed");
  return *r;
}

}  // namespace

weft_bucketer_t register_bucketer(std::unique_ptr<weft_bucketer> b) { return bucketers().add(std::move(b)); }
weft_bucketer* lookup_bucketer(weft_bucketer_t h, const char* arg) { return bucketers().find(h, arg); }
void unregister_bucketer(weft_bucketer_t h) { bucketers().remove(h); }

weft_zero_t register_zero(std::unique_ptr<weft_zero> z) { return zeros().add(std::move(z)); }
weft_zero* lookup_zero(weft_zero_t h, const char* arg) { return zeros().find(h, arg); }
void unregister_zero(weft_zero_t h) { zeros().remove(h); }

std::shared_ptr<const training::Codec> read_wire(const weft_wire_format_t& wire, DType dtype, const char* what) {
  const int w = enum_bits(wire);
  std::shared_ptr<const training::Codec> codec;
  try {
    codec = training::codec_of(w);
  } catch (const Error& e) {
    fail(e.status(), "%s.wire = %d: %s", what, w, e.what());
  }
  if (codec && dtype != DType::f32) {
    fail(Status::invalid_argument, "%s.wire = %d (%s) needs float32 gradients, not %s (compressed wires encode float32)",
         what, w, codec->name().c_str(), dtype_name(dtype));
  }
  return codec;
}

bool read_error_feedback(int error_feedback, const training::Codec* codec, const char* what) {
  if (error_feedback && !codec) {
    fail(Status::invalid_argument, "%s.error_feedback = %d with %s.wire = WEFT_WIRE_NATIVE: error feedback needs a "
         "compressed wire (BF16, FP8_E4M3 or a plugin codec); the native wire loses nothing to feed back",
         what, error_feedback, what);
  }
  return error_feedback != 0;
}

int mesh_dim_named(const mesh::Mesh& mesh, const char* name, const char* arg) {
  if (!name) fail(Status::invalid_argument, "%s is NULL; expected a dim name", arg);
  const auto& names = mesh.names();
  std::string all;
  for (size_t d = 0; d < names.size(); ++d) {
    if (names[d] == name) return static_cast<int>(d);
    all.append(all.empty() ? "" : ", ").append(names[d]);
  }
  fail(Status::invalid_argument, "%s = '%s' is not a dim of the mesh (dims: %s)", arg, name, all.c_str());
}

size_t contiguous_count(const weft_tensor_t& t, const char* arg, bool allow_device) {
  if (t.ndim < 0 || t.ndim > WEFT_TENSOR_MAX_DIMS) {
    fail(Status::invalid_argument, "%s.ndim = %d is outside 0..%d", arg, t.ndim, WEFT_TENSOR_MAX_DIMS);
  }
  if (t.ndim > 0 && !t.shape) fail(Status::invalid_argument, "%s.shape is NULL with ndim %d", arg, t.ndim);
  const int dev = enum_bits(t.device_type);
  if (dev != WEFT_DEVICE_CPU && dev != WEFT_DEVICE_CUDA_HOST && !(allow_device && dev == WEFT_DEVICE_CUDA)) {
    fail(dev == WEFT_DEVICE_CUDA ? Status::unsupported : Status::invalid_argument,
         "%s has device_type %d: this call takes host memory (WEFT_DEVICE_CPU or WEFT_DEVICE_CUDA_HOST)", arg, dev);
  }
  size_t count = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0) fail(Status::invalid_argument, "%s.shape[%d] = %lld is negative", arg, d, static_cast<long long>(t.shape[d]));
    count *= static_cast<size_t>(t.shape[d]);
  }
  if (t.strides && count > 1) {
    int64_t expect = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (t.shape[d] != 1 && t.strides[d] != expect) {
        fail(Status::invalid_argument, "%s is not contiguous (strides[%d] = %lld, expected %lld)", arg, d,
             static_cast<long long>(t.strides[d]), static_cast<long long>(expect));
      }
      expect *= t.shape[d];
    }
  }
  if (count > 0 && !t.data) fail(Status::invalid_argument, "%s.data is NULL with %zu elements", arg, count);
  return count;
}

std::string item_name(const char* const* names, size_t i, const char* fallback) {
  if (names && names[i]) return names[i];
  return std::string(fallback).append("[").append(std::to_string(i)).append("]");
}

}  // namespace weft::capi
