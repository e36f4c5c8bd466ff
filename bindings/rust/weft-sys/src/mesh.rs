//! Types and constants of `weft/mesh.h` (meshes, layouts, sharded tensors, redistribution,
//! checkpoints), in the header's order. The functions are declared in `lib.rs`'s `extern "C"`
//! block with the others.
use core::ffi::{c_char, c_int};

use crate::{weft_op_t, WEFT_SUM};

/// `WEFT_MESH_MAX_DIMS`, a value of `usize`.
pub const WEFT_MESH_MAX_DIMS: usize = 4;
/// Longest dim name, without its terminating NUL.
pub const WEFT_MESH_MAX_NAME: usize = 31;

/// Opaque `struct weft_mesh`.
#[repr(C)]
pub struct weft_mesh {
    _private: [u8; 0],
}
/// `weft_mesh_t`: an opaque handle (`*mut weft_mesh`).
pub type weft_mesh_t = *mut weft_mesh;

/// `weft_mesh_config_t`; start from [`WEFT_MESH_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_mesh_config_t {
    /// C field `struct_size` of `weft_mesh_config_t`.
    pub struct_size: usize,
    /// C field `ranks` of `weft_mesh_config_t`.
    pub ranks: *const c_int,
    /// C field `nranks` of `weft_mesh_config_t`.
    pub nranks: usize,
}

/// `WEFT_MESH_CONFIG_INIT`.
pub const WEFT_MESH_CONFIG_INIT: weft_mesh_config_t =
    weft_mesh_config_t { struct_size: core::mem::size_of::<weft_mesh_config_t>(), ranks: core::ptr::null(), nranks: 0 };

/// `enum weft_placement_kind`.
pub type weft_placement_kind_t = c_int;
/// `WEFT_REPLICATE`: every rank along the mesh dim holds the same values.
pub const WEFT_REPLICATE: weft_placement_kind_t = 0;
/// `WEFT_SHARD`: tensor dim `dim` is split into chunks along the mesh dim.
pub const WEFT_SHARD: weft_placement_kind_t = 1;
/// `WEFT_PARTIAL`: each rank holds a term; the value is their reduction by `op`.
pub const WEFT_PARTIAL: weft_placement_kind_t = 2;

/// `weft_placement_t`: one placement per mesh dim (an array element: no struct_size).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct weft_placement_t {
    /// C field `kind` of `weft_placement_t`.
    pub kind: weft_placement_kind_t,
    /// WEFT_SHARD: the tensor dim (0 .. tensor ndim-1).
    pub dim: c_int,
    /// WEFT_PARTIAL: the reduction.
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
/// `weft_sharded_t`: an opaque handle (`*mut weft_sharded`).
pub type weft_sharded_t = *mut weft_sharded;

/// `weft_sharded_config_t`; start from [`WEFT_SHARDED_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_sharded_config_t {
    /// C field `struct_size` of `weft_sharded_config_t`.
    pub struct_size: usize,
    /// Shown in error messages; copied. NULL = "tensor".
    pub name: *const c_char,
}

/// `WEFT_SHARDED_CONFIG_INIT`.
pub const WEFT_SHARDED_CONFIG_INIT: weft_sharded_config_t =
    weft_sharded_config_t { struct_size: core::mem::size_of::<weft_sharded_config_t>(), name: core::ptr::null() };

/// `enum weft_redistribute_kind`.
pub type weft_redistribute_kind_t = c_int;
/// `WEFT_STEP_LOCAL`: a local copy, slice or zero fill: no communication.
pub const WEFT_STEP_LOCAL: weft_redistribute_kind_t = 0;
/// `WEFT_STEP_ALLGATHER`: over the mesh dim's group.
pub const WEFT_STEP_ALLGATHER: weft_redistribute_kind_t = 1;
/// `WEFT_STEP_ALLREDUCE`: over the mesh dim's group.
pub const WEFT_STEP_ALLREDUCE: weft_redistribute_kind_t = 2;
/// `WEFT_STEP_REDUCE_SCATTER`: over the mesh dim's group (one reduce per rank when uneven).
pub const WEFT_STEP_REDUCE_SCATTER: weft_redistribute_kind_t = 3;
/// `WEFT_STEP_ALLTOALL`: over the mesh dim's group.
pub const WEFT_STEP_ALLTOALL: weft_redistribute_kind_t = 4;
/// `WEFT_STEP_EXCHANGE`: point-to-point exchange of boxes over the whole mesh/parent.
pub const WEFT_STEP_EXCHANGE: weft_redistribute_kind_t = 5;

/// `weft_redistribute_step_t` (`from` is a Rust keyword: `from_`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_redistribute_step_t {
    /// C field `kind` of `weft_redistribute_step_t`.
    pub kind: weft_redistribute_kind_t,
    /// The mesh dim changed (-1 for EXCHANGE or the final copy).
    pub mesh_dim: c_int,
    /// C field `from_` of `weft_redistribute_step_t`.
    pub from_: weft_placement_t,
    /// The placements on mesh_dim before and after.
    pub to: weft_placement_t,
    /// The bytes of this rank's data that must reach other ranks in this step, whatever algorithm
    /// carries them: ALLGATHER its piece times (group size - 1).
    pub bytes_sent: u64,
    /// The same for the member that sends most in this step.
    pub max_bytes_sent: u64,
}

/// `weft_checkpoint_config_t`; start from [`WEFT_CHECKPOINT_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_checkpoint_config_t {
    /// C field `struct_size` of `weft_checkpoint_config_t`.
    pub struct_size: usize,
    /// 1 = fsync every file and the directory before the index is renamed into place (default); 0 =
    /// skip fsync (tests, tmpfs).
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
/// `weft_checkpoint_t`: an opaque handle (`*mut weft_checkpoint`).
pub type weft_checkpoint_t = *mut weft_checkpoint;
