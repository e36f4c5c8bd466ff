// Calls through libffi by a manifest's signature (weft_plugin_call) and the conversions between
// tagged values and native C values that calls and closures (core/plugin/closure.h) share.
#pragma once

#include <ffi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/plugin/manifest.h"

namespace weft::plugin {

// weft_value_t in core's types (capi static_asserts the layout): integers and SIZE in i (unsigned
// ones as their bits), F32 and F64 in f, PTR, TENSOR, STRING and FN in p.
struct Value {
  ValueType type = ValueType::void_;
  int64_t i = 0;
  double f = 0.0;
  const void* p = nullptr;
};

// One native value of any ValueType; also big enough for libffi's widened small return values.
union NativeSlot {
  ffi_arg arg;
  ffi_sarg sarg;
  int8_t i8;
  uint8_t u8;
  int16_t i16;
  uint16_t u16;
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  float f32;
  double f64;
  const void* ptr;
  size_t size;
};

ffi_type* ffi_type_of(ValueType t);

// The ffi_cif of one signature, prepared once (at load, or at closure creation).
class CallInterface {
 public:
  explicit CallInterface(const Signature& signature);  // throws Error(INTERNAL) if libffi refuses
  CallInterface(const CallInterface&) = delete;
  CallInterface& operator=(const CallInterface&) = delete;
  const Signature& signature() const { return signature_; }
  ffi_cif* cif() { return &cif_; }

 private:
  Signature signature_;
  std::vector<ffi_type*> types_;
  ffi_cif cif_;
};

// Checks args[0..nargs) against the signature (each type equal, integers within their width,
// TENSOR/STRING/FN not NULL) and writes the native form into slot; `entry` names the callee in
// messages ("argument 2 of 'absmax': expected PTR, got F64").
void to_native(ValueType want, const Value& v, size_t index, const std::string& entry, NativeSlot* slot);
// A native value (as libffi hands arguments to closures: the exact type's bytes) as a tagged one.
Value from_native(ValueType t, const void* native);

// Calls fn (which must have ci's signature) with args; result (may be nullptr only for a VOID
// return) gets the return value tagged with its type. Thread-safe: ci is only read.
void call(CallInterface& ci, void (*fn)(), const std::string& entry, const Value* args, size_t nargs, Value* result);

}  // namespace weft::plugin
