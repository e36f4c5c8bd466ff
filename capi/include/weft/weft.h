/*
 * weft.h - the C ABI of libweft.so.
 *
 * Conventions (see DESIGN.md, "ABI rules"):
 *  - every function returns weft_status_t; results come back through out-pointers;
 *  - on failure weft_last_error() (thread-local) says which function, which argument or peer
 *    rank, and what was expected; the text stays valid until the next weft call on that thread;
 *  - handles are opaque; destroy/free functions accept NULL; a destroyed or foreign handle is
 *    detected (magic field) and answered with WEFT_ERR_INVALID_ARGUMENT where the memory is
 *    still readable;
 *  - option structs begin with `size_t struct_size` and have an ..._INIT macro.
 *
 * Thread safety: a communicator (and requests it returned) is used by one thread at a time,
 * as in NCCL. Different communicators may be used from different threads concurrently.
 * weft_comm_abort() is the exception: it may be called from any thread at any time.
 */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

/* One header per handle family (DESIGN.md, "Handle families and their headers"); each can be
 * read on its own, and each includes what it needs. */
#include "common.h" /* version, status, dtypes, reduction ops */
#include "comm.h"   /* communicators, requests, collectives, point-to-point */
#include "mesh.h"   /* meshes, layouts, sharded tensors, redistribution, checkpoints */
#include "training.h" /* gradient bucketer, ZeRO, tensor/sequence/context-parallel communication */
#include "pipeline.h" /* pipeline schedules: generators, validator, simulator, tuning, executor */
#include "moe.h"      /* expert parallelism: router, layout, dispatch and combine */
#include "plugin.h"   /* plugins: loading, calling by name, closures, reduction operators */
#include "plan.h"     /* the planner: rank parallel layouts by predicted step time; Amdahl/Gustafson */

#endif /* WEFT_WEFT_H */
