//! Types and constants of `weft/training.h` (gradient bucketer, ZeRO, tensor/sequence/context
//! parallel regions), in the header's order. The functions are declared in `lib.rs`'s
//! `extern "C"` block with the others.
use core::ffi::{c_char, c_int};

use crate::{weft_dtype_t, weft_op_t, WEFT_AVG, WEFT_FLOAT32};

/// `enum weft_wire_format`.
pub type weft_wire_format_t = c_int;
/// `WEFT_WIRE_NATIVE`, a value of `weft_wire_format_t`.
pub const WEFT_WIRE_NATIVE: weft_wire_format_t = 0;
/// `WEFT_WIRE_BF16`, a value of `weft_wire_format_t`.
pub const WEFT_WIRE_BF16: weft_wire_format_t = 1;
/// `WEFT_WIRE_FP8_E4M3`, a value of `weft_wire_format_t`.
pub const WEFT_WIRE_FP8_E4M3: weft_wire_format_t = 2;

/// Elements per float32 scale of the FP8_E4M3 wire.
pub const WEFT_WIRE_FP8_BLOCK: usize = 256;

// ------------------------------------------------------------------ gradient bucketer

/// Opaque `struct weft_bucketer`.
#[repr(C)]
pub struct weft_bucketer {
    _private: [u8; 0],
}
/// `weft_bucketer_t`: an opaque handle (`*mut weft_bucketer`).
pub type weft_bucketer_t = *mut weft_bucketer;

/// `enum weft_bucket_reduction`.
pub type weft_bucket_reduction_t = c_int;
/// `WEFT_BUCKET_ALLREDUCE`: every rank gets the whole reduced gradient.
pub const WEFT_BUCKET_ALLREDUCE: weft_bucket_reduction_t = 0;
/// `WEFT_BUCKET_REDUCE_SCATTER`: each rank gets one chunk of each bucket (ZeRO-style).
pub const WEFT_BUCKET_REDUCE_SCATTER: weft_bucket_reduction_t = 1;

/// `weft_bucketer_config_t`; start from [`WEFT_BUCKETER_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_bucketer_config_t {
    /// C field `struct_size` of `weft_bucketer_config_t`.
    pub struct_size: usize,
    /// C field `bucket_bytes` of `weft_bucketer_config_t`.
    pub bucket_bytes: usize,
    /// C field `bucket_of` of `weft_bucketer_config_t`.
    pub bucket_of: *const usize,
    /// C field `op` of `weft_bucketer_config_t`.
    pub op: weft_op_t,
    /// C field `wire` of `weft_bucketer_config_t`.
    pub wire: weft_wire_format_t,
    /// C field `reduction` of `weft_bucketer_config_t`.
    pub reduction: weft_bucket_reduction_t,
    /// C field `names` of `weft_bucketer_config_t`.
    pub names: *const *const c_char,
    /// Nonzero (compressed wires only): keep what the encoding lost and add it next step.
    pub error_feedback: c_int,
}

/// `WEFT_BUCKETER_CONFIG_INIT`.
pub const WEFT_BUCKETER_CONFIG_INIT: weft_bucketer_config_t = weft_bucketer_config_t {
    struct_size: core::mem::size_of::<weft_bucketer_config_t>(),
    bucket_bytes: 0,
    bucket_of: core::ptr::null(),
    op: WEFT_AVG,
    wire: WEFT_WIRE_NATIVE,
    reduction: WEFT_BUCKET_ALLREDUCE,
    names: core::ptr::null(),
    error_feedback: 0,
};

/// `weft_bucketer_stats_t`; start from [`WEFT_BUCKETER_STATS_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct weft_bucketer_stats_t {
    /// C field `struct_size` of `weft_bucketer_stats_t`.
    pub struct_size: usize,
    /// Finish() calls so far.
    pub steps: u64,
    /// Last step: bytes this rank's reductions moved (see below).
    pub wire_bytes: u64,
    /// Last step: time finish() waited for communication.
    pub exposed_ns: u64,
    /// Last step: buckets ready before an earlier bucket (waited for it).
    pub launched_late: u64,
}

/// `WEFT_BUCKETER_STATS_INIT`.
pub const WEFT_BUCKETER_STATS_INIT: weft_bucketer_stats_t = weft_bucketer_stats_t {
    struct_size: core::mem::size_of::<weft_bucketer_stats_t>(),
    steps: 0,
    wire_bytes: 0,
    exposed_ns: 0,
    launched_late: 0,
};

// ------------------------------------------------------------------ ZeRO

/// Opaque `struct weft_zero`.
#[repr(C)]
pub struct weft_zero {
    _private: [u8; 0],
}
/// `weft_zero_t`: an opaque handle (`*mut weft_zero`).
pub type weft_zero_t = *mut weft_zero;

/// `enum weft_optimizer_kind`.
pub type weft_optimizer_kind_t = c_int;
/// `WEFT_OPTIMIZER_SGD`: torch.optim.SGD: momentum, dampening 0, weight decay added to the
/// gradient.
pub const WEFT_OPTIMIZER_SGD: weft_optimizer_kind_t = 0;
/// `WEFT_OPTIMIZER_ADAM`: torch.optim.Adam: L2 weight decay added to the gradient.
pub const WEFT_OPTIMIZER_ADAM: weft_optimizer_kind_t = 1;
/// `WEFT_OPTIMIZER_ADAMW`: torch.optim.AdamW: decoupled weight decay.
pub const WEFT_OPTIMIZER_ADAMW: weft_optimizer_kind_t = 2;

/// `weft_optimizer_config_t`; start from [`WEFT_OPTIMIZER_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_optimizer_config_t {
    /// C field `struct_size` of `weft_optimizer_config_t`.
    pub struct_size: usize,
    /// C field `kind` of `weft_optimizer_config_t`.
    pub kind: weft_optimizer_kind_t,
    /// C field `lr` of `weft_optimizer_config_t`.
    pub lr: f32,
    /// SGD.
    pub momentum: f32,
    /// Adam, AdamW.
    pub beta1: f32,
    /// C field `beta2` of `weft_optimizer_config_t`.
    pub beta2: f32,
    /// C field `eps` of `weft_optimizer_config_t`.
    pub eps: f32,
    /// C field `weight_decay` of `weft_optimizer_config_t`.
    pub weight_decay: f32,
}

/// `WEFT_OPTIMIZER_CONFIG_INIT`.
pub const WEFT_OPTIMIZER_CONFIG_INIT: weft_optimizer_config_t = weft_optimizer_config_t {
    struct_size: core::mem::size_of::<weft_optimizer_config_t>(),
    kind: WEFT_OPTIMIZER_ADAMW,
    lr: 1e-3,
    momentum: 0.0,
    beta1: 0.9,
    beta2: 0.999,
    eps: 1e-8,
    weight_decay: 0.01,
};

/// `weft_zero_config_t`; start from [`WEFT_ZERO_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_zero_config_t {
    /// C field `struct_size` of `weft_zero_config_t`.
    pub struct_size: usize,
    /// C field `stage` of `weft_zero_config_t`.
    pub stage: c_int,
    /// C field `param_dtype` of `weft_zero_config_t`.
    pub param_dtype: weft_dtype_t,
    /// C field `optimizer` of `weft_zero_config_t`.
    pub optimizer: weft_optimizer_config_t,
    /// C field `groups` of `weft_zero_config_t`.
    pub groups: *const c_int,
    /// C field `group_bytes` of `weft_zero_config_t`.
    pub group_bytes: usize,
    /// C field `names` of `weft_zero_config_t`.
    pub names: *const *const c_char,
    /// C field `grad_op` of `weft_zero_config_t`.
    pub grad_op: weft_op_t,
    /// C field `wire` of `weft_zero_config_t`.
    pub wire: weft_wire_format_t,
    /// C field `max_grad_norm` of `weft_zero_config_t`.
    pub max_grad_norm: f32,
    /// C field `loss_scale` of `weft_zero_config_t`.
    pub loss_scale: f32,
    /// C field `dynamic_loss_scale` of `weft_zero_config_t`.
    pub dynamic_loss_scale: c_int,
    /// C field `growth` of `weft_zero_config_t`.
    pub growth: f32,
    /// C field `backoff` of `weft_zero_config_t`.
    pub backoff: f32,
    /// C field `growth_interval` of `weft_zero_config_t`.
    pub growth_interval: c_int,
    /// As the bucketer's (compressed wires only).
    pub error_feedback: c_int,
}

/// `WEFT_ZERO_CONFIG_INIT`.
pub const WEFT_ZERO_CONFIG_INIT: weft_zero_config_t = weft_zero_config_t {
    struct_size: core::mem::size_of::<weft_zero_config_t>(),
    stage: 2,
    param_dtype: WEFT_FLOAT32,
    optimizer: WEFT_OPTIMIZER_CONFIG_INIT,
    groups: core::ptr::null(),
    group_bytes: 0,
    names: core::ptr::null(),
    grad_op: WEFT_AVG,
    wire: WEFT_WIRE_NATIVE,
    max_grad_norm: 0.0,
    loss_scale: 1.0,
    dynamic_loss_scale: 0,
    growth: 2.0,
    backoff: 0.5,
    growth_interval: 2000,
    error_feedback: 0,
};

/// `weft_zero_step_info_t`; start from [`WEFT_ZERO_STEP_INFO_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct weft_zero_step_info_t {
    /// C field `struct_size` of `weft_zero_step_info_t`.
    pub struct_size: usize,
    /// 1: an inf/NaN gradient on some rank; no parameter changed.
    pub skipped: c_int,
    /// Global L2 norm of the unscaled gradient, before clipping.
    pub grad_norm: f32,
    /// The scale to multiply the next step's loss by.
    pub loss_scale: f32,
    /// Elements this rank's collectives moved since the last step (below).
    pub comm_elements: u64,
    /// The same in bytes, in the wire format.
    pub comm_bytes: u64,
}

/// `WEFT_ZERO_STEP_INFO_INIT`.
pub const WEFT_ZERO_STEP_INFO_INIT: weft_zero_step_info_t = weft_zero_step_info_t {
    struct_size: core::mem::size_of::<weft_zero_step_info_t>(),
    skipped: 0,
    grad_norm: 0.0,
    loss_scale: 0.0,
    comm_elements: 0,
    comm_bytes: 0,
};

/// `weft_zero_memory_t`; start from [`WEFT_ZERO_MEMORY_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct weft_zero_memory_t {
    /// C field `struct_size` of `weft_zero_memory_t`.
    pub struct_size: usize,
    /// Parameters held (full or shard).
    pub params: u64,
    /// Gradients held between grad_ready and step (full or shard).
    pub grads: u64,
    /// Float32 master weights and optimizer state (full or shard).
    pub optimizer: u64,
    /// C field `buffers` of `weft_zero_memory_t`.
    pub buffers: u64,
    /// The most `buffers` has been.
    pub buffers_peak: u64,
}

/// `WEFT_ZERO_MEMORY_INIT`.
pub const WEFT_ZERO_MEMORY_INIT: weft_zero_memory_t = weft_zero_memory_t {
    struct_size: core::mem::size_of::<weft_zero_memory_t>(),
    params: 0,
    grads: 0,
    optimizer: 0,
    buffers: 0,
    buffers_peak: 0,
};

// ------------------------------------------------------------------ tensor / sequence parallel

/// `enum weft_region`.
pub type weft_region_t = c_int;
/// `WEFT_REGION_COPY`, a value of `weft_region_t`.
pub const WEFT_REGION_COPY: weft_region_t = 0;
/// `WEFT_REGION_REDUCE`, a value of `weft_region_t`.
pub const WEFT_REGION_REDUCE: weft_region_t = 1;
/// `WEFT_REGION_SCATTER`, a value of `weft_region_t`.
pub const WEFT_REGION_SCATTER: weft_region_t = 2;
/// `WEFT_REGION_GATHER`, a value of `weft_region_t`.
pub const WEFT_REGION_GATHER: weft_region_t = 3;
/// `WEFT_REGION_SEQ_GATHER`, a value of `weft_region_t`.
pub const WEFT_REGION_SEQ_GATHER: weft_region_t = 4;
/// `WEFT_REGION_SEQ_REDUCE_SCATTER`, a value of `weft_region_t`.
pub const WEFT_REGION_SEQ_REDUCE_SCATTER: weft_region_t = 5;
