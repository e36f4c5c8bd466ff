// The process-wide tables of extensions (weft/plugin.h): reduction operators, gradient codecs,
// router selectors, schedule generators and cost models, each under an id from kIdBase up that
// the rest of weft finds them by (a weft_op_t, weft_wire_format_t, weft_schedule_kind_t, ...).
// Plugins (core/plugin/loader.cpp) and weft_op_create add to them; core/collectives, core/training,
// kernels' callers in core/moe and core/pipeline read them. Ids are never reused, and a lookup
// returns a shared_ptr, so an extension removed while a collective holds it stays alive until
// that collective ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/common/dtype.h"

namespace weft::plugin {

constexpr int kIdBase = 64;  // WEFT_PLUGIN_ID_BASE

// The C signatures of the kinds (weft/plugin.h spells them with weft's C types; these are the
// same ABI in plain types, so core/ needs no capi header).
using ReduceFn = int32_t (*)(void* dst, const void* a, const void* b, size_t count, int32_t dtype);
using ReduceFnWithData = int32_t (*)(void* dst, const void* a, const void* b, size_t count, int32_t dtype,
                                     void* user_data);
using CodecBytesFn = size_t (*)(size_t count);
using CodecEncodeFn = int32_t (*)(const float* src, size_t count, void* dst);
using CodecDecodeFn = int32_t (*)(const void* src, size_t count, float* dst);
using RouterFn = int32_t (*)(const float* scores, size_t tokens, int32_t experts, int32_t topk, int32_t* indices);
using ScheduleFn = int32_t (*)(int32_t ranks, int32_t microbatches, int32_t stages_per_rank, void* actions,
                               size_t capacity, size_t* counts, int32_t* stage_rank);
using CostFn = double (*)(int32_t action_kind, int32_t stage, int32_t nstages, int32_t microbatch,
                          int32_t microbatch_size);

// Where an extension came from, for messages: "operator 'absmax' (plugin reduce_ops, libc_reduce.so)".
struct Origin {
  std::string name;    // the entry or operator name
  std::string plugin;  // the plugin's name, "" for weft_op_create
  std::string path;    // the plugin's file, "" for weft_op_create
  std::string describe(const char* what) const;
};

struct CustomOp {
  Origin origin;
  ReduceFn fn = nullptr;                 // a plugin's entry, or
  ReduceFnWithData fn_with_data = nullptr;  // weft_op_create's adapter with its user_data
  void* user_data = nullptr;
  std::shared_ptr<const void> user_data_owner;  // keeps user_data alive while any collective holds the op
  uint32_t dtype_mask = 0;  // bit d set: takes DType d
  bool takes(DType d) const { return (dtype_mask >> static_cast<int>(d)) & 1u; }
  // dst = a op b; a nonzero return throws weft::Error naming the operator, with that status when
  // it is one of weft's error codes (1-9), else INVALID_ARGUMENT.
  void apply(void* dst, const void* a, const void* b, size_t count, DType dtype) const;
};

struct Codec {
  Origin origin;
  CodecBytesFn bytes = nullptr;
  CodecEncodeFn encode = nullptr;
  CodecDecodeFn decode = nullptr;
};

struct Router {
  Origin origin;
  RouterFn select = nullptr;
};

struct ScheduleGenerator {
  Origin origin;
  ScheduleFn generate = nullptr;
};

struct CostModel {
  Origin origin;
  CostFn cost = nullptr;
};

// Registration: returns the new id (kIdBase, kIdBase + 1, ... per kind).
int add_op(CustomOp op);
int add_codec(Codec codec);
int add_router(Router router);
int add_schedule(ScheduleGenerator generator);
int add_cost_model(CostModel model);

// Removal (weft_op_destroy): false when id is not a live operator.
bool remove_op(int id);

// Lookup by id: nullptr when id was never given out or was removed.
std::shared_ptr<const CustomOp> find_op(int id);
std::shared_ptr<const Codec> find_codec(int id);
std::shared_ptr<const Router> find_router(int id);
std::shared_ptr<const ScheduleGenerator> find_schedule(int id);
std::shared_ptr<const CostModel> find_cost_model(int id);

// Lookup that throws weft::Error(INVALID_ARGUMENT) "no <what> with id N (ids of plugins and
// weft_op_create start at 64; this process has K)" when the id is unknown.
std::shared_ptr<const CustomOp> get_op(int id);
std::shared_ptr<const Codec> get_codec(int id);
std::shared_ptr<const Router> get_router(int id);
std::shared_ptr<const ScheduleGenerator> get_schedule(int id);
std::shared_ptr<const CostModel> get_cost_model(int id);

}  // namespace weft::plugin
