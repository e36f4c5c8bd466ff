// C functions made at run time (libffi closures) that call a generic handler with tagged values:
// how a binding passes a Python, Julia, Go or Rust function to a plugin entry taking an FN
// argument (weft_closure_create). The handler's failures cannot cross the C caller's frames, so
// they are counted and the last message kept; the C function then returns 0 of its type.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "core/plugin/ffi_call.h"

namespace weft::plugin {

// Gets the arguments, writes the return value into result (its type preset to the return
// type); throws weft::Error to fail the call.
using ClosureHandler = std::function<void(const Value* args, size_t nargs, Value* result)>;

class Closure {
 public:
  // Throws Error(INVALID_ARGUMENT) for a bad signature (a type outside the list, VOID as an
  // argument, more than kMaxArgs arguments), Error(OUT_OF_MEMORY) when libffi has no closure.
  Closure(Signature signature, ClosureHandler handler);
  ~Closure();
  Closure(const Closure&) = delete;
  Closure& operator=(const Closure&) = delete;

  void* function() const { return code_; }
  const Signature& signature() const { return ci_.signature(); }
  uint64_t failures() const { return failures_.load(); }
  // The last failure's message ("" when none); the pointer stays valid until the next failure.
  const char* last_error() const;

 private:
  static void trampoline(ffi_cif* cif, void* ret, void** args, void* self);
  void run(void* ret, void** args);
  void failed(const std::string& message);

  CallInterface ci_;
  ClosureHandler handler_;
  ffi_closure* closure_ = nullptr;
  void* code_ = nullptr;
  std::atomic<uint64_t> failures_{0};
  mutable std::mutex mu_;
  std::string last_error_;
};

// Checks a closure's (or any caller-given) signature: ret and args from the list, VOID only as
// the return, at most kMaxArgs arguments. `what` names it in messages.
Signature make_signature(int ret, const int* args, size_t nargs, const char* what);

}  // namespace weft::plugin
