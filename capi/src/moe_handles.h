// The structs behind weft_moe_t and weft_moe_handle_t (weft/moe.h), their registries, and the
// argument checks the MoE shims share.
#pragma once

#include <cstdint>
#include <memory>

#include "core/moe/moe.h"
#include "weft/moe.h"

struct weft_moe {
  uint64_t magic;
  std::unique_ptr<weft::moe::Moe> moe;
};

struct weft_moe_handle {
  uint64_t magic;
  // The weft_moe that dispatched it, compared by address only (combine refuses another's
  // handle); the handle may outlive it, so what weft_moe_handle_received needs is kept here.
  const weft_moe* owner;
  std::unique_ptr<weft::moe::Handle> handle;
  weft_dtype_t dtype;
  bool on_device;  // config.device: the received rows are CUDA memory of GPU device_id
  int device_id;
  int64_t shape[2];  // weft_moe_received_t's tokens view: [rows, H]
};

namespace weft::capi {

constexpr uint64_t kMoeMagic = 0x00656f4d74666577ull;        // "weftMoe"
constexpr uint64_t kMoeHandleMagic = 0x6c6e64486f4d6577ull;  // "weMoHndl"

weft_moe_t register_moe(std::unique_ptr<weft_moe> m);
weft_moe* lookup_moe(weft_moe_t h, const char* arg);
void unregister_moe(weft_moe_t h);

weft_moe_handle_t register_moe_handle(std::unique_ptr<weft_moe_handle> h);
weft_moe_handle* lookup_moe_handle(weft_moe_handle_t h, const char* arg);
void unregister_moe_handle(weft_moe_handle_t h);

// The data of a contiguous tensor of shape [rows, cols] and `dtype` (arg names it in messages),
// host memory, or with `device` CUDA memory (WEFT_DEVICE_CUDA); NULL when it has no elements.
void* matrix_data(const weft_tensor_t* t, size_t rows, size_t cols, DType dtype, const char* arg, bool device = false);

}  // namespace weft::capi
