// weft_op_create / weft_op_destroy (weft/plugin.h): reduction operators written by the
// application. Each becomes a plugin::CustomOp in core/plugin/registry, the same table plugins'
// REDUCE_OP entries go into, so the collectives (coll::Reducer) treat both alike.
#include <cstring>
#include <memory>

#include "capi/src/shim.h"
#include "capi/src/validate.h"
#include "core/plugin/registry.h"

using namespace weft;
using namespace weft::capi;

namespace {

// weft_reduce_fn speaks weft's C types and returns a weft_status_t; the core calls
// ReduceFnWithData. The adapter's context carries the application's fn and user_data.
struct AdapterContext {
  weft_reduce_fn fn;
  void* user_data;
};

int32_t call_application_op(void* dst, const void* a, const void* b, size_t count, int32_t dtype, void* data) {
  const auto* ctx = static_cast<const AdapterContext*>(data);
  weft_dtype_t d;
  std::memcpy(&d, &dtype, sizeof d);
  return static_cast<int32_t>(ctx->fn(dst, a, b, count, d, ctx->user_data));
}

void check_name(const char* name) {
  if (!name) fail(Status::invalid_argument, "config->name is NULL; expected 1-128 printable ASCII characters");
  const size_t n = strnlen(name, 129);
  if (n == 0 || n > 128) {
    fail(Status::invalid_argument, "config->name has %s characters; expected 1-128", n ? "more than 128" : "no");
  }
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c > 0x7e) {
      fail(Status::invalid_argument, "config->name has byte 0x%02x at %zu; expected printable ASCII", c, i);
    }
  }
}

uint32_t read_dtypes(const weft_dtype_t* dtypes, size_t ndtypes) {
  if (!dtypes || ndtypes == 0) {
    fail(Status::invalid_argument, "config->dtypes is %s with ndtypes = %zu; an operator takes at least one element "
         "type", dtypes ? "set" : "NULL", ndtypes);
  }
  if (ndtypes > static_cast<size_t>(kNumDTypes)) {
    fail(Status::invalid_argument, "config->ndtypes = %zu; there are only %d element types (list each once)",
         ndtypes, kNumDTypes);
  }
  uint32_t mask = 0;
  for (size_t i = 0; i < ndtypes; ++i) {
    const std::string arg = format("config->dtypes[%zu]", i);
    const DType d = check_dtype(dtypes[i], arg.c_str());
    if (dtype_reduces_in_f32(d)) {
      fail(Status::invalid_argument, "%s is %s, which weft reduces as float32 (weft.h \"Reduction rules\"): list "
           "WEFT_FLOAT32 instead", arg.c_str(), dtype_name(d));
    }
    if ((mask >> static_cast<int>(d)) & 1u) {
      fail(Status::invalid_argument, "%s lists %s a second time", arg.c_str(), dtype_name(d));
    }
    mask |= 1u << static_cast<int>(d);
  }
  return mask;
}

}  // namespace

extern "C" {

WEFT_API weft_status_t weft_op_create(const weft_op_config_t* config, weft_op_t* op) {
  return guarded(__func__, [&] {
    check_out(config, "config");
    check_out(op, "op");
    if (config->struct_size != sizeof(weft_op_config_t)) {
      fail(Status::invalid_argument, "config->struct_size = %zu; expected %zu (initialise it with "
           "WEFT_OP_CONFIG_INIT)", config->struct_size, sizeof(weft_op_config_t));
    }
    check_name(config->name);
    if (!config->fn) fail(Status::invalid_argument, "config->fn is NULL; expected the operator's function");
    plugin::CustomOp custom;
    custom.dtype_mask = read_dtypes(config->dtypes, config->ndtypes);
    custom.origin.name = config->name;
    custom.fn_with_data = call_application_op;
    // The operator owns its adapter context, so it lives while a collective still holds the
    // operator after weft_op_destroy, and goes with the last holder.
    auto context = std::make_shared<AdapterContext>(AdapterContext{config->fn, config->user_data});
    custom.user_data = context.get();
    custom.user_data_owner = context;
    const int id = plugin::add_op(std::move(custom));
    std::memcpy(op, &id, sizeof id);  // ids lie past weft_op_t's enumerators: written by their bits
  });
}

WEFT_API weft_status_t weft_op_destroy(weft_op_t op) {
  return guarded(__func__, [&] {
    const int id = enum_bits(op);
    if (id < plugin::kIdBase) {
      fail(Status::invalid_argument, "op %d is a built-in weft_op_t; only operators from weft_op_create (%d and up) "
           "can be destroyed", id, plugin::kIdBase);
    }
    std::shared_ptr<const plugin::CustomOp> custom = plugin::get_op(id);  // throws for unknown or destroyed
    if (!custom->origin.plugin.empty()) {
      fail(Status::invalid_argument, "op %d is %s; a plugin's operators stay registered until the process exits",
           id, custom->origin.describe("reduction operator").c_str());
    }
    plugin::remove_op(id);
  });
}

}  // extern "C"
