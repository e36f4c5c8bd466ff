//! Raw declarations of libweft's C ABI, one to one with `capi/include/weft/weft.h`.
//!
//! Hand-written (no bindgen): every type, constant and function of the header appears here
//! under its C name, in the header's order. C enums are `c_int` type aliases with constants,
//! so a value the library adds later can never be an invalid Rust enum.
//! `scripts/check-bindings` compares the functions (names and argument counts) with the
//! header. Everything here is `unsafe` to call; the `weft` crate is the safe interface.
#![no_std]
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_void};

pub const WEFT_VERSION_MAJOR: c_int = 0;
pub const WEFT_VERSION_MINOR: c_int = 1;
pub const WEFT_VERSION_PATCH: c_int = 0;
pub const WEFT_VERSION_CODE: c_int = WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH;
/// Bumped on every incompatible ABI change; compare with `weft_version`'s `abi_version`.
pub const WEFT_ABI_VERSION: c_int = 1;

/// `enum weft_status`.
pub type weft_status_t = c_int;
pub const WEFT_OK: weft_status_t = 0;
pub const WEFT_ERR_INVALID_ARGUMENT: weft_status_t = 1;
pub const WEFT_ERR_UNSUPPORTED: weft_status_t = 2;
pub const WEFT_ERR_OUT_OF_MEMORY: weft_status_t = 3;
pub const WEFT_ERR_TIMEOUT: weft_status_t = 4;
pub const WEFT_ERR_REMOTE: weft_status_t = 5;
pub const WEFT_ERR_ABORTED: weft_status_t = 6;
pub const WEFT_ERR_MISMATCH: weft_status_t = 7;
pub const WEFT_ERR_TRANSPORT: weft_status_t = 8;
pub const WEFT_ERR_INTERNAL: weft_status_t = 9;
pub const WEFT_IN_PROGRESS: weft_status_t = 10;

/// `enum weft_dtype`.
pub type weft_dtype_t = c_int;
pub const WEFT_FLOAT64: weft_dtype_t = 0;
pub const WEFT_FLOAT32: weft_dtype_t = 1;
pub const WEFT_FLOAT16: weft_dtype_t = 2;
pub const WEFT_BFLOAT16: weft_dtype_t = 3;
pub const WEFT_FP8_E4M3: weft_dtype_t = 4;
pub const WEFT_FP8_E5M2: weft_dtype_t = 5;
pub const WEFT_INT8: weft_dtype_t = 6;
pub const WEFT_UINT8: weft_dtype_t = 7;
pub const WEFT_INT32: weft_dtype_t = 8;
pub const WEFT_UINT32: weft_dtype_t = 9;
pub const WEFT_INT64: weft_dtype_t = 10;
pub const WEFT_UINT64: weft_dtype_t = 11;
pub const WEFT_NUM_DTYPES: weft_dtype_t = 12;

/// `enum weft_op`.
pub type weft_op_t = c_int;
pub const WEFT_SUM: weft_op_t = 0;
pub const WEFT_PROD: weft_op_t = 1;
pub const WEFT_MIN: weft_op_t = 2;
pub const WEFT_MAX: weft_op_t = 3;
pub const WEFT_AVG: weft_op_t = 4;
pub const WEFT_NUM_OPS: weft_op_t = 5;

/// Opaque `struct weft_comm`.
#[repr(C)]
pub struct weft_comm {
    _private: [u8; 0],
}
/// Opaque `struct weft_request`.
#[repr(C)]
pub struct weft_request {
    _private: [u8; 0],
}
pub type weft_comm_t = *mut weft_comm;
pub type weft_request_t = *mut weft_request;

/// `enum weft_transport`.
pub type weft_transport_t = c_int;
pub const WEFT_TRANSPORT_AUTO: weft_transport_t = 0;
pub const WEFT_TRANSPORT_UCX: weft_transport_t = 1;

/// `weft_comm_config_t`; start from [`WEFT_COMM_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_comm_config_t {
    pub struct_size: usize,
    pub timeout_ms: i64,
    pub transport: weft_transport_t,
    pub name: *const c_char,
    pub check_collectives: c_int,
}

/// `WEFT_COMM_CONFIG_INIT`.
pub const WEFT_COMM_CONFIG_INIT: weft_comm_config_t = weft_comm_config_t {
    struct_size: core::mem::size_of::<weft_comm_config_t>(),
    timeout_ms: 0,
    transport: WEFT_TRANSPORT_AUTO,
    name: core::ptr::null(),
    check_collectives: 0,
};

pub const WEFT_UNIQUE_ID_BYTES: usize = 128;
/// `weft_unique_id_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct weft_unique_id_t {
    pub internal: [c_char; WEFT_UNIQUE_ID_BYTES],
}

pub const WEFT_SPLIT_NOCOLOR: c_int = -1;

/// `enum weft_p2p_kind`.
pub type weft_p2p_kind_t = c_int;
pub const WEFT_P2P_SEND: weft_p2p_kind_t = 0;
pub const WEFT_P2P_RECV: weft_p2p_kind_t = 1;

/// `weft_p2p_op_t`: one operation of `weft_p2p_batch` (an array element: no struct_size).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_p2p_op_t {
    pub kind: weft_p2p_kind_t,
    pub buf: *mut c_void,
    pub count: usize,
    pub dtype: weft_dtype_t,
    pub peer: c_int,
}

// ------------------------------------------------------------------ common.h: tensor views

pub const WEFT_TENSOR_MAX_DIMS: usize = 8;

/// `enum weft_device_type` (DLPack's DLDeviceType codes).
pub type weft_device_type_t = c_int;
pub const WEFT_DEVICE_CPU: weft_device_type_t = 1;
pub const WEFT_DEVICE_CUDA: weft_device_type_t = 2;
pub const WEFT_DEVICE_CUDA_HOST: weft_device_type_t = 3;

/// `weft_tensor_t`: a view of caller-owned memory, field for field DLPack's `DLTensor`.
/// Strides are in elements; `strides` null means contiguous row-major.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_tensor_t {
    pub data: *mut c_void,
    pub device_type: weft_device_type_t,
    pub device_id: c_int,
    pub ndim: c_int,
    pub dtype: weft_dtype_t,
    pub shape: *const i64,
    pub strides: *const i64,
    pub byte_offset: u64,
}

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

extern "C" {
    pub fn weft_status_string(status: weft_status_t) -> *const c_char;
    pub fn weft_last_error() -> *const c_char;
    pub fn weft_version(version_code: *mut c_int, abi_version: *mut c_int) -> weft_status_t;

    pub fn weft_get_unique_id(id: *mut weft_unique_id_t) -> weft_status_t;
    pub fn weft_comm_init(
        comm: *mut weft_comm_t,
        id: *const weft_unique_id_t,
        rank: c_int,
        nranks: c_int,
        config: *const weft_comm_config_t,
    ) -> weft_status_t;
    pub fn weft_comm_init_from_env(comm: *mut weft_comm_t, config: *const weft_comm_config_t) -> weft_status_t;
    pub fn weft_comm_split(
        comm: weft_comm_t,
        color: c_int,
        key: c_int,
        newcomm: *mut weft_comm_t,
        config: *const weft_comm_config_t,
    ) -> weft_status_t;
    pub fn weft_comm_dup(comm: weft_comm_t, newcomm: *mut weft_comm_t) -> weft_status_t;
    pub fn weft_comm_rank(comm: weft_comm_t, rank: *mut c_int) -> weft_status_t;
    pub fn weft_comm_size(comm: weft_comm_t, size: *mut c_int) -> weft_status_t;
    pub fn weft_comm_local_rank(comm: weft_comm_t, local_rank: *mut c_int) -> weft_status_t;
    pub fn weft_comm_local_size(comm: weft_comm_t, local_size: *mut c_int) -> weft_status_t;
    pub fn weft_comm_abort(comm: weft_comm_t) -> weft_status_t;
    pub fn weft_comm_destroy(comm: weft_comm_t) -> weft_status_t;

    pub fn weft_wait(request: weft_request_t) -> weft_status_t;
    pub fn weft_test(request: weft_request_t, done: *mut c_int) -> weft_status_t;
    pub fn weft_request_free(request: weft_request_t) -> weft_status_t;

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
    pub fn weft_broadcast(
        buf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        root: c_int,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
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
    pub fn weft_allgather(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        sendcount: usize,
        dtype: weft_dtype_t,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
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
    pub fn weft_alltoall(
        sendbuf: *const c_void,
        recvbuf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
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
    pub fn weft_barrier(comm: weft_comm_t, stream: *mut c_void, request: *mut weft_request_t) -> weft_status_t;
    pub fn weft_send(
        buf: *const c_void,
        count: usize,
        dtype: weft_dtype_t,
        peer: c_int,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    pub fn weft_recv(
        buf: *mut c_void,
        count: usize,
        dtype: weft_dtype_t,
        peer: c_int,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    pub fn weft_p2p_batch(
        ops: *const weft_p2p_op_t,
        nops: usize,
        comm: weft_comm_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;

    pub fn weft_dtype_size(dtype: weft_dtype_t, size: *mut usize) -> weft_status_t;

    // ---- mesh.h: meshes
    pub fn weft_mesh_create(
        comm: weft_comm_t,
        ndims: c_int,
        shape: *const c_int,
        dim_names: *const *const c_char,
        config: *const weft_mesh_config_t,
        mesh: *mut weft_mesh_t,
    ) -> weft_status_t;
    pub fn weft_mesh_destroy(mesh: weft_mesh_t) -> weft_status_t;
    pub fn weft_mesh_shape(mesh: weft_mesh_t, ndims: *mut c_int, shape: *mut c_int) -> weft_status_t;
    pub fn weft_mesh_dim_name(mesh: weft_mesh_t, dim: c_int, name: *mut *const c_char) -> weft_status_t;
    pub fn weft_mesh_dim_index(mesh: weft_mesh_t, name: *const c_char, dim: *mut c_int) -> weft_status_t;
    pub fn weft_mesh_is_member(mesh: weft_mesh_t, member: *mut c_int) -> weft_status_t;
    pub fn weft_mesh_coords(mesh: weft_mesh_t, coords: *mut c_int, mesh_rank: *mut c_int) -> weft_status_t;
    pub fn weft_mesh_parent_rank(mesh: weft_mesh_t, mesh_rank: c_int, parent_rank: *mut c_int) -> weft_status_t;
    pub fn weft_mesh_comm(mesh: weft_mesh_t, dims: *const c_int, ndims: c_int, comm: *mut weft_comm_t)
        -> weft_status_t;

    // ---- mesh.h: layouts
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
    pub fn weft_sharded_destroy(tensor: weft_sharded_t) -> weft_status_t;
    pub fn weft_sharded_local(tensor: weft_sharded_t, local: *mut weft_tensor_t) -> weft_status_t;
    pub fn weft_sharded_set_local(tensor: weft_sharded_t, local: *const weft_tensor_t) -> weft_status_t;

    // ---- mesh.h: redistribution
    pub fn weft_redistribute(
        src: weft_sharded_t,
        dst: weft_sharded_t,
        stream: *mut c_void,
        request: *mut weft_request_t,
    ) -> weft_status_t;
    pub fn weft_redistribute_plan(
        src: weft_sharded_t,
        dst: weft_sharded_t,
        steps: *mut weft_redistribute_step_t,
        capacity: usize,
        nsteps: *mut usize,
    ) -> weft_status_t;

    // ---- mesh.h: distributed checkpoints
    pub fn weft_checkpoint_save(
        comm: weft_comm_t,
        dir: *const c_char,
        names: *const *const c_char,
        tensors: *const weft_sharded_t,
        count: usize,
        config: *const weft_checkpoint_config_t,
    ) -> weft_status_t;
    pub fn weft_checkpoint_load(
        dir: *const c_char,
        names: *const *const c_char,
        tensors: *const weft_sharded_t,
        count: usize,
        config: *const weft_checkpoint_config_t,
    ) -> weft_status_t;
    pub fn weft_checkpoint_open(dir: *const c_char, checkpoint: *mut weft_checkpoint_t) -> weft_status_t;
    pub fn weft_checkpoint_close(checkpoint: weft_checkpoint_t) -> weft_status_t;
    pub fn weft_checkpoint_count(checkpoint: weft_checkpoint_t, count: *mut usize) -> weft_status_t;
    pub fn weft_checkpoint_tensor(
        checkpoint: weft_checkpoint_t,
        i: usize,
        name: *mut *const c_char,
        dtype: *mut weft_dtype_t,
        ndim: *mut c_int,
        global_shape: *mut i64,
        nshards: *mut usize,
    ) -> weft_status_t;
    pub fn weft_checkpoint_verify(checkpoint: weft_checkpoint_t) -> weft_status_t;
    pub fn weft_checkpoint_export_safetensors(checkpoint: weft_checkpoint_t, path: *const c_char) -> weft_status_t;

    // ---- training.h: gradient bucketer
    pub fn weft_bucketer_create(
        comm: weft_comm_t,
        grads: *const weft_tensor_t,
        ngrads: usize,
        config: *const weft_bucketer_config_t,
        bucketer: *mut weft_bucketer_t,
    ) -> weft_status_t;
    pub fn weft_bucketer_destroy(bucketer: weft_bucketer_t) -> weft_status_t;
    pub fn weft_bucketer_num_buckets(bucketer: weft_bucketer_t, nbuckets: *mut usize) -> weft_status_t;
    pub fn weft_bucketer_bucket_of(
        bucketer: weft_bucketer_t,
        grad: usize,
        bucket: *mut usize,
        offset: *mut usize,
    ) -> weft_status_t;
    pub fn weft_bucketer_mark_ready(
        bucketer: weft_bucketer_t,
        grad: usize,
        data: *const c_void,
        stream: *mut c_void,
    ) -> weft_status_t;
    pub fn weft_bucketer_finish(bucketer: weft_bucketer_t, stream: *mut c_void) -> weft_status_t;
    pub fn weft_bucketer_shard(
        bucketer: weft_bucketer_t,
        bucket: usize,
        shard: *mut weft_tensor_t,
        offset: *mut usize,
    ) -> weft_status_t;
    pub fn weft_bucketer_stats(bucketer: weft_bucketer_t, stats: *mut weft_bucketer_stats_t) -> weft_status_t;

    // ---- training.h: ZeRO
    pub fn weft_zero_create(
        mesh: weft_mesh_t,
        dp_dim: *const c_char,
        params: *const weft_tensor_t,
        nparams: usize,
        config: *const weft_zero_config_t,
        zero: *mut weft_zero_t,
    ) -> weft_status_t;
    pub fn weft_zero_destroy(zero: weft_zero_t) -> weft_status_t;
    pub fn weft_zero_num_groups(zero: weft_zero_t, ngroups: *mut usize) -> weft_status_t;
    pub fn weft_zero_group_of(zero: weft_zero_t, param: usize, group: *mut usize) -> weft_status_t;
    pub fn weft_zero_param(zero: weft_zero_t, param: usize, view: *mut weft_tensor_t) -> weft_status_t;
    pub fn weft_zero_gather(zero: weft_zero_t, group: usize, request: *mut weft_request_t) -> weft_status_t;
    pub fn weft_zero_release(zero: weft_zero_t, group: usize) -> weft_status_t;
    pub fn weft_zero_grad_ready(zero: weft_zero_t, param: usize, grad: *const weft_tensor_t) -> weft_status_t;
    pub fn weft_zero_step(zero: weft_zero_t, info: *mut weft_zero_step_info_t) -> weft_status_t;
    pub fn weft_zero_memory(zero: weft_zero_t, memory: *mut weft_zero_memory_t) -> weft_status_t;
    pub fn weft_zero_save(zero: weft_zero_t, path: *const c_char) -> weft_status_t;
    pub fn weft_zero_load(zero: weft_zero_t, path: *const c_char) -> weft_status_t;

    // ---- training.h: tensor / sequence parallel regions, context-parallel ring
    #[allow(clippy::too_many_arguments)]
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
    pub fn weft_schedule_generate(
        kind: weft_schedule_kind_t,
        config: *const weft_schedule_config_t,
        schedule: *mut weft_schedule_t,
    ) -> weft_status_t;
    pub fn weft_schedule_create(
        nranks: c_int,
        actions: *const *const weft_action_t,
        counts: *const usize,
        schedule: *mut weft_schedule_t,
    ) -> weft_status_t;
    pub fn weft_schedule_destroy(schedule: weft_schedule_t) -> weft_status_t;
    pub fn weft_schedule_info(schedule: weft_schedule_t, info: *mut weft_schedule_info_t) -> weft_status_t;
    pub fn weft_schedule_actions(
        schedule: weft_schedule_t,
        rank: c_int,
        actions: *mut *const weft_action_t,
        count: *mut usize,
    ) -> weft_status_t;
    pub fn weft_schedule_stage_rank(schedule: weft_schedule_t, stage: c_int, rank: *mut c_int) -> weft_status_t;
    pub fn weft_schedule_validate(schedule: weft_schedule_t) -> weft_status_t;
    pub fn weft_schedule_to_csv(
        schedule: weft_schedule_t,
        format: weft_csv_format_t,
        text: *mut c_char,
        capacity: usize,
        length: *mut usize,
    ) -> weft_status_t;
    pub fn weft_schedule_from_csv(text: *const c_char, length: usize, schedule: *mut weft_schedule_t) -> weft_status_t;
    pub fn weft_schedule_save(schedule: weft_schedule_t, path: *const c_char) -> weft_status_t;
    pub fn weft_schedule_load(path: *const c_char, schedule: *mut weft_schedule_t) -> weft_status_t;

    // ---- pipeline.h: timelines
    pub fn weft_timeline_info(timeline: weft_timeline_t, info: *mut weft_timeline_info_t) -> weft_status_t;
    pub fn weft_timeline_rank(
        timeline: weft_timeline_t,
        rank: c_int,
        start: *mut *const f64,
        end: *mut *const f64,
        count: *mut usize,
        stats: *mut weft_rank_stats_t,
    ) -> weft_status_t;
    pub fn weft_timeline_write(
        timeline: weft_timeline_t,
        format: weft_timeline_format_t,
        path: *const c_char,
    ) -> weft_status_t;
    pub fn weft_timeline_destroy(timeline: weft_timeline_t) -> weft_status_t;

    // ---- pipeline.h: simulation and tuning
    pub fn weft_schedule_simulate(
        schedule: weft_schedule_t,
        costs: *const weft_pipeline_costs_t,
        timeline: *mut weft_timeline_t,
    ) -> weft_status_t;
    pub fn weft_schedule_tune(
        config: *const weft_tune_config_t,
        candidates: *mut weft_tune_candidate_t,
        capacity: usize,
        count: *mut usize,
        best: *mut c_int,
    ) -> weft_status_t;

    // ---- pipeline.h: the executor
    pub fn weft_pipeline_create(
        comm: weft_comm_t,
        schedule: weft_schedule_t,
        config: *const weft_pipeline_config_t,
        pipeline: *mut weft_pipeline_t,
    ) -> weft_status_t;
    pub fn weft_pipeline_run(pipeline: weft_pipeline_t, record: *mut weft_timeline_t) -> weft_status_t;
    pub fn weft_pipeline_destroy(pipeline: weft_pipeline_t) -> weft_status_t;
    pub fn weft_pipeline_set_error(message: *const c_char) -> weft_status_t;

    // ---- moe.h: router
    pub fn weft_router_forward(
        logits: *const weft_tensor_t,
        config: *const weft_router_config_t,
        result: *mut weft_router_result_t,
        stream: *mut c_void,
    ) -> weft_status_t;
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
    pub fn weft_router_update_bias(bias: *mut f32, tokens_per_expert: *const i64, experts: c_int, rate: f32)
        -> weft_status_t;

    // ---- moe.h: layout
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
    pub fn weft_moe_create(comm: weft_comm_t, config: *const weft_moe_config_t, moe: *mut weft_moe_t) -> weft_status_t;
    pub fn weft_moe_destroy(moe: weft_moe_t) -> weft_status_t;
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
    pub fn weft_moe_handle_destroy(handle: weft_moe_handle_t) -> weft_status_t;
    pub fn weft_moe_handle_received(handle: weft_moe_handle_t, received: *mut weft_moe_received_t) -> weft_status_t;
    pub fn weft_moe_combine(
        moe: weft_moe_t,
        handle: weft_moe_handle_t,
        expert_out: *const weft_tensor_t,
        weighted: c_int,
        out: *const weft_tensor_t,
        stream: *mut c_void,
    ) -> weft_status_t;
    pub fn weft_moe_combine_backward(
        moe: weft_moe_t,
        handle: weft_moe_handle_t,
        grad_out: *const weft_tensor_t,
        grad_expert_out: *const weft_tensor_t,
        grad_weights: *mut f32,
        stream: *mut c_void,
    ) -> weft_status_t;

    // ---- plugin.h
    pub fn weft_plugin_load(path: *const c_char, plugin: *mut weft_plugin_t) -> weft_status_t;
    pub fn weft_plugin_destroy(plugin: weft_plugin_t) -> weft_status_t;
    pub fn weft_plugin_info(plugin: weft_plugin_t, info: *mut weft_plugin_info_t) -> weft_status_t;
    pub fn weft_plugin_entry(plugin: weft_plugin_t, index: usize, entry: *mut weft_plugin_entry_t) -> weft_status_t;
    pub fn weft_plugin_lookup(
        plugin: weft_plugin_t,
        name: *const c_char,
        entry: *mut weft_plugin_entry_t,
    ) -> weft_status_t;
    pub fn weft_plugin_call(
        plugin: weft_plugin_t,
        entry: *const c_char,
        args: *const weft_value_t,
        nargs: usize,
        result: *mut weft_value_t,
    ) -> weft_status_t;
    pub fn weft_closure_create(
        ret: weft_value_type_t,
        args: *const weft_value_type_t,
        nargs: usize,
        handler: weft_closure_fn,
        user_data: *mut c_void,
        closure: *mut weft_closure_t,
        function: *mut *mut c_void,
    ) -> weft_status_t;
    pub fn weft_closure_error(
        closure: weft_closure_t,
        failures: *mut u64,
        message: *mut *const c_char,
    ) -> weft_status_t;
    pub fn weft_closure_destroy(closure: weft_closure_t) -> weft_status_t;
    pub fn weft_op_create(config: *const weft_op_config_t, op: *mut weft_op_t) -> weft_status_t;
    pub fn weft_op_destroy(op: weft_op_t) -> weft_status_t;
}

#[cfg(test)]
mod tests;
