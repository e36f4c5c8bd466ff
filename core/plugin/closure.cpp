#include "core/plugin/closure.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/common/status.h"

namespace weft::plugin {

Signature make_signature(int ret, const int* args, size_t nargs, const char* what) {
  if (ret < 0 || ret >= kNumValueTypes) {
    fail(Status::invalid_argument, "%s: return type %d; expected VOID (0) .. FN (%d)", what, ret, kNumValueTypes - 1);
  }
  if (nargs > kMaxArgs) fail(Status::invalid_argument, "%s: %zu arguments; at most %zu", what, nargs, kMaxArgs);
  if (nargs > 0 && !args) fail(Status::invalid_argument, "%s: args is NULL with nargs = %zu", what, nargs);
  Signature s;
  s.ret = static_cast<ValueType>(ret);
  for (size_t i = 0; i < nargs; ++i) {
    if (args[i] <= 0 || args[i] >= kNumValueTypes) {
      fail(Status::invalid_argument, "%s: args[%zu] = %d; expected I8 (1) .. FN (%d) (VOID is a return type only)", what,
           i, args[i], kNumValueTypes - 1);
    }
    s.args.push_back(static_cast<ValueType>(args[i]));
  }
  return s;
}

Closure::Closure(Signature signature, ClosureHandler handler) : ci_(signature), handler_(std::move(handler)) {
  closure_ = static_cast<ffi_closure*>(ffi_closure_alloc(sizeof(ffi_closure), &code_));
  if (!closure_) fail(Status::out_of_memory, "libffi could not allocate a closure (ffi_closure_alloc)");
  const ffi_status st = ffi_prep_closure_loc(closure_, ci_.cif(), &Closure::trampoline, this, code_);
  if (st != FFI_OK) {
    ffi_closure_free(closure_);
    fail(Status::internal, "libffi refused the closure %s (ffi_prep_closure_loc returned %d)",
         signature_string(ci_.signature()).c_str(), static_cast<int>(st));
  }
}

Closure::~Closure() { ffi_closure_free(closure_); }

const char* Closure::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_.c_str();
}

void Closure::failed(const std::string& message) {
  failures_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  last_error_ = message;
}

void Closure::trampoline(ffi_cif*, void* ret, void** args, void* self) { static_cast<Closure*>(self)->run(ret, args); }

void Closure::run(void* ret, void** args) {
  const Signature& sig = ci_.signature();
  Value in[kMaxArgs];
  for (size_t i = 0; i < sig.args.size(); ++i) in[i] = from_native(sig.args[i], args[i]);
  Value out;
  out.type = sig.ret;
  NativeSlot native{};
  // Nothing may unwind into the C code that called the function pointer: every failure becomes
  // a count, a message and a zero return.
  try {
    handler_(in, sig.args.size(), &out);
    if (out.type != sig.ret) {
      fail(Status::invalid_argument, "the closure's handler set the result's type to %s; the closure returns %s",
           value_type_name(static_cast<int>(out.type)).c_str(), value_type_name(static_cast<int>(sig.ret)).c_str());
    }
    if (sig.ret != ValueType::void_) to_native(sig.ret, out, 0, "the closure's result", &native);
  } catch (const Error& e) {
    failed(e.message());
    native = NativeSlot{};
  } catch (const std::exception& e) {
    failed(std::string("closure handler threw: ") + e.what());
    native = NativeSlot{};
  } catch (...) {
    failed("closure handler threw an unknown exception");
    native = NativeSlot{};
  }
  // libffi's closure return rule: integers narrower than a register are written as a whole
  // ffi_arg, extended by their signedness.
  switch (sig.ret) {
    case ValueType::void_: return;
    case ValueType::i8: *static_cast<ffi_sarg*>(ret) = native.i8; return;
    case ValueType::i16: *static_cast<ffi_sarg*>(ret) = native.i16; return;
    case ValueType::i32: *static_cast<ffi_sarg*>(ret) = native.i32; return;
    case ValueType::u8: *static_cast<ffi_arg*>(ret) = native.u8; return;
    case ValueType::u16: *static_cast<ffi_arg*>(ret) = native.u16; return;
    case ValueType::u32: *static_cast<ffi_arg*>(ret) = native.u32; return;
    case ValueType::f32: std::memcpy(ret, &native.f32, sizeof(float)); return;
    case ValueType::f64: std::memcpy(ret, &native.f64, sizeof(double)); return;
    default: std::memcpy(ret, &native.u64, sizeof(uint64_t)); return;
  }
}

}  // namespace weft::plugin
