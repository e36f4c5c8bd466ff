/*
 * weft/plugin.h - plugins: shared libraries, written in any language that can export C symbols
 * (C, C++, Rust, Go, Zig, ...), that extend weft at run time with reduction operators, gradient
 * codecs, MoE routers, schedule generators and cost models, and whose functions any binding can
 * call by name. Part of the C ABI of libweft.so; include <weft/weft.h>. Plugin authors include
 * this header alone: a plugin never links against libweft.
 *
 * ------------------------------------------------------------------ writing a plugin
 *
 * A plugin exports one C function, WEFT_PLUGIN_MANIFEST_SYMBOL:
 *
 *     const void *weft_plugin_manifest(size_t *size);
 *
 * returning FlatBuffers bytes of core/schema/plugin.fbs (file identifier "WFPM") that stay valid
 * while the library is loaded: the plugin's name, version, the plugin ABI it was built for
 * (WEFT_PLUGIN_ABI_MAJOR/MINOR) and its entries. Each entry has a kind, a name (unique in the
 * plugin), the exported symbol that implements it, a signature (return and argument types from
 * weft_value_type_t) and a doc line. A plugin need not write FlatBuffers code: the manifest can
 * be written as JSON and turned into bytes with `flatc --binary core/schema/plugin.fbs
 * manifest.json` (plugins/README.md shows the build in C, C++, Rust and Go).
 *
 * Entry kinds (weft_plugin_kind_t) and the C signature each kind's symbol must have; the
 * manifest must declare exactly that signature (checked at load):
 *   FUNCTION   any signature: only called by name (weft_plugin_call).
 *   REDUCE_OP  weft_plugin_reduce_fn; registered as a new weft_op_t (see weft_op_create for the
 *              rules an operator must follow). The entry's dtypes list the element types it takes.
 *   CODEC_BYTES, CODEC_ENCODE, CODEC_DECODE  the three parts of a gradient codec named by the
 *              entry names "<codec>.bytes", "<codec>.encode", "<codec>.decode" (all three
 *              required); registered as a new weft_wire_format_t for the bucketer and ZeRO.
 *   ROUTER     weft_plugin_router_fn; a new selector for weft_router_config_t.selector.
 *   SCHEDULE   weft_plugin_schedule_fn; a new weft_schedule_kind_t for weft_schedule_generate.
 *   COST_MODEL weft_plugin_cost_fn; per-action times for weft_schedule_simulate and
 *              weft_schedule_tune (weft_pipeline_costs_t.cost_model, weft_tune_config_t.cost_model).
 * Kind functions return 0 for success; any other value fails the weft call that used them with
 * a message naming the plugin, the entry and the value (a cost model fails with a negative or
 * non-finite time).
 *
 * What weft checks: the manifest bytes with the FlatBuffers verifier (depth, table count and
 * size limits) before reading anything; then the ABI major (equal) and minor (not newer than
 * this weft's), every name (printable ASCII without spaces, 1-128 characters, unique), every kind and type (from
 * the closed lists), a kind's signature against the kind's C signature, and every symbol: it
 * must be defined in the plugin's own library (not resolved into one of its dependencies) and be a
 * function (an ELF STT_FUNC/STT_GNU_IFUNC symbol). Any
 * failure refuses the whole plugin (WEFT_ERR_INVALID_ARGUMENT, or WEFT_ERR_MISMATCH for the ABI
 * version) with a message naming the file, the entry and what was expected, and registers
 * nothing.
 * What weft cannot check: that a FUNCTION symbol really takes the arguments the manifest
 * declares (C symbols carry no types: a manifest that lies about a FUNCTION's arity or types
 * makes weft_plugin_call undefined behaviour), and anything the plugin's code does: it runs in
 * weft's process with weft's privileges and can corrupt memory, crash, block or leak. Load only
 * plugins you would link against.
 *
 * Lifetime: a loaded library is never unloaded (dlclose is unsafe for Go and Rust runtimes and
 * for threads a plugin may start); its extensions stay registered until the process exits.
 * Loading the same file again returns a new handle to the same plugin without registering twice.
 * Extension ids are process-wide, assigned in load (and creation) order from
 * WEFT_PLUGIN_ID_BASE: every rank must load plugins and create operators in the same order so
 * the same id means the same thing everywhere (WEFT_PLUGINS does this for an unchanged program).
 *
 * WEFT_PLUGINS: a ':'-separated list of plugin paths, loaded (in order, once per process) when
 * the first communicator is created. A path that fails to load fails that communicator creation
 * with the plugin's error.
 *
 * Thread safety: every function here may be called from any thread.
 */
#ifndef WEFT_PLUGIN_H
#define WEFT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WEFT_PLUGIN_ABI_MAJOR 1
#define WEFT_PLUGIN_ABI_MINOR 0
#define WEFT_PLUGIN_MANIFEST_SYMBOL "weft_plugin_manifest"
/* The first id of every kind of extension (weft_op_t, weft_wire_format_t, weft_schedule_kind_t,
 * router selectors and cost models); built-in values stay below it. */
#define WEFT_PLUGIN_ID_BASE 64

/* ------------------------------------------------------------------ for plugin authors */

typedef const void *(*weft_plugin_manifest_fn)(size_t *size);

/* The closed list of argument and return types (the same numbers as plugin.fbs's ValueType). */
typedef enum weft_value_type {
  WEFT_TYPE_VOID = 0, /* return type only */
  WEFT_TYPE_I8 = 1,
  WEFT_TYPE_U8 = 2,
  WEFT_TYPE_I16 = 3,
  WEFT_TYPE_U16 = 4,
  WEFT_TYPE_I32 = 5,
  WEFT_TYPE_U32 = 6,
  WEFT_TYPE_I64 = 7,
  WEFT_TYPE_U64 = 8,
  WEFT_TYPE_F32 = 9,
  WEFT_TYPE_F64 = 10,
  WEFT_TYPE_PTR = 11,    /* void * */
  WEFT_TYPE_SIZE = 12,   /* size_t */
  WEFT_TYPE_TENSOR = 13, /* const weft_tensor_t * (never NULL in a call) */
  WEFT_TYPE_STRING = 14, /* const char *, NUL-terminated (never NULL in a call) */
  WEFT_TYPE_FN = 15,     /* a C function pointer (never NULL in a call; see weft_closure_create) */
  WEFT_TYPE_NUM = 16
} weft_value_type_t;

typedef enum weft_plugin_kind {
  WEFT_PLUGIN_FUNCTION = 0,
  WEFT_PLUGIN_REDUCE_OP = 1,
  WEFT_PLUGIN_CODEC_BYTES = 2,
  WEFT_PLUGIN_CODEC_ENCODE = 3,
  WEFT_PLUGIN_CODEC_DECODE = 4,
  WEFT_PLUGIN_ROUTER = 5,
  WEFT_PLUGIN_SCHEDULE = 6,
  WEFT_PLUGIN_COST_MODEL = 7,
  WEFT_PLUGIN_NUM_KINDS = 8
} weft_plugin_kind_t;

/* REDUCE_OP, signature I32(PTR, PTR, PTR, SIZE, I32): dst[i] = a[i] op b[i] for i < count, of
 * element type dtype (a weft_dtype_t). dst may be a or b exactly. Called once per chunk of a
 * collective (not per element), from whichever thread runs the collective. */
typedef int32_t (*weft_plugin_reduce_fn)(void *dst, const void *a, const void *b, size_t count, int32_t dtype);

/* CODEC_BYTES, SIZE(SIZE): the bytes encode writes for count float32 values (a pure function
 * of count). CODEC_ENCODE, I32(PTR, SIZE, PTR): encodes src[0..count) (float32) into dst
 * (bytes(count) bytes). CODEC_DECODE, I32(PTR, SIZE, PTR): decodes into dst[0..count)
 * (float32). encode and decode must be deterministic: every rank decodes every rank's bytes. */
typedef size_t (*weft_plugin_codec_bytes_fn)(size_t count);
typedef int32_t (*weft_plugin_codec_encode_fn)(const float *src, size_t count, void *dst);
typedef int32_t (*weft_plugin_codec_decode_fn)(const void *src, size_t count, float *dst);

/* ROUTER, I32(PTR, SIZE, I32, I32, PTR): scores is [tokens, experts] float32 (the selection
 * scores: the score function's values plus the bias); writes the topk chosen experts of each
 * token to indices[t * topk + j], distinct and in [0, experts) (weft checks and names the token).
 * Replaces the router's top-k selection; weights, capacity and losses follow as for the
 * built-in selection. */
typedef int32_t (*weft_plugin_router_fn)(const float *scores, size_t tokens, int32_t experts, int32_t topk,
                                         int32_t *indices);

/* SCHEDULE, I32(I32, I32, I32, PTR, SIZE, PTR, PTR): for p ranks, m micro-batches and v stages
 * per rank (v >= 1), writes every rank's compute-only action list (weft_action_t of
 * weft/pipeline.h: F, B, I, W, REDUCE_GRAD) rank after rank into actions (capacity elements),
 * counts[r] = the length of rank r's list, and stage_rank[s] (p * v stages) = the rank of stage
 * s. weft inserts the SEND/RECV actions and validates the result like any schedule. */
typedef int32_t (*weft_plugin_schedule_fn)(int32_t ranks, int32_t microbatches, int32_t stages_per_rank,
                                           void *actions, size_t capacity, size_t *counts, int32_t *stage_rank);

/* COST_MODEL, F64(I32, I32, I32, I32, I32): the time of one compute action (a
 * weft_action_kind_t: F, B, I, W or REDUCE_GRAD) of stage `stage` of nstages, micro-batch
 * `microbatch`, with microbatch_size samples per micro-batch. */
typedef double (*weft_plugin_cost_fn)(int32_t action_kind, int32_t stage, int32_t nstages, int32_t microbatch,
                                      int32_t microbatch_size);

/* ------------------------------------------------------------------ loading and inspecting */

typedef struct weft_plugin *weft_plugin_t;

/* Loads the shared library at path (dlopen, RTLD_NOW | RTLD_LOCAL), verifies its manifest and
 * registers its extensions (all or nothing). Errors name path and, where there is one, the
 * entry: a file that is not a loadable library, no manifest symbol, a manifest that fails the
 * verifier, a wrong ABI (WEFT_ERR_MISMATCH: "built for plugin ABI 2.0, this weft has 1.0"), a
 * missing or non-function symbol, a duplicate entry name, an unknown kind or type, a kind whose
 * signature is not the kind's. */
weft_status_t weft_plugin_load(const char *path, weft_plugin_t *plugin);
/* Releases the handle (NULL accepted); the library and its extensions stay (see Lifetime). */
weft_status_t weft_plugin_destroy(weft_plugin_t plugin);

/* Strings stay valid while the plugin handle lives. */
typedef struct weft_plugin_info {
  size_t struct_size;
  const char *name;
  const char *version;
  const char *path; /* as given to weft_plugin_load */
  int abi_major;
  int abi_minor;
  size_t nentries;
} weft_plugin_info_t;

#define WEFT_PLUGIN_INFO_INIT { sizeof(weft_plugin_info_t), NULL, NULL, NULL, 0, 0, 0 }

weft_status_t weft_plugin_info(weft_plugin_t plugin, weft_plugin_info_t *info);

/* One entry; strings and arrays stay valid while the plugin handle lives. id is the extension id
 * a registered kind got (the weft_op_t, weft_wire_format_t (the same for a codec's three parts),
 * router selector, weft_schedule_kind_t or cost model), -1 for FUNCTION. */
typedef struct weft_plugin_entry {
  size_t struct_size;
  const char *name;
  weft_plugin_kind_t kind;
  const char *symbol;
  const char *doc;
  weft_value_type_t ret;
  const weft_value_type_t *args;
  size_t nargs;
  const weft_dtype_t *dtypes; /* REDUCE_OP: the element types it takes; else none */
  size_t ndtypes;
  int id;
} weft_plugin_entry_t;

#define WEFT_PLUGIN_ENTRY_INIT \
  { sizeof(weft_plugin_entry_t), NULL, WEFT_PLUGIN_FUNCTION, NULL, NULL, WEFT_TYPE_VOID, NULL, 0, NULL, 0, -1 }

/* Entry index (0 <= index < nentries), in manifest order. */
weft_status_t weft_plugin_entry(weft_plugin_t plugin, size_t index, weft_plugin_entry_t *entry);
/* The entry named name (WEFT_ERR_INVALID_ARGUMENT naming the plugin's entries when none is). */
weft_status_t weft_plugin_lookup(weft_plugin_t plugin, const char *name, weft_plugin_entry_t *entry);

/* ------------------------------------------------------------------ calling by name */

/* A tagged value. Integer types and SIZE travel in i (unsigned values as their bits: a U64 above
 * INT64_MAX is negative here), F32 and F64 in f, PTR, TENSOR, STRING and FN in p. */
typedef struct weft_value {
  weft_value_type_t type;
  int64_t i;
  double f;
  const void *p;
} weft_value_t;

#define WEFT_VALUE_INIT { WEFT_TYPE_VOID, 0, 0.0, NULL }

/* Calls entry (any kind) with args[0..nargs) through libffi (the call interface is prepared once,
 * at load). Each argument's type must equal the signature's (WEFT_ERR_INVALID_ARGUMENT naming
 * the argument, counted from 0: "argument 1 of 'add_i64': expected I64, got F64"), integers must fit their
 * width, and TENSOR, STRING and FN must not be NULL. result (may be NULL when the entry returns
 * VOID) gets the return value with its type. The call runs on the calling thread; weft cannot
 * stop a plugin that crashes or never returns. */
weft_status_t weft_plugin_call(weft_plugin_t plugin, const char *entry, const weft_value_t *args, size_t nargs,
                               weft_value_t *result);

/* ------------------------------------------------------------------ callbacks into any language */

typedef struct weft_closure *weft_closure_t;

/* The one callback type a binding implements: args as tagged values; write the return value to
 * result (its type preset to the closure's return type). A non-OK status makes the C function
 * return 0 (of its return type) and is kept for weft_closure_error. */
typedef weft_status_t (*weft_closure_fn)(const weft_value_t *args, size_t nargs, weft_value_t *result,
                                         void *user_data);

/* Makes a C function with the given signature (libffi closure) that calls handler(args...,
 * user_data): *function is its address, to pass as an FN argument to a plugin (or anywhere a C
 * function pointer of that signature is wanted). It stays valid until weft_closure_destroy. */
weft_status_t weft_closure_create(weft_value_type_t ret, const weft_value_type_t *args, size_t nargs,
                                  weft_closure_fn handler, void *user_data, weft_closure_t *closure,
                                  void **function);
/* How many calls of the closure's function failed (handler status not OK) since creation, and the
 * message of the last failure (valid until the next call of the closure's function or destroy). */
weft_status_t weft_closure_error(weft_closure_t closure, uint64_t *failures, const char **message);
weft_status_t weft_closure_destroy(weft_closure_t closure);

/* ------------------------------------------------------------------ reduction operators */

/* dst[i] = a[i] op b[i] for i < count (dst may be a or b exactly); return WEFT_OK or an error
 * status (the collective then fails on this rank with the operator's name). */
typedef weft_status_t (*weft_reduce_fn)(void *dst, const void *a, const void *b, size_t count, weft_dtype_t dtype,
                                        void *user_data);

/*
 * A reduction operator; initialise with WEFT_OP_CONFIG_INIT.
 *   name: for messages (1-128 printable characters).
 *   fn, user_data: the operator.
 *   dtypes, ndtypes: the element types fn takes (at least one). FLOAT16, BFLOAT16 and both FP8
 *     types are reduced in float32 by weft (common.h's reduction rules), so they are usable
 *     where FLOAT32 is listed, and fn sees FLOAT32 for them.
 * The operator must be associative and commutative: weft's algorithms combine partial results
 * in an order that depends on the rank count and the message size, and every rank must get the
 * same result bits only if fn is a function of its inputs alone. With one rank the operator is
 * never applied (the result is the input, as in MPI), so an operator that also transforms single
 * values (absmax's |x|) does so only where two values meet.
 */
typedef struct weft_op_config {
  size_t struct_size;
  const char *name;
  weft_reduce_fn fn;
  void *user_data;
  const weft_dtype_t *dtypes;
  size_t ndtypes;
} weft_op_config_t;

#define WEFT_OP_CONFIG_INIT { sizeof(weft_op_config_t), NULL, NULL, NULL, NULL, 0 }

/* Registers an operator and returns its weft_op_t (WEFT_PLUGIN_ID_BASE and up): usable in
 * weft_allreduce, weft_reduce and weft_reduce_scatter (and their async forms) on host memory, and
 * on device memory where the device path stages through host memory (not over NCCL:
 * WEFT_ERR_UNSUPPORTED). Ranks must create operators in the same order. */
weft_status_t weft_op_create(const weft_op_config_t *config, weft_op_t *op);
/* Unregisters op (a later collective with it fails with WEFT_ERR_INVALID_ARGUMENT; the id is not
 * reused). Must not race with a collective using op. Built-in ops and plugin ops are refused. */
weft_status_t weft_op_destroy(weft_op_t op);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_PLUGIN_H */
