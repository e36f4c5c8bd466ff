//! Types and constants of `weft/mesh.h` (meshes, layouts, sharded tensors, redistribution,
//! checkpoints), in the header's order. The functions are declared in `lib.rs`'s `extern "C"`
//! block with the others.
use core::ffi::{c_char, c_int};

use crate::{weft_op_t, WEFT_SUM};

pub const WEFT_MESH_MAX_DIMS: usize = 4;
/// Longest dim name, without its terminating NUL.
pub const WEFT_MESH_MAX_NAME: usize = 31;

/// Opaque `struct weft_mesh`.
#[repr(C)]
pub struct weft_mesh {
    _private: [u8; 0],
}
pub type weft_mesh_t = *mut weft_mesh;

/// `weft_mesh_config_t`; start from [`WEFT_MESH_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_mesh_config_t {
    pub struct_size: usize,
    pub ranks: *const c_int,
    pub nranks: usize,
}

/// `WEFT_MESH_CONFIG_INIT`.
pub const WEFT_MESH_CONFIG_INIT: weft_mesh_config_t =
    weft_mesh_config_t { struct_size: core::mem::size_of::<weft_mesh_config_t>(), ranks: core::ptr::null(), nranks: 0 };

/// `enum weft_placement_kind`.
pub type weft_placement_kind_t = c_int;
pub const WEFT_REPLICATE: weft_placement_kind_t = 0;
pub const WEFT_SHARD: weft_placement_kind_t = 1;
pub const WEFT_PARTIAL: weft_placement_kind_t = 2;

/// `weft_placement_t`: one placement per mesh dim (an array element: no struct_size).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct weft_placement_t {
    pub kind: weft_placement_kind_t,
    pub dim: c_int,
    pub op: weft_op_t,
}

/// `WEFT_PLACEMENT_REPLICATE_INIT`.
pub const WEFT_PLACEMENT_REPLICATE_INIT: weft_placement_t =
    weft_placement_t { kind: WEFT_REPLICATE, dim: 0, op: WEFT_SUM };

/// Opaque `struct weft_sharded`.
#[repr(C)]
pub struct weft_sharded {
    _private: [u8; 0],
}
pub type weft_sharded_t = *mut weft_sharded;

/// `weft_sharded_config_t`; start from [`WEFT_SHARDED_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_sharded_config_t {
    pub struct_size: usize,
    pub name: *const c_char,
}

/// `WEFT_SHARDED_CONFIG_INIT`.
pub const WEFT_SHARDED_CONFIG_INIT: weft_sharded_config_t =
    weft_sharded_config_t { struct_size: core::mem::size_of::<weft_sharded_config_t>(), name: core::ptr::null() };

/// `enum weft_redistribute_kind`.
pub type weft_redistribute_kind_t = c_int;
pub const WEFT_STEP_LOCAL: weft_redistribute_kind_t = 0;
pub const WEFT_STEP_ALLGATHER: weft_redistribute_kind_t = 1;
pub const WEFT_STEP_ALLREDUCE: weft_redistribute_kind_t = 2;
pub const WEFT_STEP_REDUCE_SCATTER: weft_redistribute_kind_t = 3;
pub const WEFT_STEP_ALLTOALL: weft_redistribute_kind_t = 4;
pub const WEFT_STEP_EXCHANGE: weft_redistribute_kind_t = 5;

/// `weft_redistribute_step_t` (`from` is a Rust keyword: `from_`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_redistribute_step_t {
    pub kind: weft_redistribute_kind_t,
    pub mesh_dim: c_int,
    pub from_: weft_placement_t,
    pub to: weft_placement_t,
    pub bytes_sent: u64,
    pub max_bytes_sent: u64,
}

/// `weft_checkpoint_config_t`; start from [`WEFT_CHECKPOINT_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_checkpoint_config_t {
    pub struct_size: usize,
    pub fsync: c_int,
}

/// `WEFT_CHECKPOINT_CONFIG_INIT`.
pub const WEFT_CHECKPOINT_CONFIG_INIT: weft_checkpoint_config_t =
    weft_checkpoint_config_t { struct_size: core::mem::size_of::<weft_checkpoint_config_t>(), fsync: 1 };

/// Opaque `struct weft_checkpoint`.
#[repr(C)]
pub struct weft_checkpoint {
    _private: [u8; 0],
}
pub type weft_checkpoint_t = *mut weft_checkpoint;
