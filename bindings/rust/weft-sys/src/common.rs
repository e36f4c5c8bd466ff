//! Types and constants of `weft/common.h` (version, status codes, element types, reduction
//! operators, tensor views) and `weft/comm.h` (communicator configuration, unique ids,
//! point-to-point batches), in the headers' order. The functions are declared in `lib.rs`'s
//! `extern "C"` block with the others (scripts/check-bindings reads them there).
use core::ffi::{c_char, c_int, c_void};

/// `WEFT_VERSION_MAJOR`, a value of `c_int`.
pub const WEFT_VERSION_MAJOR: c_int = 0;
/// `WEFT_VERSION_MINOR`, a value of `c_int`.
pub const WEFT_VERSION_MINOR: c_int = 1;
/// `WEFT_VERSION_PATCH`, a value of `c_int`.
pub const WEFT_VERSION_PATCH: c_int = 0;
/// `WEFT_VERSION_CODE`, a value of `c_int`.
pub const WEFT_VERSION_CODE: c_int = WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH;
/// Bumped on every incompatible ABI change; compare with `weft_version`'s `abi_version`.
pub const WEFT_ABI_VERSION: c_int = 1;

/// `enum weft_status`.
pub type weft_status_t = c_int;
/// `WEFT_OK`, a value of `weft_status_t`.
pub const WEFT_OK: weft_status_t = 0;
/// `WEFT_ERR_INVALID_ARGUMENT`: a bad argument: NULL, out of range, bad enum, overlap.
pub const WEFT_ERR_INVALID_ARGUMENT: weft_status_t = 1;
/// `WEFT_ERR_UNSUPPORTED`: valid request this build or transport cannot do.
pub const WEFT_ERR_UNSUPPORTED: weft_status_t = 2;
/// `WEFT_ERR_OUT_OF_MEMORY`, a value of `weft_status_t`.
pub const WEFT_ERR_OUT_OF_MEMORY: weft_status_t = 3;
/// `WEFT_ERR_TIMEOUT`: a deadline (config timeout / WEFT_TIMEOUT) expired.
pub const WEFT_ERR_TIMEOUT: weft_status_t = 4;
/// `WEFT_ERR_REMOTE`: a peer failed or disappeared; the message names its rank.
pub const WEFT_ERR_REMOTE: weft_status_t = 5;
/// `WEFT_ERR_ABORTED`: weft_comm_abort() was called on this communicator.
pub const WEFT_ERR_ABORTED: weft_status_t = 6;
/// `WEFT_ERR_MISMATCH`: ranks disagree (version, or op/count/dtype/root in check mode).
pub const WEFT_ERR_MISMATCH: weft_status_t = 7;
/// `WEFT_ERR_TRANSPORT`: the network/transport layer failed.
pub const WEFT_ERR_TRANSPORT: weft_status_t = 8;
/// `WEFT_ERR_INTERNAL`: a bug in weft: please report with weft_last_error().
pub const WEFT_ERR_INTERNAL: weft_status_t = 9;
/// `WEFT_IN_PROGRESS`: weft_test(): not complete yet (not an error).
pub const WEFT_IN_PROGRESS: weft_status_t = 10;

/// `enum weft_dtype`.
pub type weft_dtype_t = c_int;
/// `WEFT_FLOAT64`, a value of `weft_dtype_t`.
pub const WEFT_FLOAT64: weft_dtype_t = 0;
/// `WEFT_FLOAT32`, a value of `weft_dtype_t`.
pub const WEFT_FLOAT32: weft_dtype_t = 1;
/// `WEFT_FLOAT16`: IEEE 754 binary16.
pub const WEFT_FLOAT16: weft_dtype_t = 2;
/// `WEFT_BFLOAT16`: bfloat16: the upper 16 bits of binary32.
pub const WEFT_BFLOAT16: weft_dtype_t = 3;
/// `WEFT_FP8_E4M3`: OCP FP8 E4M3 (no infinities, one NaN pattern per sign, max 448).
pub const WEFT_FP8_E4M3: weft_dtype_t = 4;
/// `WEFT_FP8_E5M2`: OCP FP8 E5M2 (IEEE-like, max finite 57344).
pub const WEFT_FP8_E5M2: weft_dtype_t = 5;
/// `WEFT_INT8`, a value of `weft_dtype_t`.
pub const WEFT_INT8: weft_dtype_t = 6;
/// `WEFT_UINT8`, a value of `weft_dtype_t`.
pub const WEFT_UINT8: weft_dtype_t = 7;
/// `WEFT_INT32`, a value of `weft_dtype_t`.
pub const WEFT_INT32: weft_dtype_t = 8;
/// `WEFT_UINT32`, a value of `weft_dtype_t`.
pub const WEFT_UINT32: weft_dtype_t = 9;
/// `WEFT_INT64`, a value of `weft_dtype_t`.
pub const WEFT_INT64: weft_dtype_t = 10;
/// `WEFT_UINT64`, a value of `weft_dtype_t`.
pub const WEFT_UINT64: weft_dtype_t = 11;
/// `WEFT_NUM_DTYPES`, a value of `weft_dtype_t`.
pub const WEFT_NUM_DTYPES: weft_dtype_t = 12;

/// `enum weft_op`.
pub type weft_op_t = c_int;
/// `WEFT_SUM`, a value of `weft_op_t`.
pub const WEFT_SUM: weft_op_t = 0;
/// `WEFT_PROD`, a value of `weft_op_t`.
pub const WEFT_PROD: weft_op_t = 1;
/// `WEFT_MIN`, a value of `weft_op_t`.
pub const WEFT_MIN: weft_op_t = 2;
/// `WEFT_MAX`, a value of `weft_op_t`.
pub const WEFT_MAX: weft_op_t = 3;
/// `WEFT_AVG`, a value of `weft_op_t`.
pub const WEFT_AVG: weft_op_t = 4;
/// `WEFT_NUM_OPS`, a value of `weft_op_t`.
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
/// `weft_comm_t`: an opaque handle (`*mut weft_comm`).
pub type weft_comm_t = *mut weft_comm;
/// `weft_request_t`: an opaque handle (`*mut weft_request`).
pub type weft_request_t = *mut weft_request;

/// `enum weft_transport`.
pub type weft_transport_t = c_int;
/// `WEFT_TRANSPORT_AUTO`: UCX picks shared memory, CMA, TCP, IB - whatever reaches the peer.
pub const WEFT_TRANSPORT_AUTO: weft_transport_t = 0;
/// `WEFT_TRANSPORT_UCX`, a value of `weft_transport_t`.
pub const WEFT_TRANSPORT_UCX: weft_transport_t = 1;

/// `weft_comm_config_t`; start from [`WEFT_COMM_CONFIG_INIT`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_comm_config_t {
    /// C field `struct_size` of `weft_comm_config_t`.
    pub struct_size: usize,
    /// Deadline for every blocking wait, in milliseconds. 0 = WEFT_TIMEOUT env (seconds) or the
    /// default of 300 s. <0 is invalid.
    pub timeout_ms: i64,
    /// Deadline for every blocking wait, in milliseconds. 0 = WEFT_TIMEOUT env (seconds) or the
    /// default of 300 s. <0 is invalid.
    pub transport: weft_transport_t,
    /// Name used in log lines and error messages; copied.
    pub name: *const c_char,
    /// 1 = compare op/dtype/count/root across ranks before each collective (as WEFT_DEBUG=check); 0
    /// = take WEFT_DEBUG from the environment.
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

/// `WEFT_UNIQUE_ID_BYTES`: opaque job identity: address of the rendezvous store and the job secret.
pub const WEFT_UNIQUE_ID_BYTES: usize = 128;
/// `weft_unique_id_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct weft_unique_id_t {
    /// C field `internal` of `weft_unique_id_t`.
    pub internal: [c_char; WEFT_UNIQUE_ID_BYTES],
}

/// `WEFT_SPLIT_NOCOLOR`: Collective over `comm`: ranks passing the same color >= 0 form a new
/// communicator, ordered by (key, old rank). color < 0 (WEFT_SPLIT_NOCOLOR) yields *newcomm = NULL.
/// config NULL = inherit.
pub const WEFT_SPLIT_NOCOLOR: c_int = -1;

/// `enum weft_p2p_kind`.
pub type weft_p2p_kind_t = c_int;
/// `WEFT_P2P_SEND`, a value of `weft_p2p_kind_t`.
pub const WEFT_P2P_SEND: weft_p2p_kind_t = 0;
/// `WEFT_P2P_RECV`, a value of `weft_p2p_kind_t`.
pub const WEFT_P2P_RECV: weft_p2p_kind_t = 1;

/// `weft_p2p_op_t`: one operation of `weft_p2p_batch` (an array element: no struct_size).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_p2p_op_t {
    /// C field `kind` of `weft_p2p_op_t`.
    pub kind: weft_p2p_kind_t,
    /// Sends only read it.
    pub buf: *mut c_void,
    /// Elements of dtype; the receive's count must equal the send's.
    pub count: usize,
    /// Elements of dtype; the receive's count must equal the send's.
    pub dtype: weft_dtype_t,
    /// Rank in comm; this rank itself is allowed.
    pub peer: c_int,
}

// ------------------------------------------------------------------ common.h: tensor views

/// `WEFT_TENSOR_MAX_DIMS`, a value of `usize`.
pub const WEFT_TENSOR_MAX_DIMS: usize = 8;

/// `enum weft_device_type` (DLPack's DLDeviceType codes).
pub type weft_device_type_t = c_int;
/// `WEFT_DEVICE_CPU`: kDLCPU: host memory.
pub const WEFT_DEVICE_CPU: weft_device_type_t = 1;
/// `WEFT_DEVICE_CUDA`: kDLCUDA: CUDA device memory of GPU device_id.
pub const WEFT_DEVICE_CUDA: weft_device_type_t = 2;
/// `WEFT_DEVICE_CUDA_HOST`: kDLCUDAHost: pinned host memory (treated as host memory).
pub const WEFT_DEVICE_CUDA_HOST: weft_device_type_t = 3;

/// `weft_tensor_t`: a view of caller-owned memory, field for field DLPack's `DLTensor`.
/// Strides are in elements; `strides` null means contiguous row-major.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct weft_tensor_t {
    /// C field `data` of `weft_tensor_t`.
    pub data: *mut c_void,
    /// C field `device_type` of `weft_tensor_t`.
    pub device_type: weft_device_type_t,
    /// C field `device_id` of `weft_tensor_t`.
    pub device_id: c_int,
    /// C field `ndim` of `weft_tensor_t`.
    pub ndim: c_int,
    /// C field `dtype` of `weft_tensor_t`.
    pub dtype: weft_dtype_t,
    /// C field `shape` of `weft_tensor_t`.
    pub shape: *const i64,
    /// C field `strides` of `weft_tensor_t`.
    pub strides: *const i64,
    /// C field `byte_offset` of `weft_tensor_t`.
    pub byte_offset: u64,
}
