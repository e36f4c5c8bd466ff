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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        // x86-64 / aarch64 LP64: size_t, int64_t, int (+pad), pointer, int (+pad).
        assert_eq!(core::mem::size_of::<weft_comm_config_t>(), 40);
        assert_eq!(core::mem::size_of::<weft_unique_id_t>(), WEFT_UNIQUE_ID_BYTES);
        // int (+pad), pointer, size_t, int, int.
        assert_eq!(core::mem::size_of::<weft_p2p_op_t>(), 32);
        assert_eq!(core::mem::offset_of!(weft_p2p_op_t, buf), 8);
        assert_eq!(core::mem::offset_of!(weft_p2p_op_t, peer), 28);
        assert_eq!(WEFT_COMM_CONFIG_INIT.struct_size, 40);
        assert_eq!(WEFT_VERSION_CODE, 100);
    }

    #[test]
    fn library_links_and_reports_its_abi() {
        let (mut code, mut abi) = (-1, -1);
        let st = unsafe { weft_version(&mut code, &mut abi) };
        assert_eq!(st, WEFT_OK);
        assert_eq!(abi, WEFT_ABI_VERSION);
        assert_eq!(code, WEFT_VERSION_CODE);
        let mut size = 0usize;
        assert_eq!(unsafe { weft_dtype_size(WEFT_BFLOAT16, &mut size) }, WEFT_OK);
        assert_eq!(size, 2);
        assert_eq!(unsafe { weft_dtype_size(WEFT_NUM_DTYPES, &mut size) }, WEFT_ERR_INVALID_ARGUMENT);
    }
}
