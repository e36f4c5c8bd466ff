#include "core/plugin/ffi_call.h"

#include <cfloat>
#include <cmath>
#include <limits>

#include "core/common/status.h"

namespace weft::plugin {

static_assert(sizeof(size_t) == sizeof(uint64_t), "SIZE travels as ffi_type_uint64");
static_assert(sizeof(NativeSlot) >= sizeof(ffi_arg), "libffi writes at least an ffi_arg of return value");

ffi_type* ffi_type_of(ValueType t) {
  switch (t) {
    case ValueType::void_: return &ffi_type_void;
    case ValueType::i8: return &ffi_type_sint8;
    case ValueType::u8: return &ffi_type_uint8;
    case ValueType::i16: return &ffi_type_sint16;
    case ValueType::u16: return &ffi_type_uint16;
    case ValueType::i32: return &ffi_type_sint32;
    case ValueType::u32: return &ffi_type_uint32;
    case ValueType::i64: return &ffi_type_sint64;
    case ValueType::u64: case ValueType::size: return &ffi_type_uint64;
    case ValueType::f32: return &ffi_type_float;
    case ValueType::f64: return &ffi_type_double;
    case ValueType::ptr: case ValueType::tensor: case ValueType::string: case ValueType::fn: return &ffi_type_pointer;
  }
  fail(Status::internal, "no libffi type for %s", value_type_name(static_cast<int>(t)).c_str());
}

CallInterface::CallInterface(const Signature& signature) : signature_(signature) {
  for (ValueType t : signature_.args) types_.push_back(ffi_type_of(t));
  const ffi_status st = ffi_prep_cif(&cif_, FFI_DEFAULT_ABI, static_cast<unsigned>(types_.size()),
                                     ffi_type_of(signature_.ret), types_.empty() ? nullptr : types_.data());
  if (st != FFI_OK) {
    fail(Status::internal, "libffi cannot prepare a call of %s (ffi_prep_cif returned %d)",
         signature_string(signature_).c_str(), static_cast<int>(st));
  }
}

namespace {

void check_range(const Value& v, int64_t lo, int64_t hi, size_t index, const std::string& entry) {
  if (v.i < lo || v.i > hi) {
    fail(Status::invalid_argument, "argument %zu of '%s': %lld does not fit %s (%lld .. %lld)", index, entry.c_str(),
         static_cast<long long>(v.i), value_type_name(static_cast<int>(v.type)).c_str(), static_cast<long long>(lo),
         static_cast<long long>(hi));
  }
}

}  // namespace

void to_native(ValueType want, const Value& v, size_t index, const std::string& entry, NativeSlot* slot) {
  if (v.type != want) {
    fail(Status::invalid_argument, "argument %zu of '%s': expected %s, got %s", index, entry.c_str(),
         value_type_name(static_cast<int>(want)).c_str(), value_type_name(static_cast<int>(v.type)).c_str());
  }
  switch (want) {
    case ValueType::i8: check_range(v, INT8_MIN, INT8_MAX, index, entry); slot->i8 = static_cast<int8_t>(v.i); return;
    case ValueType::u8: check_range(v, 0, UINT8_MAX, index, entry); slot->u8 = static_cast<uint8_t>(v.i); return;
    case ValueType::i16: check_range(v, INT16_MIN, INT16_MAX, index, entry); slot->i16 = static_cast<int16_t>(v.i); return;
    case ValueType::u16: check_range(v, 0, UINT16_MAX, index, entry); slot->u16 = static_cast<uint16_t>(v.i); return;
    case ValueType::i32: check_range(v, INT32_MIN, INT32_MAX, index, entry); slot->i32 = static_cast<int32_t>(v.i); return;
    case ValueType::u32: check_range(v, 0, UINT32_MAX, index, entry); slot->u32 = static_cast<uint32_t>(v.i); return;
    case ValueType::i64: slot->i64 = v.i; return;
    case ValueType::u64: case ValueType::size: slot->u64 = static_cast<uint64_t>(v.i); return;
    case ValueType::f32:
      // A finite double beyond float's range would become infinity (undefined behaviour in C++).
      if (std::isfinite(v.f) && std::fabs(v.f) > FLT_MAX) {
        fail(Status::invalid_argument, "argument %zu of '%s': %g does not fit F32 (|x| <= %g)", index, entry.c_str(), v.f,
             static_cast<double>(FLT_MAX));
      }
      slot->f32 = static_cast<float>(v.f);
      return;
    case ValueType::f64: slot->f64 = v.f; return;
    case ValueType::tensor: case ValueType::string: case ValueType::fn:
      if (!v.p) {
        fail(Status::invalid_argument, "argument %zu of '%s': a %s must not be NULL", index, entry.c_str(),
             value_type_name(static_cast<int>(want)).c_str());
      }
      slot->ptr = v.p;
      return;
    case ValueType::ptr: slot->ptr = v.p; return;
    case ValueType::void_: break;
  }
  fail(Status::invalid_argument, "argument %zu of '%s': type %s is not an argument type", index, entry.c_str(),
       value_type_name(static_cast<int>(want)).c_str());
}

Value from_native(ValueType t, const void* native) {
  Value v;
  v.type = t;
  const auto* n = static_cast<const NativeSlot*>(native);
  switch (t) {
    case ValueType::void_: break;
    case ValueType::i8: v.i = n->i8; break;
    case ValueType::u8: v.i = n->u8; break;
    case ValueType::i16: v.i = n->i16; break;
    case ValueType::u16: v.i = n->u16; break;
    case ValueType::i32: v.i = n->i32; break;
    case ValueType::u32: v.i = n->u32; break;
    case ValueType::i64: v.i = n->i64; break;
    case ValueType::u64: case ValueType::size: v.i = static_cast<int64_t>(n->u64); break;
    case ValueType::f32: v.f = n->f32; break;
    case ValueType::f64: v.f = n->f64; break;
    case ValueType::ptr: case ValueType::tensor: case ValueType::string: case ValueType::fn: v.p = n->ptr; break;
  }
  return v;
}

void call(CallInterface& ci, void (*fn)(), const std::string& entry, const Value* args, size_t nargs, Value* result) {
  const Signature& sig = ci.signature();
  if (nargs != sig.args.size()) {
    fail(Status::invalid_argument, "'%s' takes %zu arguments (%s); got %zu", entry.c_str(), sig.args.size(),
         signature_string(sig, entry).c_str(), nargs);
  }
  if (nargs > 0 && !args) fail(Status::invalid_argument, "args is NULL; '%s' takes %zu arguments", entry.c_str(), nargs);
  if (!result && sig.ret != ValueType::void_) {
    fail(Status::invalid_argument, "result is NULL; '%s' returns %s", entry.c_str(),
         value_type_name(static_cast<int>(sig.ret)).c_str());
  }
  NativeSlot slots[kMaxArgs];
  void* avalues[kMaxArgs];
  for (size_t i = 0; i < nargs; ++i) {
    to_native(sig.args[i], args[i], i, entry, &slots[i]);
    avalues[i] = &slots[i];
  }
  NativeSlot ret{};
  ffi_call(ci.cif(), fn, &ret, avalues);
  if (!result) return;
  // libffi widens integer returns narrower than a register to a full ffi_arg (sign- or
  // zero-extended by the return type), so those are read from the widened value.
  Value out;
  out.type = sig.ret;
  switch (sig.ret) {
    case ValueType::i8: case ValueType::i16: case ValueType::i32: out.i = static_cast<int64_t>(ret.sarg); break;
    case ValueType::u8: case ValueType::u16: case ValueType::u32: out.i = static_cast<int64_t>(ret.arg); break;
    default: out = from_native(sig.ret, &ret); break;
  }
  *result = out;
}

}  // namespace weft::plugin
