//! Types and constants of `weft/training.h` (gradient bucketer, ZeRO, tensor/sequence/context
//! parallel regions), in the header's order. The functions are declared in `lib.rs`'s
//! `extern "C"` block with the others.
use core::ffi::{c_char, c_int};

use crate::{weft_dtype_t, weft_op_t, WEFT_AVG, WEFT_FLOAT32};

/// `enum weft_wire_format`.
pub type weft_wire_format_t = c_int;
pub const WEFT_WIRE_NATIVE: weft_wire_format_t = 0;
pub const WEFT_WIRE_BF16: weft_wire_format_t = 1;
pub const WEFT_WIRE_FP8_E4M3: weft_wire_format_t = 2;

/// Elements per float32 scale of the FP8_E4M3 wire.
pub const WEFT_WIRE_FP8_BLOCK: usize = 256;

// ------------------------------------------------------------------ gradient bucketer

/// Opaque `struct weft_bucketer`.
#[repr(C)]
pub struct weft_bucketer {
    _private: [u8; 0],
}
pub type weft_bucketer_t = *mut weft_bucketer;

/// `enum weft_bucket_reduction`.
pub type weft_bucket_reduction_t = c_int;
pub const WEFT_BUCKET_ALLREDUCE: weft_bucket_reduction_t = 0;
pub const WEFT_BUCKET_REDUCE_SCATTER: weft_bucket_reduction_t = 1;

/// `weft_bucketer_config_t`; start from [`WEFT_BUCKETER_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_bucketer_config_t {
    pub struct_size: usize,
    pub bucket_bytes: usize,
    pub bucket_of: *const usize,
    pub op: weft_op_t,
    pub wire: weft_wire_format_t,
    pub reduction: weft_bucket_reduction_t,
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
    pub struct_size: usize,
    pub steps: u64,
    pub wire_bytes: u64,
    pub exposed_ns: u64,
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
pub type weft_zero_t = *mut weft_zero;

/// `enum weft_optimizer_kind`.
pub type weft_optimizer_kind_t = c_int;
pub const WEFT_OPTIMIZER_SGD: weft_optimizer_kind_t = 0;
pub const WEFT_OPTIMIZER_ADAM: weft_optimizer_kind_t = 1;
pub const WEFT_OPTIMIZER_ADAMW: weft_optimizer_kind_t = 2;

/// `weft_optimizer_config_t`; start from [`WEFT_OPTIMIZER_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_optimizer_config_t {
    pub struct_size: usize,
    pub kind: weft_optimizer_kind_t,
    pub lr: f32,
    pub momentum: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
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
    pub struct_size: usize,
    pub stage: c_int,
    pub param_dtype: weft_dtype_t,
    pub optimizer: weft_optimizer_config_t,
    pub groups: *const c_int,
    pub group_bytes: usize,
    pub names: *const *const c_char,
    pub grad_op: weft_op_t,
    pub wire: weft_wire_format_t,
    pub max_grad_norm: f32,
    pub loss_scale: f32,
    pub dynamic_loss_scale: c_int,
    pub growth: f32,
    pub backoff: f32,
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
    pub struct_size: usize,
    pub skipped: c_int,
    pub grad_norm: f32,
    pub loss_scale: f32,
    pub comm_elements: u64,
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
    pub struct_size: usize,
    pub params: u64,
    pub grads: u64,
    pub optimizer: u64,
    pub buffers: u64,
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
pub const WEFT_REGION_COPY: weft_region_t = 0;
pub const WEFT_REGION_REDUCE: weft_region_t = 1;
pub const WEFT_REGION_SCATTER: weft_region_t = 2;
pub const WEFT_REGION_GATHER: weft_region_t = 3;
pub const WEFT_REGION_SEQ_GATHER: weft_region_t = 4;
pub const WEFT_REGION_SEQ_REDUCE_SCATTER: weft_region_t = 5;
