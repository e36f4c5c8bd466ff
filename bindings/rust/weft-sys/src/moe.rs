//! Types and constants of `weft/moe.h` (router, dispatch layout, dispatch and combine), in the
//! header's order. The functions are declared in `lib.rs`'s `extern "C"` block with the others.
use core::ffi::c_int;

use crate::{weft_dtype_t, weft_tensor_t, WEFT_DEVICE_CPU, WEFT_FLOAT32};

/// `WEFT_MOE_DROPPED`: the expert index of a dropped slot.
pub const WEFT_MOE_DROPPED: i32 = -1;

// ------------------------------------------------------------------ router

/// `enum weft_router_score`.
pub type weft_router_score_t = c_int;
/// `WEFT_ROUTER_SOFTMAX`, a value of `weft_router_score_t`.
pub const WEFT_ROUTER_SOFTMAX: weft_router_score_t = 0;
/// `WEFT_ROUTER_TOPK_SOFTMAX`: the k largest logits; weights = softmax over those k (normalize has
/// no effect).
pub const WEFT_ROUTER_TOPK_SOFTMAX: weft_router_score_t = 1;
/// `WEFT_ROUTER_SIGMOID`: s = sigmoid(logits); the k largest s; weights = s / sum of the k.
pub const WEFT_ROUTER_SIGMOID: weft_router_score_t = 2;

/// `enum weft_router_drop`.
pub type weft_router_drop_t = c_int;
/// `WEFT_DROP_NONE`: dropless: no capacity.
pub const WEFT_DROP_NONE: weft_router_drop_t = 0;
/// `WEFT_DROP_BY_PROBABILITY`: each expert keeps its C assignments of highest weight (ties: lower
/// token).
pub const WEFT_DROP_BY_PROBABILITY: weft_router_drop_t = 1;
/// `WEFT_DROP_BY_POSITION`: each expert keeps its first C assignments in token order.
pub const WEFT_DROP_BY_POSITION: weft_router_drop_t = 2;

/// `weft_router_config_t`; start from [`WEFT_ROUTER_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_router_config_t {
    /// C field `struct_size` of `weft_router_config_t`.
    pub struct_size: usize,
    /// C field `experts` of `weft_router_config_t`.
    pub experts: c_int,
    /// C field `topk` of `weft_router_config_t`.
    pub topk: c_int,
    /// C field `score` of `weft_router_config_t`.
    pub score: weft_router_score_t,
    /// C field `normalize` of `weft_router_config_t`.
    pub normalize: c_int,
    /// C field `groups` of `weft_router_config_t`.
    pub groups: c_int,
    /// C field `topk_groups` of `weft_router_config_t`.
    pub topk_groups: c_int,
    /// NULL, or `experts` values added to the scores for selection only.
    pub bias: *const f32,
    /// C field `drop` of `weft_router_config_t`.
    pub drop: weft_router_drop_t,
    /// C field `capacity_factor` of `weft_router_config_t`.
    pub capacity_factor: f64,
    /// C field `aux_loss_coeff` of `weft_router_config_t`.
    pub aux_loss_coeff: f32,
    /// C field `z_loss_coeff` of `weft_router_config_t`.
    pub z_loss_coeff: f32,
    /// 0 = the built-in top-k selection; a ROUTER plugin's id = that plugin's selection.
    pub selector: c_int,
}

/// `WEFT_ROUTER_CONFIG_INIT`.
pub const WEFT_ROUTER_CONFIG_INIT: weft_router_config_t = weft_router_config_t {
    struct_size: core::mem::size_of::<weft_router_config_t>(),
    experts: 0,
    topk: 1,
    score: WEFT_ROUTER_SOFTMAX,
    normalize: 0,
    groups: 0,
    topk_groups: 0,
    bias: core::ptr::null(),
    drop: WEFT_DROP_NONE,
    capacity_factor: 1.0,
    aux_loss_coeff: 0.0,
    z_loss_coeff: 0.0,
    selector: 0,
};

/// `weft_router_result_t`: where the router writes (caller arrays); start from
/// [`WEFT_ROUTER_RESULT_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_router_result_t {
    /// C field `struct_size` of `weft_router_result_t`.
    pub struct_size: usize,
    /// C field `indices` of `weft_router_result_t`.
    pub indices: *mut i32,
    /// C field `weights` of `weft_router_result_t`.
    pub weights: *mut f32,
    /// C field `tokens_per_expert` of `weft_router_result_t`.
    pub tokens_per_expert: *mut i64,
    /// C field `selected_per_expert` of `weft_router_result_t`.
    pub selected_per_expert: *mut i64,
    /// C field `aux_loss` of `weft_router_result_t`.
    pub aux_loss: f32,
    /// C field `z_loss` of `weft_router_result_t`.
    pub z_loss: f32,
}

/// `WEFT_ROUTER_RESULT_INIT`.
pub const WEFT_ROUTER_RESULT_INIT: weft_router_result_t = weft_router_result_t {
    struct_size: core::mem::size_of::<weft_router_result_t>(),
    indices: core::ptr::null_mut(),
    weights: core::ptr::null_mut(),
    tokens_per_expert: core::ptr::null_mut(),
    selected_per_expert: core::ptr::null_mut(),
    aux_loss: 0.0,
    z_loss: 0.0,
};

// ------------------------------------------------------------------ dispatch and combine

/// Opaque `struct weft_moe`.
#[repr(C)]
pub struct weft_moe {
    _private: [u8; 0],
}
/// `weft_moe_t`: an opaque handle (`*mut weft_moe`).
pub type weft_moe_t = *mut weft_moe;

/// Opaque `struct weft_moe_handle`.
#[repr(C)]
pub struct weft_moe_handle {
    _private: [u8; 0],
}
/// `weft_moe_handle_t`: an opaque handle (`*mut weft_moe_handle`).
pub type weft_moe_handle_t = *mut weft_moe_handle;

/// `weft_moe_config_t`; start from [`WEFT_MOE_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_moe_config_t {
    /// C field `struct_size` of `weft_moe_config_t`.
    pub struct_size: usize,
    /// C field `experts` of `weft_moe_config_t`.
    pub experts: c_int,
    /// C field `hidden` of `weft_moe_config_t`.
    pub hidden: usize,
    /// C field `dtype` of `weft_moe_config_t`.
    pub dtype: weft_dtype_t,
    /// NULL = contiguous blocks; else `experts` ranks (copied).
    pub expert_rank: *const i32,
    /// C field `expert_alignment` of `weft_moe_config_t`.
    pub expert_alignment: usize,
    /// C field `fp8_dispatch` of `weft_moe_config_t`.
    pub fp8_dispatch: c_int,
    /// C field `device` of `weft_moe_config_t`.
    pub device: c_int,
}

/// `WEFT_MOE_CONFIG_INIT`.
pub const WEFT_MOE_CONFIG_INIT: weft_moe_config_t = weft_moe_config_t {
    struct_size: core::mem::size_of::<weft_moe_config_t>(),
    experts: 0,
    hidden: 0,
    dtype: WEFT_FLOAT32,
    expert_rank: core::ptr::null(),
    expert_alignment: 0,
    fp8_dispatch: 0,
    device: 0,
};

/// `weft_moe_received_t`: what dispatch delivered (views of weft-owned memory, valid until the
/// handle is destroyed); start from [`WEFT_MOE_RECEIVED_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_moe_received_t {
    /// C field `struct_size` of `weft_moe_received_t`.
    pub struct_size: usize,
    /// C field `tokens` of `weft_moe_received_t`.
    pub tokens: weft_tensor_t,
    /// C field `rows` of `weft_moe_received_t`.
    pub rows: usize,
    /// C field `local_experts` of `weft_moe_received_t`.
    pub local_experts: c_int,
    /// C field `experts` of `weft_moe_received_t`.
    pub experts: *const i32,
    /// C field `counts` of `weft_moe_received_t`.
    pub counts: *const i64,
    /// C field `offsets` of `weft_moe_received_t`.
    pub offsets: *const i64,
    /// C field `row_expert` of `weft_moe_received_t`.
    pub row_expert: *const i32,
    /// C field `row_weight` of `weft_moe_received_t`.
    pub row_weight: *const f32,
    /// C field `row_source_rank` of `weft_moe_received_t`.
    pub row_source_rank: *const i32,
    /// C field `row_source_token` of `weft_moe_received_t`.
    pub row_source_token: *const i64,
}

/// `WEFT_MOE_RECEIVED_INIT`.
pub const WEFT_MOE_RECEIVED_INIT: weft_moe_received_t = weft_moe_received_t {
    struct_size: core::mem::size_of::<weft_moe_received_t>(),
    tokens: weft_tensor_t {
        data: core::ptr::null_mut(),
        device_type: WEFT_DEVICE_CPU,
        device_id: 0,
        ndim: 0,
        dtype: WEFT_FLOAT32,
        shape: core::ptr::null(),
        strides: core::ptr::null(),
        byte_offset: 0,
    },
    rows: 0,
    local_experts: 0,
    experts: core::ptr::null(),
    counts: core::ptr::null(),
    offsets: core::ptr::null(),
    row_expert: core::ptr::null(),
    row_weight: core::ptr::null(),
    row_source_rank: core::ptr::null(),
    row_source_token: core::ptr::null(),
};
