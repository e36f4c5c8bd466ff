//! Raw declarations of libweft's C ABI, one to one with `capi/include/weft/weft.h`.
//!
//! Hand-written (no bindgen): every type, constant and function of the header appears here
//! under its C name, in the header's order. C enums are `c_int` type aliases with constants,
//! so a value the library adds later can never be an invalid Rust enum.
//! `scripts/check-bindings` compares the functions (names and argument counts) with the
//! header. Everything here is `unsafe` to call; the `weft` crate is the safe interface.
//!
//! Linking (`links = "weft"`): the build script takes libweft from `$WEFT_LIB_DIR`, else from
//! pkg-config's `weft` (an installed weft: its Debian package, or `cmake --install` with
//! `PKG_CONFIG_PATH`), else from the weft checkout's `build/lib`; its panic lists what it tried.
#![no_std]
#![allow(non_camel_case_types)]
#![warn(missing_docs)]

use core::ffi::{c_char, c_int, c_void};

// ------------------------------------------------------------------ common.h, comm.h

mod common;
pub use common::*;

// ------------------------------------------------------------------ mesh.h

mod mesh;
pub use mesh::*;

// ------------------------------------------------------------------ training.h

mod training;
pub use training::*;

// ------------------------------------------------------------------ pipeline.h

mod pipeline;
pub use pipeline::*;

// ------------------------------------------------------------------ moe.h

mod moe;
pub use moe::*;

// ------------------------------------------------------------------ plugin.h

mod plugin;
pub use plugin::*;

// ------------------------------------------------------------------ plan.h

mod plan;
pub use plan::*;

extern "C" {
    /// Static English name and short explanation of a status; never NULL.
    pub fn weft_status_string(status: weft_status_t) -> *const c_char;
    /// Detailed message of the last failed weft call on this thread ("" if none).
    pub fn weft_last_error() -> *const c_char;
    /// Library version (WEFT_VERSION_CODE of the loaded library) and its ABI version.
    pub fn weft_version(version_code: *mut c_int, abi_version: *mut c_int) -> weft_status_t;

    /// Starts a rendezvous store in this process (listening on WEFT_MASTER_ADDR or all interfaces,
    /// port WEFT_UNIQUE_ID_PORT or any free one) and describes it in *id.
    pub fn weft_get_unique_id(id: *mut weft_unique_id_t) -> weft_status_t;
    /// Collective over `nranks` processes: creates a communicator from a unique id (all ranks pass
    /// the same id and distinct ranks).
    pub fn weft_comm_init(
        comm: *mut weft_comm_t,
        id: *const weft_unique_id_t,
        rank: c_int,
        nranks: c_int,
        config: *const weft_comm_config_t,
    ) -> weft_status_t;
    /// Reads rank, size and store address from the environment (weft's WEFT_RANK..., torchrun's,
    /// Open MPI's, PMI's or Slurm's variables; the first match wins) and creates the communicator.
    pub fn weft_comm_init_from_env(comm: *mut weft_comm_t, config: *const weft_comm_config_t) -> weft_status_t;
    /// Collective over `comm`: ranks passing the same color >= 0 form a new communicator, ordered
    /// by key.
    pub fn weft_comm_split(
        comm: weft_comm_t,
        color: c_int,
        key: c_int,
        newcomm: *mut weft_comm_t,
        config: *const weft_comm_config_t,
    ) -> weft_status_t;
    /// Collective over `comm`: a new communicator over the same ranks, with its own traffic.
    pub fn weft_comm_dup(comm: weft_comm_t, newcomm: *mut weft_comm_t) -> weft_status_t;
    /// After ranks of `comm` died (kill -9, a lost host), the survivors agree on who is gone and
    /// form a new communicator without them (like NCCL's ncclCommShrink and MPI ULFM's
    /// MPI_Comm_shrink).
    pub fn weft_comm_shrink(comm: weft_comm_t, newcomm: *mut weft_comm_t) -> weft_status_t;
    /// This rank's index in the communicator.
    pub fn weft_comm_rank(comm: weft_comm_t, rank: *mut c_int) -> weft_status_t;
    /// The number of ranks in the communicator.
    pub fn weft_comm_size(comm: weft_comm_t, size: *mut c_int) -> weft_status_t;
    /// Rank among the processes of this communicator on the same host.
    pub fn weft_comm_local_rank(comm: weft_comm_t, local_rank: *mut c_int) -> weft_status_t;
    /// How many processes of this communicator run on this host.
    pub fn weft_comm_local_size(comm: weft_comm_t, local_size: *mut c_int) -> weft_status_t;
    /// Aborts the communicator's pending and future operations (WEFT_ERR_ABORTED); callable from
    /// any thread at any time.
    pub fn weft_comm_abort(comm: weft_comm_t) -> weft_status_t;
    /// Waits for this rank's outstanding operations on comm (with the deadline), then frees it.
    pub fn weft_comm_destroy(comm: weft_comm_t) -> weft_status_t;

    /// Waits (with the communicator's deadline) for a request to complete and frees it.
    pub fn weft_wait(request: weft_request_t) -> weft_status_t;
    /// Polls a request: WEFT_OK when complete (sets *done=1), WEFT_IN_PROGRESS when not, or the
    /// operation's error.
    pub fn weft_test(request: weft_request_t, done: *mut c_int) -> weft_status_t;
    /// Frees a request; if still pending it is waited for first (with the deadline).
    pub fn weft_request_free(request: weft_request_t) -> weft_status_t;

    /// Reduces `count` elements with `op` across all ranks; every rank receives the result.
    pub fn weft_allreduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        op: weft_op_t,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Sends `count` elements of the root's buffer to every rank.
    pub fn weft_broadcast(
        buf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        root: c_int,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Recvbuf is used on root only (may be NULL elsewhere).
    pub fn weft_reduce(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        op: weft_op_t,
        root: c_int,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Recvbuf holds `nranks * sendcount` elements, rank i's block at `i * sendcount`.
    pub fn weft_allgather(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        sendcount: usize,
        dtype: weft_dtype_t,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Rank i contributes recvcounts\[i\] elements placed at displs\[i\] (elements) of recvbuf.
    /// sendcount must equal recvcounts\[rank\].
    pub fn weft_allgatherv(
        sendbuf: *const c_void,
        sendcount: usize,
        recvbuf: *mut c_void,
        recvcounts: *const usize,
        displs: *const usize,
        dtype: weft_dtype_t,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Sendbuf holds `nranks * recvcount` elements; rank i receives the reduction of block i.
    pub fn weft_reduce_scatter(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        recvcount: usize,
        dtype: weft_dtype_t,
        op: weft_op_t,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Block j (count elements) of sendbuf goes to rank j; block i of recvbuf comes from rank i.
    pub fn weft_alltoall(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Sendcounts\[j\] elements at sdispls\[j\] go to rank j; recvcounts\[i\] elements from rank i
    /// land at rdispls\[i\].
    pub fn weft_alltoallv(
        sendbuf: *const c_void,
        sendcounts: *const usize,
        sdispls: *const usize,
        recvbuf: *mut c_void,
        recvcounts: *const usize,
        rdispls: *const usize,
        dtype: weft_dtype_t,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Recvbuf (root only) holds `nranks * count` elements.
    pub fn weft_gather(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        root: c_int,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Sendbuf (root only) holds `nranks * count` elements.
    pub fn weft_scatter(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        root: c_int,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Returns once every rank of the communicator has entered the barrier.
    pub fn weft_barrier(comm: weft_comm_t, stream: *mut c_void, request: *mut weft_request_t) -> weft_status_t;
    /// Sends `count` elements to rank `peer` (matched in order with that rank's receive).
    pub fn weft_send(
        buf: *const c_void,
        count: usize,
        dtype: weft_dtype_t,
        peer: c_int,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Receives `count` elements from rank `peer` (matched in order with that rank's send).
    pub fn weft_recv(
        buf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        peer: c_int,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// Issues a group of sends and receives as one operation (one request for all).
    pub fn weft_p2p_batch(
        ops: *const weft_p2p_op_t,
        nops: usize,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;

    /// Size in bytes of one element of dtype (0 and WEFT_ERR_INVALID_ARGUMENT for a bad dtype).
    pub fn weft_dtype_size(dtype: weft_dtype_t, size: *mut usize) -> weft_status_t;

    // ---- mesh.h: meshes
    /// Collective over every rank of `comm` (members of the mesh or not).
    pub fn weft_mesh_create(
        comm: weft_comm_t,
        ndims: c_int,
        shape: *const c_int,
        dim_names: *const *const c_char,
        config: *const weft_mesh_config_t,
        mesh: *mut weft_mesh_t,
    ) -> weft_status_t;
    /// Frees the mesh and the communicators it made. Not collective.
    pub fn weft_mesh_destroy(mesh: weft_mesh_t) -> weft_status_t;
    /// Number of dims, and the size of each (shape needs room for ndims ints; either may be NULL).
    pub fn weft_mesh_shape(mesh: weft_mesh_t, ndims: *mut c_int, shape: *mut c_int) -> weft_status_t;
    /// The name of dim `dim` (owned by the mesh, valid until it is destroyed).
    pub fn weft_mesh_dim_name(mesh: weft_mesh_t, dim: c_int, name: *mut *const c_char) -> weft_status_t;
    /// The index of the dim called `name`; INVALID_ARGUMENT naming it when there is none.
    pub fn weft_mesh_dim_index(mesh: weft_mesh_t, name: *const c_char, dim: *mut c_int) -> weft_status_t;
    /// 1 when this rank is a member of the mesh, else 0.
    pub fn weft_mesh_is_member(mesh: weft_mesh_t, member: *mut c_int) -> weft_status_t;
    /// This rank's coordinates (ndims ints) and its position in mesh order (row-major).
    pub fn weft_mesh_coords(mesh: weft_mesh_t, coords: *mut c_int, mesh_rank: *mut c_int) -> weft_status_t;
    /// The rank, in the communicator the mesh was made from, of the member at mesh position
    /// mesh_rank (0 .. product(shape)-1).
    pub fn weft_mesh_parent_rank(mesh: weft_mesh_t, mesh_rank: c_int, parent_rank: *mut c_int) -> weft_status_t;
    /// The communicator over the mesh dims dims\[0..ndims) (members only): its ranks are the
    /// members that share this rank's coordinates on every other dim, ordered row-major over the
    /// chosen dims. dims must be distinct and increasing (INVALID_ARGUMENT otherwise).
    pub fn weft_mesh_comm(mesh: weft_mesh_t, dims: *const c_int, ndims: c_int, comm: *mut weft_comm_t)
        -> weft_status_t;

    // ---- mesh.h: layouts
    /// The local shape of one rank's shard for a global shape and layout, without data or
    /// communication.
    pub fn weft_mesh_local_shape(
        mesh: weft_mesh_t,
        placements: *const weft_placement_t,
        ndim: c_int,
        global_shape: *const i64,
        mesh_rank: c_int,
        local_shape: *mut i64,
        global_offset: *mut i64,
    ) -> weft_status_t;

    // ---- mesh.h: sharded tensors
    /// Makes a sharded-tensor handle over this rank's local piece (caller memory); not collective.
    pub fn weft_sharded_create(
        mesh: weft_mesh_t,
        ndim: c_int,
        global_shape: *const i64,
        dtype: weft_dtype_t,
        placements: *const weft_placement_t,
        local: *const weft_tensor_t,
        config: *const weft_sharded_config_t,
        tensor: *mut weft_sharded_t,
    ) -> weft_status_t;
    /// Frees a sharded-tensor handle (not the memory it points at); NULL is accepted.
    pub fn weft_sharded_destroy(tensor: weft_sharded_t) -> weft_status_t;
    /// The local view of a sharded tensor (shape and strides point into the handle).
    pub fn weft_sharded_local(tensor: weft_sharded_t, local: *mut weft_tensor_t) -> weft_status_t;
    /// Points the handle at other memory of the same local shape and dtype (e.g. next step's
    /// buffer).
    pub fn weft_sharded_set_local(tensor: weft_sharded_t, local: *const weft_tensor_t) -> weft_status_t;

    // ---- mesh.h: redistribution
    /// Collective over the members of src's mesh and dst's mesh (a rank in both takes part once).
    pub fn weft_redistribute(
        src: weft_sharded_t,
        dst: weft_sharded_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// The steps a redistribution from `src` to `dst` would take, without communication.
    pub fn weft_redistribute_plan(
        src: weft_sharded_t,
        dst: weft_sharded_t,
        steps: *mut weft_redistribute_step_t,
        capacity: usize,
        nsteps: *mut usize,
    ) -> weft_status_t;

    // ---- mesh.h: distributed checkpoints
    /// Collective over `comm`: writes the given sharded tensors as a distributed checkpoint under
    /// `dir`.
    pub fn weft_checkpoint_save(
        comm: weft_comm_t,
        dir: *const c_char,
        names: *const *const c_char,
        tensors: *const weft_sharded_t,
        count: usize,
        config: *const weft_checkpoint_config_t,
    ) -> weft_status_t;
    /// Reads tensors of a checkpoint into sharded tensors of any layout; not collective.
    pub fn weft_checkpoint_load(
        dir: *const c_char,
        names: *const *const c_char,
        tensors: *const weft_sharded_t,
        count: usize,
        config: *const weft_checkpoint_config_t,
    ) -> weft_status_t;
    /// Reads and verifies dir's index.
    pub fn weft_checkpoint_open(dir: *const c_char, checkpoint: *mut weft_checkpoint_t) -> weft_status_t;
    /// Frees a checkpoint opened with weft_checkpoint_open (NULL accepted).
    pub fn weft_checkpoint_close(checkpoint: weft_checkpoint_t) -> weft_status_t;
    /// Number of tensors in the checkpoint.
    pub fn weft_checkpoint_count(checkpoint: weft_checkpoint_t, count: *mut usize) -> weft_status_t;
    /// Name, dtype and global shape of the checkpoint's tensor i.
    pub fn weft_checkpoint_tensor(
        checkpoint: weft_checkpoint_t,
        i: usize,
        name: *mut *const c_char,
        dtype: *mut weft_dtype_t,
        ndim: *mut c_int,
        global_shape: *mut i64,
        nshards: *mut usize,
    ) -> weft_status_t;
    /// Reads every shard and checks its length and CRC-32C; the first failure names file and
    /// tensor.
    pub fn weft_checkpoint_verify(checkpoint: weft_checkpoint_t) -> weft_status_t;
    /// Writes the whole checkpoint as one safetensors file (8-byte header length, JSON header,
    /// data;).
    pub fn weft_checkpoint_export_safetensors(checkpoint: weft_checkpoint_t, path: *const c_char) -> weft_status_t;

    // ---- training.h: gradient bucketer
    /// Collective over comm: groups caller-kept gradients into buckets reduced as they become
    /// ready.
    pub fn weft_bucketer_create(
        comm: weft_comm_t,
        grads: *const weft_tensor_t,
        ngrads: usize,
        config: *const weft_bucketer_config_t,
        bucketer: *mut weft_bucketer_t,
    ) -> weft_status_t;
    /// Frees a bucketer (waiting for its outstanding reductions).
    pub fn weft_bucketer_destroy(bucketer: weft_bucketer_t) -> weft_status_t;
    /// The number of buckets the gradients were grouped into.
    pub fn weft_bucketer_num_buckets(bucketer: weft_bucketer_t, nbuckets: *mut usize) -> weft_status_t;
    /// The bucket of gradient `grad` and the element offset where it starts in that bucket.
    pub fn weft_bucketer_bucket_of(
        bucketer: weft_bucketer_t,
        grad: usize,
        bucket: *mut usize,
        offset: *mut usize,
    ) -> weft_status_t;
    /// Gradient `grad` holds its final value for this step. `data` is its address now (it must be
    /// the registered one: a framework that reallocates gradients between steps is told so, not
    /// silently reduced from stale memory).
    pub fn weft_bucketer_mark_ready(
        bucketer: weft_bucketer_t,
        grad: usize,
        data: *const c_void,
        stream: *mut c_void,
    ) -> weft_status_t;
    /// Waits for every bucket's reduction and writes the results: ALLREDUCE into the registered
    /// gradients.
    pub fn weft_bucketer_finish(bucketer: weft_bucketer_t, stream: *mut c_void) -> weft_status_t;
    /// REDUCE_SCATTER mode: this rank's shard of a bucket's reduced result.
    pub fn weft_bucketer_shard(
        bucketer: weft_bucketer_t,
        bucket: usize,
        shard: *mut weft_tensor_t,
        offset: *mut usize,
    ) -> weft_status_t;
    /// Wire_bytes counts, per collective this rank joined, the bytes of its whole operand in the
    /// wire format: an all-reduce of n bytes counts 2n (a reduce-scatter plus an all-gather, ZeRO's
    /// count), a reduce-scatter or an all-gather n, an all-to-all n.
    pub fn weft_bucketer_stats(bucketer: weft_bucketer_t, stats: *mut weft_bucketer_stats_t) -> weft_status_t;

    // ---- training.h: ZeRO
    /// Collective over the members of `mesh`: ZeRO over dim `dim`, owning parameters, gradients and
    /// optimizer state.
    pub fn weft_zero_create(
        mesh: weft_mesh_t,
        dp_dim: *const c_char,
        params: *const weft_tensor_t,
        nparams: usize,
        config: *const weft_zero_config_t,
        zero: *mut weft_zero_t,
    ) -> weft_status_t;
    /// Frees a ZeRO handle and the memory it owns.
    pub fn weft_zero_destroy(zero: weft_zero_t) -> weft_status_t;
    /// The number of parameter groups (the unit of stage-3 gathers).
    pub fn weft_zero_num_groups(zero: weft_zero_t, ngroups: *mut usize) -> weft_status_t;
    /// The group that holds parameter `param`.
    pub fn weft_zero_group_of(zero: weft_zero_t, param: usize, group: *mut usize) -> weft_status_t;
    /// The full value of parameter `param` in weft's memory (param_dtype, its shape): valid until
    /// the next step (stages 0-2) or, at stage 3, from the moment its group's gather completes
    /// until the group is released (otherwise WEFT_ERR_INVALID_ARGUMENT).
    pub fn weft_zero_param(zero: weft_zero_t, param: usize, view: *mut weft_tensor_t) -> weft_status_t;
    /// Stage 3: gathers group `group`'s full parameters (optionally asynchronously).
    pub fn weft_zero_gather(zero: weft_zero_t, group: usize, request: *mut weft_request_t) -> weft_status_t;
    /// Stage 3: frees group `group`'s gathered parameters.
    pub fn weft_zero_release(zero: weft_zero_t, group: usize) -> weft_status_t;
    /// Gradient of parameter `param` for this step (param_dtype, the parameter's shape, contiguous
    /// host memory; copied during the call, so the caller may reuse its memory at once).
    pub fn weft_zero_grad_ready(zero: weft_zero_t, param: usize, grad: *const weft_tensor_t) -> weft_status_t;
    /// Collective over the mesh's members: waits for the gradient reductions, unscales, agrees on
    /// skipping, clips, runs the optimizer on this rank's shard, and (stages 0-2) all-gathers the
    /// new parameters.
    pub fn weft_zero_step(zero: weft_zero_t, info: *mut weft_zero_step_info_t) -> weft_status_t;
    /// Bytes weft holds for this rank. With P parameters (padded as above), N data-parallel ranks,
    /// 2-byte parameters and K bytes of optimizer state per parameter (12 for mixed-precision Adam:
    /// master, m, v) params + grads + optimizer is ZeRO's (2+2+K)P at stage 0, 2P + 2P + KP/N at 1,
    /// 2P + (2+K)P/N at 2 and (2+2+K)P/N at 3 - the counts are of the allocations, not a formula.
    pub fn weft_zero_memory(zero: weft_zero_t, memory: *mut weft_zero_memory_t) -> weft_status_t;
    /// Collective over the mesh's members: writes the optimizer state (master weights, optimizer
    /// buffers, step count, loss scale) as a weft checkpoint in directory `path`.
    pub fn weft_zero_save(zero: weft_zero_t, path: *const c_char) -> weft_status_t;
    /// Collective over the mesh's members: reads the state `weft_zero_save` wrote in `path` into a
    /// handle with the same parameter shapes and optimizer, on any data-parallel size.
    pub fn weft_zero_load(zero: weft_zero_t, path: *const c_char) -> weft_status_t;

    // ---- training.h: tensor / sequence parallel regions, context-parallel ring
    #[allow(clippy::too_many_arguments)]
    /// Collective over this rank's group along mesh dim `dim`. backward = 0 runs the region's
    /// forward, 1 its backward. in and out are this rank's tensors (strided views allowed; out must
    /// not overlap in except in == out for the identity and all-reduce cases); their shapes must be
    /// what the operation makes (the whole extent or this rank's chunk along split_dim, the other
    /// dims equal) and their dtypes equal.
    pub fn weft_region_apply(
        mesh: weft_mesh_t,
        dim: *const c_char,
        region: weft_region_t,
        backward: c_int,
        split_dim: c_int,
        input: *const weft_tensor_t,
        output: *const weft_tensor_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    /// One step of a ring over mesh dim `dim` (context parallelism's key/value rotation): sends
    /// `send` to the rank `shift` places further along the dim (wrapping) and receives `recv` from
    /// the rank `shift` places before, as one weft_p2p_batch. send and recv are contiguous, must
    /// not overlap, and recv must be as large as what that rank sends.
    pub fn weft_ring_shift(
        mesh: weft_mesh_t,
        dim: *const c_char,
        shift: c_int,
        send: *const weft_tensor_t,
        recv: *const weft_tensor_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;

    // ---- pipeline.h: schedules
    /// Generates a schedule with its SEND/RECV actions (a RECV right before the compute that needs
    /// the data, a SEND right after the compute that made it; consecutive SEND/RECV actions form
    /// one exchange, see the executor).
    pub fn weft_schedule_generate(
        kind: weft_schedule_kind_t,
        config: *const weft_schedule_config_t,
        schedule: *mut weft_schedule_t,
    ) -> weft_status_t;
    /// A schedule from caller-given action lists: actions\[r\]\[0..counts\[r\]) for rank r of
    /// nranks.
    pub fn weft_schedule_create(
        nranks: c_int,
        actions: *const *const weft_action_t,
        counts: *const usize,
        schedule: *mut weft_schedule_t,
    ) -> weft_status_t;
    /// Frees a schedule (NULL accepted).
    pub fn weft_schedule_destroy(schedule: weft_schedule_t) -> weft_status_t;
    /// The schedule's kind, ranks, stages, micro-batches and action counts.
    pub fn weft_schedule_info(schedule: weft_schedule_t, info: *mut weft_schedule_info_t) -> weft_status_t;
    /// Rank `rank`'s actions in order: a view of the schedule's memory, valid until it is
    /// destroyed.
    pub fn weft_schedule_actions(
        schedule: weft_schedule_t,
        rank: c_int,
        actions: *mut *const weft_action_t,
        count: *mut usize,
    ) -> weft_status_t;
    /// The rank that holds `stage` (-1 when no rank runs its forward).
    pub fn weft_schedule_stage_rank(schedule: weft_schedule_t, stage: c_int, rank: *mut c_int) -> weft_status_t;
    /// WEFT_OK, or WEFT_ERR_INVALID_ARGUMENT with weft_last_error() naming the rank, the action
    /// index, the action (torch's string) and the rule broken.
    pub fn weft_schedule_validate(schedule: weft_schedule_t) -> weft_status_t;
    /// Writes the schedule as torch's CSV into a caller buffer.
    pub fn weft_schedule_to_csv(
        schedule: weft_schedule_t,
        format: weft_csv_format_t,
        text: *mut c_char,
        capacity: usize,
        length: *mut usize,
    ) -> weft_status_t;
    /// Parses torch's CSV (either form; empty cells and "None" are idle steps and skipped; "\n" or
    /// "\r\n" rows), then as weft_schedule_create.
    pub fn weft_schedule_from_csv(text: *const c_char, length: usize, schedule: *mut weft_schedule_t) -> weft_status_t;
    /// Writes a schedule as a FlatBuffers file (core/schema/schedule.fbs).
    pub fn weft_schedule_save(schedule: weft_schedule_t, path: *const c_char) -> weft_status_t;
    /// Reads a schedule from a FlatBuffers file written by weft_schedule_save.
    pub fn weft_schedule_load(path: *const c_char, schedule: *mut weft_schedule_t) -> weft_status_t;

    // ---- pipeline.h: timelines
    /// A simulated timeline's makespan, bubble fraction and totals.
    pub fn weft_timeline_info(timeline: weft_timeline_t, info: *mut weft_timeline_info_t) -> weft_status_t;
    /// Rank `rank`'s times, one per action of the schedule's list for that rank (views valid until
    /// the timeline is destroyed); stats may be NULL.
    pub fn weft_timeline_rank(
        timeline: weft_timeline_t,
        rank: c_int,
        start: *mut *const f64,
        end: *mut *const f64,
        count: *mut usize,
        stats: *mut weft_rank_stats_t,
    ) -> weft_status_t;
    /// Writes a timeline as SVG or a Chrome trace to a file.
    pub fn weft_timeline_write(
        timeline: weft_timeline_t,
        format: weft_timeline_format_t,
        path: *const c_char,
    ) -> weft_status_t;
    /// Frees a timeline (NULL accepted).
    pub fn weft_timeline_destroy(timeline: weft_timeline_t) -> weft_status_t;

    // ---- pipeline.h: simulation and tuning
    /// Simulates a valid schedule (it is validated first).
    pub fn weft_schedule_simulate(
        schedule: weft_schedule_t,
        costs: *const weft_pipeline_costs_t,
        timeline: *mut weft_timeline_t,
    ) -> weft_status_t;
    /// Simulates every allowed (kind, m, v) and returns the candidates sorted by step time (those
    /// that fit first): candidates\[0..min(capacity, *count)), *count = how many there are
    /// (candidates = NULL asks for the count).
    pub fn weft_schedule_tune(
        config: *const weft_tune_config_t,
        candidates: *mut weft_tune_candidate_t,
        capacity: usize,
        count: *mut usize,
        best: *mut c_int,
    ) -> weft_status_t;

    // ---- pipeline.h: the executor
    /// Collective over comm: an executor running a schedule with the caller's stage callbacks.
    pub fn weft_pipeline_create(
        comm: weft_comm_t,
        schedule: weft_schedule_t,
        config: *const weft_pipeline_config_t,
        pipeline: *mut weft_pipeline_t,
    ) -> weft_status_t;
    /// Runs one step of the schedule (collective over the pipeline's communicator).
    pub fn weft_pipeline_run(pipeline: weft_pipeline_t, record: *mut weft_timeline_t) -> weft_status_t;
    /// Frees a pipeline executor (NULL accepted).
    pub fn weft_pipeline_destroy(pipeline: weft_pipeline_t) -> weft_status_t;
    /// Sets the error text a failing stage callback written in another language reports.
    pub fn weft_pipeline_set_error(message: *const c_char) -> weft_status_t;

    // ---- moe.h: router
    /// The MoE router's forward: top-k experts and weights per token from logits, with auxiliary
    /// losses.
    pub fn weft_router_forward(
        logits: *const weft_tensor_t,
        config: *const weft_router_config_t,
        result: *mut weft_router_result_t,
        stream: *mut c_void,
    ) -> weft_status_t;
    /// The router's backward: the gradient with respect to the logits (the selection held fixed) of
    /// `L = sum_{t,j} grad_weights[t*k+j] * weights[t*k+j] + grad_aux * aux_loss + grad_z * z_loss`.
    pub fn weft_router_backward(
        logits: *const weft_tensor_t,
        config: *const weft_router_config_t,
        indices: *const i32,
        grad_weights: *const f32,
        grad_aux: f32,
        grad_z: f32,
        grad_logits: *const weft_tensor_t,
        stream: *mut c_void,
    ) -> weft_status_t;
    /// Auxiliary-loss-free balancing (DeepSeek-V3): bias\[e\] += rate * sign(mean - load\[e\]) with
    /// load = tokens_per_expert (host arrays of E entries) and mean its average; sign(0) = 0.
    pub fn weft_router_update_bias(bias: *mut f32, tokens_per_expert: *const i64, experts: c_int, rate: f32)
        -> weft_status_t;

    // ---- moe.h: layout
    /// DeepEP's get_dispatch_layout, host memory: from indices \[T, k\] (WEFT_MOE_DROPPED allowed)
    /// and the placement of experts on ranks, counts the tokens per rank and per expert.
    pub fn weft_moe_layout(
        indices: *const i32,
        tokens: usize,
        topk: c_int,
        experts: c_int,
        nranks: c_int,
        expert_rank: *const i32,
        tokens_per_rank: *mut i64,
        tokens_per_expert: *mut i64,
        token_in_rank: *mut u8,
    ) -> weft_status_t;

    // ---- moe.h: dispatch and combine
    /// Collective over comm: expert-parallel dispatch/combine state.
    pub fn weft_moe_create(comm: weft_comm_t, config: *const weft_moe_config_t, moe: *mut weft_moe_t) -> weft_status_t;
    /// Frees a MoE handle (NULL accepted).
    pub fn weft_moe_destroy(moe: weft_moe_t) -> weft_status_t;
    /// Collective: sends each token's rows to the ranks of its experts, returning a handle for
    /// combine.
    pub fn weft_moe_dispatch(
        moe: weft_moe_t,
        x: *const weft_tensor_t,
        indices: *const i32,
        weights: *const f32,
        tokens: usize,
        topk: c_int,
        stream: *mut c_void,
        handle: *mut weft_moe_handle_t,
    ) -> weft_status_t;
    /// Frees a dispatch handle (NULL accepted).
    pub fn weft_moe_handle_destroy(handle: weft_moe_handle_t) -> weft_status_t;
    /// The rows this rank received in a dispatch, with their source tokens and counts.
    pub fn weft_moe_handle_received(handle: weft_moe_handle_t, received: *mut weft_moe_received_t) -> weft_status_t;
    /// Collective: sends the experts' outputs back to their tokens' ranks and sums them (weighted).
    pub fn weft_moe_combine(
        moe: weft_moe_t,
        handle: weft_moe_handle_t,
        expert_out: *const weft_tensor_t,
        weighted: c_int,
        out: *const weft_tensor_t,
        stream: *mut c_void,
    ) -> weft_status_t;
    /// The backward of a weighted combine, collective: from grad_out \[T, H\] (dtype) gives
    /// grad_expert_out \[rows, H\] (caller memory, the received layout) and the weights' gradient.
    pub fn weft_moe_combine_backward(
        moe: weft_moe_t,
        handle: weft_moe_handle_t,
        grad_out: *const weft_tensor_t,
        grad_expert_out: *const weft_tensor_t,
        grad_weights: *mut f32,
        stream: *mut c_void,
    ) -> weft_status_t;

    // ---- plugin.h
    /// Loads the shared library at path (dlopen, RTLD_NOW | RTLD_LOCAL), verifies its manifest and
    /// registers its extensions (all or nothing).
    pub fn weft_plugin_load(path: *const c_char, plugin: *mut weft_plugin_t) -> weft_status_t;
    /// Releases the handle (NULL accepted); the library and its extensions stay (see Lifetime).
    pub fn weft_plugin_destroy(plugin: weft_plugin_t) -> weft_status_t;
    /// A loaded plugin's name, version and number of entries.
    pub fn weft_plugin_info(plugin: weft_plugin_t, info: *mut weft_plugin_info_t) -> weft_status_t;
    /// Entry index (0 <= index < nentries), in manifest order.
    pub fn weft_plugin_entry(plugin: weft_plugin_t, index: usize, entry: *mut weft_plugin_entry_t) -> weft_status_t;
    /// The entry named name (WEFT_ERR_INVALID_ARGUMENT naming the plugin's entries when none is).
    pub fn weft_plugin_lookup(
        plugin: weft_plugin_t,
        name: *const c_char,
        entry: *mut weft_plugin_entry_t,
    ) -> weft_status_t;
    /// Calls entry (any kind) with args\[0..nargs) through libffi (the call interface is prepared
    /// once, at load).
    pub fn weft_plugin_call(
        plugin: weft_plugin_t,
        entry: *const c_char,
        args: *const weft_value_t,
        nargs: usize,
        result: *mut weft_value_t,
    ) -> weft_status_t;
    /// Makes a C function with the given signature (libffi closure) that calls handler(args...,
    /// user_data): *function is its address, to pass as an FN argument to a plugin (or anywhere a C
    /// function pointer of that signature is wanted).
    pub fn weft_closure_create(
        ret: weft_value_type_t,
        args: *const weft_value_type_t,
        nargs: usize,
        handler: weft_closure_fn,
        user_data: *mut c_void,
        closure: *mut weft_closure_t,
        function: *mut *mut c_void,
    ) -> weft_status_t;
    /// How many calls of the closure's function failed (handler status not OK) since creation, and
    /// the message of the last failure (valid until the next call of the closure's function or
    /// destroy).
    pub fn weft_closure_error(
        closure: weft_closure_t,
        failures: *mut u64,
        message: *mut *const c_char,
    ) -> weft_status_t;
    /// Frees a closure and its C function (NULL accepted).
    pub fn weft_closure_destroy(closure: weft_closure_t) -> weft_status_t;
    /// Registers an operator and returns its weft_op_t (WEFT_PLUGIN_ID_BASE and up): usable in
    /// weft_allreduce, weft_reduce and weft_reduce_scatter (and their async forms) on host memory,
    /// and on device memory where the device path stages through host memory (not over NCCL:
    /// WEFT_ERR_UNSUPPORTED).
    pub fn weft_op_create(config: *const weft_op_config_t, op: *mut weft_op_t) -> weft_status_t;
    /// Unregisters a user reduction operator (a later collective with it fails).
    pub fn weft_op_destroy(op: weft_op_t) -> weft_status_t;

    // ---- plan.h: the planner (plan.h states the cost model and the file formats)
    /// Ranks the layouts (or predicts `config.layout` alone).
    pub fn weft_plan_create(config: *const weft_plan_config_t, plan: *mut weft_plan_t) -> weft_status_t;
    /// As weft_plan_create with the model and the cluster read from text files; config may be NULL.
    pub fn weft_plan_load(
        model_path: *const c_char,
        cluster_path: *const c_char,
        config: *const weft_plan_config_t,
        plan: *mut weft_plan_t,
    ) -> weft_status_t;
    /// Frees a plan (NULL accepted).
    pub fn weft_plan_destroy(plan: weft_plan_t) -> weft_status_t;
    /// Ranks, batch, layouts kept, searched and feasible.
    pub fn weft_plan_info(plan: weft_plan_t, info: *mut weft_plan_info_t) -> weft_status_t;
    /// The index-th kept layout, best first.
    pub fn weft_plan_layout(plan: weft_plan_t, index: usize, layout: *mut weft_plan_layout_t) -> weft_status_t;
    /// The Amdahl/Gustafson summary and the strong and weak scaling curve (points = NULL asks
    /// for the count).
    pub fn weft_plan_scaling(
        plan: weft_plan_t,
        summary: *mut weft_plan_scaling_t,
        points: *mut weft_plan_scaling_point_t,
        capacity: usize,
        count: *mut usize,
    ) -> weft_status_t;
    /// The plan as text (a table, the report or JSON); text = NULL asks for the length.
    pub fn weft_plan_format(
        plan: weft_plan_t,
        what: weft_plan_format_kind_t,
        text: *mut c_char,
        capacity: usize,
        length: *mut usize,
    ) -> weft_status_t;
}

#[cfg(test)]
mod tests;
