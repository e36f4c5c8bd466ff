/*
 * weft/mesh.h - device meshes, layouts, sharded tensors, redistribution and distributed
 * checkpoints. Part of the C ABI of libweft.so; include <weft/weft.h>.
 *
 * A mesh arranges the ranks of a communicator in an n-d grid with named dims ("dp", "tp").
 * A layout gives one placement per mesh dim: SHARD(tensor dim), REPLICATE or PARTIAL(op).
 * A sharded tensor is a global shape, a dtype, a mesh, a layout and this rank's local piece
 * (memory owned by the caller). weft_redistribute moves a sharded tensor into another layout,
 * on the same mesh or on another mesh made from the same parent communicator.
 *
 * Thread safety: a mesh and the sharded tensors on it may be queried from any thread; calls
 * that communicate (weft_redistribute, weft_checkpoint_save) use the mesh's communicators and
 * follow their rule: one thread at a time per communicator, as in comm.h.
 */
#ifndef WEFT_MESH_H
#define WEFT_MESH_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ meshes */

#define WEFT_MESH_MAX_DIMS 4
/* Longest dim name, without its terminating NUL. */
#define WEFT_MESH_MAX_NAME 31

typedef struct weft_mesh *weft_mesh_t;

/*
 * Mesh options; initialise with WEFT_MESH_CONFIG_INIT. NULL = all defaults.
 *   ranks/nranks: which ranks of the communicator form the mesh, in mesh order (row-major over
 *   the shape: the last dim varies fastest). NULL/0 = all ranks of the communicator in rank
 *   order. Otherwise nranks must equal the product of the shape and the ranks must be distinct
 *   and in range.
 */
typedef struct weft_mesh_config {
  size_t struct_size;
  const int *ranks;
  size_t nranks;
} weft_mesh_config_t;

#define WEFT_MESH_CONFIG_INIT \
  { sizeof(weft_mesh_config_t), NULL, 0 }

/*
 * Collective over every rank of `comm` (members of the mesh or not). Makes a mesh of
 * `ndims` (1..WEFT_MESH_MAX_DIMS) dims of sizes shape[0..ndims) named dim_names[0..ndims)
 * (distinct, non-empty, at most WEFT_MESH_MAX_NAME characters; NULL = "d0", "d1", ...).
 * Every rank of comm gets a handle; ranks that are not members get a descriptor mesh: it
 * answers every query about the grid (and can describe the other side of a redistribution),
 * but has no coordinates and no communicators. Members get one sub-communicator per dim and
 * per set of dims (e.g. the ("dp","tp") plane of a 3-d mesh), all made here, so queries never
 * communicate. The mesh keeps its own reference to comm's connections: comm may be destroyed
 * first.
 * Errors: INVALID_ARGUMENT when the product of the shape differs from the number of mesh ranks,
 * for duplicate or empty dim names, bad ranks; MISMATCH when ranks passed different shapes.
 */
weft_status_t weft_mesh_create(weft_comm_t comm, int ndims, const int *shape, const char *const *dim_names,
                               const weft_mesh_config_t *config, weft_mesh_t *mesh);
/* Frees the mesh and the communicators it made. Not collective. NULL is accepted. */
weft_status_t weft_mesh_destroy(weft_mesh_t mesh);

/* Number of dims, and the size of each (shape needs room for ndims ints; either may be NULL). */
weft_status_t weft_mesh_shape(weft_mesh_t mesh, int *ndims, int *shape);
/* The name of dim `dim` (owned by the mesh, valid until it is destroyed). */
weft_status_t weft_mesh_dim_name(weft_mesh_t mesh, int dim, const char **name);
/* The index of the dim called `name`; INVALID_ARGUMENT naming it when there is none. */
weft_status_t weft_mesh_dim_index(weft_mesh_t mesh, const char *name, int *dim);
/* 1 when this rank is a member of the mesh, else 0. */
weft_status_t weft_mesh_is_member(weft_mesh_t mesh, int *member);
/* This rank's coordinates (ndims ints) and its position in mesh order (row-major). Members
 * only: INVALID_ARGUMENT on a descriptor mesh. Either pointer may be NULL. */
weft_status_t weft_mesh_coords(weft_mesh_t mesh, int *coords, int *mesh_rank);
/* The rank, in the communicator the mesh was made from, of the member at mesh position
 * mesh_rank (0 .. product(shape)-1). Works on every rank. */
weft_status_t weft_mesh_parent_rank(weft_mesh_t mesh, int mesh_rank, int *parent_rank);
/*
 * The communicator over the mesh dims dims[0..ndims) (members only): its ranks are the members
 * that share this rank's coordinates on every other dim, ordered row-major over the chosen dims.
 * dims must be distinct and increasing (INVALID_ARGUMENT otherwise). One dim gives the dim's group (e.g. this rank's "tp" group); all dims in
 * mesh order give the whole mesh. The handle belongs to the mesh: use it freely, never destroy
 * it (weft_comm_destroy refuses), and do not use it after weft_mesh_destroy.
 */
weft_status_t weft_mesh_comm(weft_mesh_t mesh, const int *dims, int ndims, weft_comm_t *comm);

/* ------------------------------------------------------------------ layouts */

typedef enum weft_placement_kind {
  WEFT_REPLICATE = 0, /* every rank along the mesh dim holds the same values */
  WEFT_SHARD = 1,     /* tensor dim `dim` is split into chunks along the mesh dim */
  WEFT_PARTIAL = 2    /* each rank holds a term; the value is their reduction by `op` */
} weft_placement_kind_t;

/*
 * One placement per mesh dim. SHARD uses `dim` (a tensor dim); PARTIAL uses `op`: WEFT_SUM,
 * WEFT_AVG, WEFT_MIN or WEFT_MAX (PROD is refused: no redistribution step can split a product).
 *
 * The split rule (torch.chunk's): a tensor dim of size n over k ranks gives chunks of
 * c = ceil(n / k) elements; rank i holds [i*c, min((i+1)*c, n)), so trailing chunks may be
 * smaller or empty (n = 5, k = 4: 2, 2, 1, 0). Several mesh dims may shard one tensor dim: the
 * leftmost mesh dim splits first, the next splits each of its chunks again (nested), and so on.
 * No padding is ever visible: local shapes are exact.
 *
 * PARTIAL(AVG) means the value is the mean of the terms along the mesh dim (for integer dtypes
 * the wrapped sum divided by the group size, truncated: keep terms small enough not to wrap).
 * Turning a dim into PARTIAL keeps the value: SUM keeps it on coordinate 0 and writes zeros
 * elsewhere; AVG, MIN and MAX keep it on every rank. A dim that is PARTIAL with the same op on
 * both sides of a redistribution on one mesh keeps each rank's own term.
 */
typedef struct weft_placement {
  weft_placement_kind_t kind;
  int dim;       /* WEFT_SHARD: the tensor dim (0 .. tensor ndim-1) */
  weft_op_t op;  /* WEFT_PARTIAL: the reduction */
} weft_placement_t;

#define WEFT_PLACEMENT_REPLICATE_INIT \
  { WEFT_REPLICATE, 0, WEFT_SUM }

/*
 * Without data or communication: the shape of the local piece of mesh member `mesh_rank`
 * (-1 = this rank, members only) and the global index of its first element, for a tensor of
 * `ndim` (0..WEFT_TENSOR_MAX_DIMS) dims and global_shape, in layout placements[0..mesh ndims).
 * local_shape and global_offset need room for ndim values; either may be NULL.
 */
weft_status_t weft_mesh_local_shape(weft_mesh_t mesh, const weft_placement_t *placements, int ndim,
                                    const int64_t *global_shape, int mesh_rank, int64_t *local_shape,
                                    int64_t *global_offset);

/* ------------------------------------------------------------------ sharded tensors */

typedef struct weft_sharded *weft_sharded_t;

/* Options; initialise with WEFT_SHARDED_CONFIG_INIT. NULL = defaults. */
typedef struct weft_sharded_config {
  size_t struct_size;
  /* Shown in error messages; copied. NULL = "tensor". */
  const char *name;
} weft_sharded_config_t;

#define WEFT_SHARDED_CONFIG_INIT \
  { sizeof(weft_sharded_config_t), NULL }

/*
 * Not collective. Describes a tensor of global_shape[0..ndim) and dtype laid out on mesh by
 * placements[0..mesh ndims), with this rank's piece in `local` (caller memory, host or CUDA,
 * strided views allowed). local's shape must equal weft_mesh_local_shape for this rank and its
 * dtype must be dtype (its data may be NULL when the piece is empty, e.g. a trailing chunk of
 * an uneven split). On a descriptor mesh (this rank not a member) local must be NULL; such a
 * tensor describes the other side of a redistribution between meshes.
 * The handle keeps a copy of the view (not of the data): the memory must outlive its use.
 */
weft_status_t weft_sharded_create(weft_mesh_t mesh, int ndim, const int64_t *global_shape, weft_dtype_t dtype,
                                  const weft_placement_t *placements, const weft_tensor_t *local,
                                  const weft_sharded_config_t *config, weft_sharded_t *tensor);
/* NULL is accepted; the data is the caller's and is not touched. */
weft_status_t weft_sharded_destroy(weft_sharded_t tensor);
/* The local view (shape and strides point into the handle; NULL data on a descriptor). */
weft_status_t weft_sharded_local(weft_sharded_t tensor, weft_tensor_t *local);
/* Points the handle at other memory of the same local shape and dtype (e.g. next step's buffer). */
weft_status_t weft_sharded_set_local(weft_sharded_t tensor, const weft_tensor_t *local);

/* ------------------------------------------------------------------ redistribution */

/*
 * Collective over the members of src's mesh and dst's mesh (a rank in both takes part once).
 * Writes into dst's local memory the values of src laid out as dst says. src and dst have the
 * same global shape and dtype; their meshes are the same mesh, or two meshes made from one
 * communicator (e.g. 4 ranks -> 2 ranks, or one pipeline stage to the next). src's and dst's
 * local memory must not overlap. Every rank passes handles describing the same two layouts (on
 * a rank outside one mesh, that side is a descriptor).
 *
 * weft picks one step per changed mesh dim and the order that moves the fewest bytes:
 * SHARD->REPLICATE all-gather, PARTIAL->REPLICATE all-reduce, PARTIAL->SHARD reduce-scatter,
 * SHARD(a)->SHARD(b) all-to-all, REPLICATE->SHARD and REPLICATE->PARTIAL local; moves no single
 * dim can make (and every move between meshes) exchange exactly the needed boxes point-to-point.
 * Memory: on each rank, src's and dst's local pieces are all host memory (pageable or pinned;
 * stream must be NULL, else WEFT_ERR_UNSUPPORTED) or all CUDA device memory of the GPU of the
 * mesh's communicators (device_type WEFT_DEVICE_CUDA; a mix of host and device memory, managed
 * memory or another GPU's memory is refused, naming src or dst). Every rank of the
 * redistribution uses the same kind. Device memory: every step (copies, collectives, exchange)
 * is queued in order on `stream`, stream-ordered as the collectives of comm.h are: with a
 * stream the call may return before the data has moved; with a NULL stream weft uses a stream of
 * its own (ordered after the caller's work on the legacy default stream) and the call returns
 * when dst is written. Communicators without NCCL stage through pinned host memory, as comm.h's
 * collectives do; their steps are done when the call returns, even with a request.
 * request: NULL = blocking, else as in comm.h. The mesh's communicators (and, between meshes,
 * the parent communicator's point-to-point) must not have other operations pending meanwhile.
 */
weft_status_t weft_redistribute(weft_sharded_t src, weft_sharded_t dst, void *stream, weft_request_t *request);

typedef enum weft_redistribute_kind {
  WEFT_STEP_LOCAL = 0,          /* a local copy, slice or zero fill: no communication */
  WEFT_STEP_ALLGATHER = 1,      /* over the mesh dim's group */
  WEFT_STEP_ALLREDUCE = 2,      /* over the mesh dim's group */
  WEFT_STEP_REDUCE_SCATTER = 3, /* over the mesh dim's group (one reduce per rank when uneven) */
  WEFT_STEP_ALLTOALL = 4,       /* over the mesh dim's group */
  WEFT_STEP_EXCHANGE = 5        /* point-to-point exchange of boxes over the whole mesh/parent */
} weft_redistribute_kind_t;

typedef struct weft_redistribute_step {
  weft_redistribute_kind_t kind;
  int mesh_dim;                /* the mesh dim changed (-1 for EXCHANGE or the final copy) */
  weft_placement_t from, to;   /* the placements on mesh_dim before and after */
  /* The bytes of this rank's data that must reach other ranks in this step, whatever algorithm
   * carries them: ALLGATHER its piece times (group size - 1); REDUCE_SCATTER its local bytes
   * minus its own part; ALLTOALL and EXCHANGE the pieces it sends to other ranks; ALLREDUCE
   * 2 (k-1)/k times its local bytes (a bandwidth-optimal ring's); LOCAL 0. */
  uint64_t bytes_sent;
  uint64_t max_bytes_sent;     /* the same for the member that sends most in this step */
} weft_redistribute_step_t;

/*
 * Without communication: the steps weft_redistribute(src, dst) would run, in order.
 * steps may be NULL to ask for the count; *nsteps gets the number of steps; when capacity is
 * smaller only the first `capacity` are written. Works on every rank involved.
 */
weft_status_t weft_redistribute_plan(weft_sharded_t src, weft_sharded_t dst, weft_redistribute_step_t *steps,
                                     size_t capacity, size_t *nsteps);

/* ------------------------------------------------------------------ distributed checkpoints
 *
 * A checkpoint is a directory: one data file per writing rank per save, and `index.weft`, a
 * FlatBuffers index (core/schema/checkpoint.fbs) listing every tensor (name, dtype, global
 * shape) and the box of every stored shard (offset, shape, file, byte offset, CRC-32C).
 * Replicated shards are stored once; PARTIAL tensors are reduced before they are written.
 *
 * Local pieces may be host memory or CUDA device memory (device_type WEFT_DEVICE_CUDA, any
 * strides), also mixed across ranks and tensors. A device piece must be device memory of GPU
 * device_id (else WEFT_ERR_INVALID_ARGUMENT, before any data moves); it is staged through host
 * memory: save copies it (on that GPU, on the legacy default stream, so work queued there or on
 * a blocking stream is waited for; work on a non-blocking stream must be complete) into a host
 * buffer of its size and writes from there, a PARTIAL one is reduced on the host afterwards;
 * load reads into a host buffer and copies that into the piece, and returns once the piece holds
 * it. A weft built without CUDA refuses device pieces with WEFT_ERR_UNSUPPORTED.
 */

typedef struct weft_checkpoint_config {
  size_t struct_size;
  /* 1 = fsync every file and the directory before the index is renamed into place (default);
   * 0 = skip fsync (tests, tmpfs). */
  int fsync;
} weft_checkpoint_config_t;

#define WEFT_CHECKPOINT_CONFIG_INIT \
  { sizeof(weft_checkpoint_config_t), 1 }

/*
 * Collective over `comm`: every rank passes the sharded tensors it holds (count may differ by
 * rank; a tensor held by several ranks has the same name and global shape and dtype on each),
 * made on meshes built from comm. Writes them into directory `dir` (created when missing).
 * Atomic: data files get names unique to this save, the index is written to a temporary name,
 * fsynced and renamed; a save interrupted at any point (a rank killed) leaves the previous
 * checkpoint in dir loadable and no new index. Files of the previous save are removed after.
 */
weft_status_t weft_checkpoint_save(weft_comm_t comm, const char *dir, const char *const *names,
                                   const weft_sharded_t *tensors, size_t count,
                                   const weft_checkpoint_config_t *config);
/*
 * Not collective. Fills each tensors[i]'s local memory (any layout, any mesh, any number of
 * ranks) with the values stored under names[i], reading only the boxes this rank needs.
 * Errors name the file and tensor: a missing tensor, a different global shape or dtype, an index
 * that fails the FlatBuffers verifier, a truncated data file, a checksum mismatch.
 * config: NULL or WEFT_CHECKPOINT_CONFIG_INIT (load reads no field of it today; it is there so
 * that load options can be added without a new function).
 */
weft_status_t weft_checkpoint_load(const char *dir, const char *const *names, const weft_sharded_t *tensors,
                                   size_t count, const weft_checkpoint_config_t *config);

/* An opened checkpoint index, for inspection (weft-ckpt uses these). */
typedef struct weft_checkpoint *weft_checkpoint_t;

/* Reads and verifies dir's index. */
weft_status_t weft_checkpoint_open(const char *dir, weft_checkpoint_t *checkpoint);
weft_status_t weft_checkpoint_close(weft_checkpoint_t checkpoint);
/* Number of tensors in the checkpoint. */
weft_status_t weft_checkpoint_count(weft_checkpoint_t checkpoint, size_t *count);
/* Tensor i: its name (owned by the handle), dtype, ndim, global shape (room for
 * WEFT_TENSOR_MAX_DIMS) and the number of stored shards. Any out-pointer may be NULL. */
weft_status_t weft_checkpoint_tensor(weft_checkpoint_t checkpoint, size_t i, const char **name,
                                     weft_dtype_t *dtype, int *ndim, int64_t *global_shape, size_t *nshards);
/* Reads every shard and checks its length and CRC-32C; the first failure names file and tensor. */
weft_status_t weft_checkpoint_verify(weft_checkpoint_t checkpoint);
/* Writes the whole checkpoint as one safetensors file (8-byte header length, JSON header, data;
 * FP8 types as F8_E4M3 / F8_E5M2), readable by Hugging Face's safetensors. */
weft_status_t weft_checkpoint_export_safetensors(weft_checkpoint_t checkpoint, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_MESH_H */
