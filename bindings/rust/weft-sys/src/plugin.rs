//! Types and constants of `weft/plugin.h` (plugins, calls by name, closures, reduction
//! operators), in the header's order. The functions are declared in `lib.rs`'s `extern "C"`
//! block with the others.
use core::ffi::{c_char, c_int, c_void};

use crate::{weft_dtype_t, weft_status_t};

/// `WEFT_PLUGIN_ABI_MAJOR`, a value of `c_int`.
pub const WEFT_PLUGIN_ABI_MAJOR: c_int = 1;
/// `WEFT_PLUGIN_ABI_MINOR`, a value of `c_int`.
pub const WEFT_PLUGIN_ABI_MINOR: c_int = 0;
/// `WEFT_PLUGIN_MANIFEST_SYMBOL`, NUL-terminated.
pub const WEFT_PLUGIN_MANIFEST_SYMBOL: &[u8] = b"weft_plugin_manifest\0";
/// The first id of every kind of extension; built-in values stay below it.
pub const WEFT_PLUGIN_ID_BASE: c_int = 64;

// ------------------------------------------------------------------ for plugin authors

/// `weft_plugin_manifest_fn`: a C function pointer type of the header.
pub type weft_plugin_manifest_fn = Option<unsafe extern "C" fn(size: *mut usize) -> *const c_void>;

/// `enum weft_value_type`.
pub type weft_value_type_t = c_int;
/// `WEFT_TYPE_VOID`: return type only.
pub const WEFT_TYPE_VOID: weft_value_type_t = 0;
/// `WEFT_TYPE_I8`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_I8: weft_value_type_t = 1;
/// `WEFT_TYPE_U8`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_U8: weft_value_type_t = 2;
/// `WEFT_TYPE_I16`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_I16: weft_value_type_t = 3;
/// `WEFT_TYPE_U16`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_U16: weft_value_type_t = 4;
/// `WEFT_TYPE_I32`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_I32: weft_value_type_t = 5;
/// `WEFT_TYPE_U32`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_U32: weft_value_type_t = 6;
/// `WEFT_TYPE_I64`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_I64: weft_value_type_t = 7;
/// `WEFT_TYPE_U64`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_U64: weft_value_type_t = 8;
/// `WEFT_TYPE_F32`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_F32: weft_value_type_t = 9;
/// `WEFT_TYPE_F64`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_F64: weft_value_type_t = 10;
/// `WEFT_TYPE_PTR`: `void *`.
pub const WEFT_TYPE_PTR: weft_value_type_t = 11;
/// `WEFT_TYPE_SIZE`: size_t.
pub const WEFT_TYPE_SIZE: weft_value_type_t = 12;
/// `WEFT_TYPE_TENSOR`: `const weft_tensor_t *` (never NULL in a call).
pub const WEFT_TYPE_TENSOR: weft_value_type_t = 13;
/// `WEFT_TYPE_STRING`: const char *, NUL-terminated (never NULL in a call).
pub const WEFT_TYPE_STRING: weft_value_type_t = 14;
/// `WEFT_TYPE_FN`: a C function pointer (never NULL in a call; see weft_closure_create).
pub const WEFT_TYPE_FN: weft_value_type_t = 15;
/// `WEFT_TYPE_NUM`, a value of `weft_value_type_t`.
pub const WEFT_TYPE_NUM: weft_value_type_t = 16;

/// `enum weft_plugin_kind`.
pub type weft_plugin_kind_t = c_int;
/// `WEFT_PLUGIN_FUNCTION`, a value of `weft_plugin_kind_t`.
pub const WEFT_PLUGIN_FUNCTION: weft_plugin_kind_t = 0;
/// `WEFT_PLUGIN_REDUCE_OP`, a value of `weft_plugin_kind_t`.
pub const WEFT_PLUGIN_REDUCE_OP: weft_plugin_kind_t = 1;
/// `WEFT_PLUGIN_CODEC_BYTES`, a value of `weft_plugin_kind_t`.
pub const WEFT_PLUGIN_CODEC_BYTES: weft_plugin_kind_t = 2;
/// `WEFT_PLUGIN_CODEC_ENCODE`, a value of `weft_plugin_kind_t`.
pub const WEFT_PLUGIN_CODEC_ENCODE: weft_plugin_kind_t = 3;
/// `WEFT_PLUGIN_CODEC_DECODE`, a value of `weft_plugin_kind_t`.
pub const WEFT_PLUGIN_CODEC_DECODE: weft_plugin_kind_t = 4;
/// `WEFT_PLUGIN_ROUTER`, a value of `weft_plugin_kind_t`.
pub const WEFT_PLUGIN_ROUTER: weft_plugin_kind_t = 5;
/// `WEFT_PLUGIN_SCHEDULE`, a value of `weft_plugin_kind_t`.
pub const WEFT_PLUGIN_SCHEDULE: weft_plugin_kind_t = 6;
/// `WEFT_PLUGIN_COST_MODEL`, a value of `weft_plugin_kind_t`.
pub const WEFT_PLUGIN_COST_MODEL: weft_plugin_kind_t = 7;
/// `WEFT_PLUGIN_NUM_KINDS`, a value of `weft_plugin_kind_t`.
pub const WEFT_PLUGIN_NUM_KINDS: weft_plugin_kind_t = 8;

/// REDUCE_OP: `dst[i] = a[i] op b[i]` for `i < count` of element type `dtype`.
pub type weft_plugin_reduce_fn =
    Option<unsafe extern "C" fn(dst: *mut c_void, a: *const c_void, b: *const c_void, count: usize, dtype: i32) -> i32>;
/// CODEC_BYTES: the bytes encode writes for `count` float32 values.
pub type weft_plugin_codec_bytes_fn = Option<unsafe extern "C" fn(count: usize) -> usize>;
/// CODEC_ENCODE: encodes `src[0..count)` into `dst`.
pub type weft_plugin_codec_encode_fn =
    Option<unsafe extern "C" fn(src: *const f32, count: usize, dst: *mut c_void) -> i32>;
/// CODEC_DECODE: decodes into `dst[0..count)`.
pub type weft_plugin_codec_decode_fn =
    Option<unsafe extern "C" fn(src: *const c_void, count: usize, dst: *mut f32) -> i32>;
/// ROUTER: writes each token's `topk` experts to `indices`.
pub type weft_plugin_router_fn =
    Option<unsafe extern "C" fn(scores: *const f32, tokens: usize, experts: i32, topk: i32, indices: *mut i32) -> i32>;
/// SCHEDULE: every rank's compute-only action list, `counts` and `stage_rank`.
pub type weft_plugin_schedule_fn = Option<
    unsafe extern "C" fn(
        ranks: i32,
        microbatches: i32,
        stages_per_rank: i32,
        actions: *mut c_void,
        capacity: usize,
        counts: *mut usize,
        stage_rank: *mut i32,
    ) -> i32,
>;
/// COST_MODEL: the time of one compute action.
pub type weft_plugin_cost_fn = Option<
    unsafe extern "C" fn(action_kind: i32, stage: i32, nstages: i32, microbatch: i32, microbatch_size: i32) -> f64,
>;

// ------------------------------------------------------------------ loading and inspecting

#[repr(C)]
/// Opaque C `struct weft_plugin` (used only behind a pointer).
pub struct weft_plugin {
    _private: [u8; 0],
}
/// `weft_plugin_t`: an opaque handle (`*mut weft_plugin`).
pub type weft_plugin_t = *mut weft_plugin;

/// `weft_plugin_info_t`; start from [`WEFT_PLUGIN_INFO_INIT`]. Strings live while the handle does.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_plugin_info_t {
    /// C field `struct_size` of `weft_plugin_info_t`.
    pub struct_size: usize,
    /// C field `name` of `weft_plugin_info_t`.
    pub name: *const c_char,
    /// C field `version` of `weft_plugin_info_t`.
    pub version: *const c_char,
    /// As given to weft_plugin_load.
    pub path: *const c_char,
    /// C field `abi_major` of `weft_plugin_info_t`.
    pub abi_major: c_int,
    /// C field `abi_minor` of `weft_plugin_info_t`.
    pub abi_minor: c_int,
    /// C field `nentries` of `weft_plugin_info_t`.
    pub nentries: usize,
}

/// `WEFT_PLUGIN_INFO_INIT`.
pub const WEFT_PLUGIN_INFO_INIT: weft_plugin_info_t = weft_plugin_info_t {
    struct_size: core::mem::size_of::<weft_plugin_info_t>(),
    name: core::ptr::null(),
    version: core::ptr::null(),
    path: core::ptr::null(),
    abi_major: 0,
    abi_minor: 0,
    nentries: 0,
};

/// `weft_plugin_entry_t`; start from [`WEFT_PLUGIN_ENTRY_INIT`]. Strings and arrays live while
/// the handle does; `id` is the extension id of a registered kind, -1 for FUNCTION.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_plugin_entry_t {
    /// C field `struct_size` of `weft_plugin_entry_t`.
    pub struct_size: usize,
    /// C field `name` of `weft_plugin_entry_t`.
    pub name: *const c_char,
    /// C field `kind` of `weft_plugin_entry_t`.
    pub kind: weft_plugin_kind_t,
    /// C field `symbol` of `weft_plugin_entry_t`.
    pub symbol: *const c_char,
    /// C field `doc` of `weft_plugin_entry_t`.
    pub doc: *const c_char,
    /// C field `ret` of `weft_plugin_entry_t`.
    pub ret: weft_value_type_t,
    /// C field `args` of `weft_plugin_entry_t`.
    pub args: *const weft_value_type_t,
    /// C field `nargs` of `weft_plugin_entry_t`.
    pub nargs: usize,
    /// REDUCE_OP: the element types it takes; else none.
    pub dtypes: *const weft_dtype_t,
    /// C field `ndtypes` of `weft_plugin_entry_t`.
    pub ndtypes: usize,
    /// C field `id` of `weft_plugin_entry_t`.
    pub id: c_int,
}

/// `WEFT_PLUGIN_ENTRY_INIT`.
pub const WEFT_PLUGIN_ENTRY_INIT: weft_plugin_entry_t = weft_plugin_entry_t {
    struct_size: core::mem::size_of::<weft_plugin_entry_t>(),
    name: core::ptr::null(),
    kind: WEFT_PLUGIN_FUNCTION,
    symbol: core::ptr::null(),
    doc: core::ptr::null(),
    ret: WEFT_TYPE_VOID,
    args: core::ptr::null(),
    nargs: 0,
    dtypes: core::ptr::null(),
    ndtypes: 0,
    id: -1,
};

// ------------------------------------------------------------------ calling by name

/// `weft_value_t`: integers and SIZE in `i` (unsigned as their bits), F32/F64 in `f`, PTR,
/// TENSOR, STRING and FN in `p`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_value_t {
    /// C field `type_` of `weft_value_t`.
    pub type_: weft_value_type_t,
    /// C field `i` of `weft_value_t`.
    pub i: i64,
    /// C field `f` of `weft_value_t`.
    pub f: f64,
    /// C field `p` of `weft_value_t`.
    pub p: *const c_void,
}

/// `WEFT_VALUE_INIT`.
pub const WEFT_VALUE_INIT: weft_value_t = weft_value_t { type_: WEFT_TYPE_VOID, i: 0, f: 0.0, p: core::ptr::null() };

// ------------------------------------------------------------------ callbacks into any language

#[repr(C)]
/// Opaque C `struct weft_closure` (used only behind a pointer).
pub struct weft_closure {
    _private: [u8; 0],
}
/// `weft_closure_t`: an opaque handle (`*mut weft_closure`).
pub type weft_closure_t = *mut weft_closure;

/// `weft_closure_fn`: the one callback type a binding implements.
pub type weft_closure_fn = Option<
    unsafe extern "C" fn(
        args: *const weft_value_t,
        nargs: usize,
        result: *mut weft_value_t,
        user_data: *mut c_void,
    ) -> weft_status_t,
>;

// ------------------------------------------------------------------ reduction operators

/// `weft_reduce_fn`: `dst[i] = a[i] op b[i]`; returns WEFT_OK or an error status.
pub type weft_reduce_fn = Option<
    unsafe extern "C" fn(
        dst: *mut c_void,
        a: *const c_void,
        b: *const c_void,
        count: usize,
        dtype: weft_dtype_t,
        user_data: *mut c_void,
    ) -> weft_status_t,
>;

/// `weft_op_config_t`; start from [`WEFT_OP_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_op_config_t {
    /// C field `struct_size` of `weft_op_config_t`.
    pub struct_size: usize,
    /// C field `name` of `weft_op_config_t`.
    pub name: *const c_char,
    /// C field `fn_` of `weft_op_config_t`.
    pub fn_: weft_reduce_fn,
    /// C field `user_data` of `weft_op_config_t`.
    pub user_data: *mut c_void,
    /// C field `dtypes` of `weft_op_config_t`.
    pub dtypes: *const weft_dtype_t,
    /// C field `ndtypes` of `weft_op_config_t`.
    pub ndtypes: usize,
}

/// `WEFT_OP_CONFIG_INIT`.
pub const WEFT_OP_CONFIG_INIT: weft_op_config_t = weft_op_config_t {
    struct_size: core::mem::size_of::<weft_op_config_t>(),
    name: core::ptr::null(),
    fn_: None,
    user_data: core::ptr::null_mut(),
    dtypes: core::ptr::null(),
    ndtypes: 0,
};
