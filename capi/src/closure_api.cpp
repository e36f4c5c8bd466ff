// weft_closure_*: C functions made at run time that call a binding's generic handler
// (weft/plugin.h "callbacks into any language"; the libffi work is core/plugin/closure.cpp).
#include "capi/src/plugin_handles.h"
#include "capi/src/shim.h"
#include "capi/src/validate.h"

using namespace weft;
using namespace weft::capi;

extern "C" {

WEFT_API weft_status_t weft_closure_create(weft_value_type_t ret, const weft_value_type_t* args, size_t nargs,
                                           weft_closure_fn handler, void* user_data, weft_closure_t* closure,
                                           void** function) {
  return guarded(__func__, [&] {
    check_out(closure, "closure");
    *closure = nullptr;
    check_out(function, "function");
    *function = nullptr;
    if (!handler) fail(Status::invalid_argument, "handler is NULL; expected the function the closure calls");
    if (nargs > plugin::kMaxArgs) fail(Status::invalid_argument, "nargs = %zu; at most %zu", nargs, plugin::kMaxArgs);
    if (nargs > 0 && !args) fail(Status::invalid_argument, "args is NULL with nargs = %zu", nargs);
    int types[plugin::kMaxArgs];
    for (size_t i = 0; i < nargs; ++i) types[i] = enum_bits(args[i]);
    plugin::Signature sig = plugin::make_signature(enum_bits(ret), types, nargs, "weft_closure_create");
    // The handler sees weft_value_t copies of the arguments and writes a weft_value_t result; a
    // non-OK status becomes the closure's failure, with the status in the message.
    auto adapter = [handler, user_data](const plugin::Value* in, size_t n, plugin::Value* result) {
      weft_value_t abi_args[plugin::kMaxArgs];
      for (size_t i = 0; i < n; ++i) abi_args[i] = to_abi(in[i]);
      weft_value_t abi_result = to_abi(*result);
      const weft_status_t st = handler(abi_args, n, &abi_result, user_data);
      if (st != WEFT_OK) {
        const int code = enum_bits(st);
        fail(code >= 1 && code <= 10 ? static_cast<Status>(code) : Status::internal,
             "the closure's handler returned %s", weft_status_string(st));
      }
      *result = to_core(abi_result);
    };
    auto c = std::make_unique<weft_closure>();
    c->closure = std::make_unique<plugin::Closure>(std::move(sig), adapter);
    void* fn = c->closure->function();
    *closure = register_closure(std::move(c));
    *function = fn;
  });
}

WEFT_API weft_status_t weft_closure_error(weft_closure_t closure, uint64_t* failures, const char** message) {
  return guarded(__func__, [&] {
    const weft_closure& c = *lookup_closure(closure, "closure");
    if (failures) *failures = c.closure->failures();
    if (message) *message = c.closure->last_error();
  });
}

WEFT_API weft_status_t weft_closure_destroy(weft_closure_t closure) {
  return guarded(__func__, [&] {
    if (!closure) return;
    lookup_closure(closure, "closure");
    unregister_closure(closure);
  });
}

}  // extern "C"
