#include "capi/src/moe_handles.h"

#include "capi/src/registry.h"
#include "capi/src/shim.h"
#include "capi/src/training_handles.h"
#include "capi/src/validate.h"

namespace weft::capi {

namespace {

auto& moes() {
  static auto* r = new Registry<weft_moe, kMoeMagic>("an MoE object from weft_moe_create", "a live MoE object",
                                                     "destroyed");
  return *r;
}
auto& moe_handles() {
  static auto* r = new Registry<weft_moe_handle, kMoeHandleMagic>("a handle from weft_moe_dispatch",
                                                                  "a live MoE handle", "destroyed");
  return *r;
}

}  // namespace

weft_moe_t register_moe(std::unique_ptr<weft_moe> m) { return moes().add(std::move(m)); }
weft_moe* lookup_moe(weft_moe_t h, const char* arg) { return moes().find(h, arg); }
void unregister_moe(weft_moe_t h) { moes().remove(h); }

weft_moe_handle_t register_moe_handle(std::unique_ptr<weft_moe_handle> h) { return moe_handles().add(std::move(h)); }
weft_moe_handle* lookup_moe_handle(weft_moe_handle_t h, const char* arg) { return moe_handles().find(h, arg); }
void unregister_moe_handle(weft_moe_handle_t h) { moe_handles().remove(h); }

void* matrix_data(const weft_tensor_t* t, size_t rows, size_t cols, DType dtype, const char* arg, bool device) {
  if (!t) fail(Status::invalid_argument, "%s is NULL; expected a [%zu, %zu] tensor", arg, rows, cols);
  const size_t count = contiguous_count(*t, arg, device);
  if (device && enum_bits(t->device_type) != WEFT_DEVICE_CUDA) {
    fail(Status::invalid_argument, "%s has device_type %d; config.device = 1 takes CUDA memory (WEFT_DEVICE_CUDA)", arg,
         enum_bits(t->device_type));
  }
  const DType d = check_dtype(t->dtype, (std::string(arg) + ".dtype").c_str());
  if (d != dtype) fail(Status::invalid_argument, "%s.dtype is %s; expected %s", arg, dtype_name(d), dtype_name(dtype));
  const bool shape_ok = t->ndim == 2 && static_cast<size_t>(t->shape[0]) == rows && static_cast<size_t>(t->shape[1]) == cols;
  if (!shape_ok) {
    std::string got = "[";
    for (int i = 0; i < t->ndim; ++i) got.append(i ? ", " : "").append(std::to_string(t->shape[i]));
    got.append("]");
    fail(Status::invalid_argument, "%s has shape %s; expected [%zu, %zu]", arg, got.c_str(), rows, cols);
  }
  if (count == 0) return nullptr;
  return static_cast<char*>(t->data) + t->byte_offset;
}

}  // namespace weft::capi
