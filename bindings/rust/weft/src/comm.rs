//! Communicators, their configuration, and the blocking collectives.
use std::cell::Cell;
use std::ffi::{c_int, c_void, CString};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::time::Duration;

use weft_sys as sys;

use crate::error::{check, Error, Result};
use crate::request::Scope;
use crate::types::{to_c_int, Op, Transport, WeftType};

/// Communicator options (`weft_comm_config_t`). `Config::default()` is `WEFT_COMM_CONFIG_INIT`.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Deadline for every blocking wait. `None`: `WEFT_TIMEOUT` (seconds) or 300 s.
    /// Durations are rounded up to whole milliseconds.
    pub timeout: Option<Duration>,
    pub transport: Transport,
    /// Name used in log lines and error messages (`None`: "weft").
    pub name: Option<String>,
    /// Compare op/dtype/count/root across ranks before each collective (as `WEFT_DEBUG=check`);
    /// `false` takes `WEFT_DEBUG` from the environment.
    pub check_collectives: bool,
}

/// A `weft_comm_config_t` and the C string it points at.
pub(crate) struct RawConfig {
    raw: sys::weft_comm_config_t,
    _name: Option<CString>,
}

impl RawConfig {
    fn new(config: &Config) -> Result<RawConfig> {
        let mut raw = sys::WEFT_COMM_CONFIG_INIT;
        if let Some(t) = config.timeout {
            let ms = t.as_nanos().div_ceil(1_000_000).max(1);
            raw.timeout_ms = i64::try_from(ms).unwrap_or(i64::MAX);
        }
        raw.transport = config.transport.raw();
        raw.check_collectives = config.check_collectives as c_int;
        let name = match &config.name {
            Some(n) => Some(CString::new(n.as_str()).map_err(|_| Error::invalid("Config::name contains a NUL byte"))?),
            None => None,
        };
        if let Some(n) = &name {
            raw.name = n.as_ptr();
        }
        Ok(RawConfig { raw, _name: name })
    }

    fn opt(config: Option<&Config>) -> Result<Option<RawConfig>> {
        config.map(RawConfig::new).transpose()
    }

    fn ptr(this: &Option<RawConfig>) -> *const sys::weft_comm_config_t {
        this.as_ref().map_or(ptr::null(), |c| &c.raw as *const _)
    }
}

/// The job identity (`weft_unique_id_t`) for [`Comm::init`]: made on one process with
/// [`UniqueId::new`], sent to every rank by the program's own means as 128 bytes.
/// It contains the job secret, so `Debug` does not print it.
#[derive(Clone, Copy)]
pub struct UniqueId(sys::weft_unique_id_t);

impl UniqueId {
    /// `weft_get_unique_id`: starts a rendezvous store in this process (it lives until every
    /// communicator made from the id here is dropped, or the process exits).
    pub fn new() -> Result<UniqueId> {
        let mut id = sys::weft_unique_id_t { internal: [0; sys::WEFT_UNIQUE_ID_BYTES] };
        // SAFETY: id is a valid out-pointer.
        check(unsafe { sys::weft_get_unique_id(&mut id) })?;
        Ok(UniqueId(id))
    }

    pub fn to_bytes(&self) -> [u8; sys::WEFT_UNIQUE_ID_BYTES] {
        self.0.internal.map(|c| c as u8)
    }

    pub fn from_bytes(bytes: [u8; sys::WEFT_UNIQUE_ID_BYTES]) -> UniqueId {
        UniqueId(sys::weft_unique_id_t { internal: bytes.map(|b| b as std::ffi::c_char) })
    }
}

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UniqueId(..)")
    }
}

/// A communicator (`weft_comm_t`). Dropping it calls `weft_comm_destroy` (which waits for this
/// rank's outstanding operations); [`Comm::destroy`] does the same and reports errors.
///
/// Thread safety follows weft.h: a communicator is used by one thread at a time, so `Comm` is
/// `Send` but not `Sync`. [`Comm::abort_handle`] gives a `Send + Sync` handle for the one call
/// allowed from any thread.
pub struct Comm {
    raw: sys::weft_comm_t,
    rank: usize,
    size: usize,
    local_rank: usize,
    local_size: usize,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: weft allows a communicator to move between threads (one thread at a time).
unsafe impl Send for Comm {}

fn query(
    raw: sys::weft_comm_t,
    f: unsafe extern "C" fn(sys::weft_comm_t, *mut c_int) -> sys::weft_status_t,
) -> Result<usize> {
    let mut v: c_int = -1;
    // SAFETY: raw is a live communicator, v a valid out-pointer.
    check(unsafe { f(raw, &mut v) })?;
    usize::try_from(v).map_err(|_| Error::new(crate::Status::Internal, format!("negative rank/size {v}")))
}

fn data<T>(s: &[T]) -> *const c_void {
    if s.is_empty() {
        ptr::null()
    } else {
        s.as_ptr() as *const c_void
    }
}

fn data_mut<T>(s: &mut [T]) -> *mut c_void {
    if s.is_empty() {
        ptr::null_mut()
    } else {
        s.as_mut_ptr() as *mut c_void
    }
}

/// `base` (from `data_mut`) advanced by `offset` elements of T; callers keep offsets within
/// the slice (an empty slice has a null base and only offset 0).
fn elem_at<T>(base: *mut c_void, offset: usize) -> *mut c_void {
    (base as *mut T).wrapping_add(offset) as *mut c_void
}

impl Comm {
    /// Takes ownership of a raw handle (it is destroyed when the `Comm` drops, or at once if
    /// reading its rank and size fails).
    ///
    /// # Safety
    /// `raw` must be a live communicator from libweft, owned by nobody else.
    pub unsafe fn from_raw(raw: sys::weft_comm_t) -> Result<Comm> {
        let queried = (|| {
            Ok::<_, Error>((
                query(raw, sys::weft_comm_rank)?,
                query(raw, sys::weft_comm_size)?,
                query(raw, sys::weft_comm_local_rank)?,
                query(raw, sys::weft_comm_local_size)?,
            ))
        })();
        match queried {
            Ok((rank, size, local_rank, local_size)) => {
                Ok(Comm { raw, rank, size, local_rank, local_size, _not_sync: PhantomData })
            }
            Err(e) => {
                sys::weft_comm_destroy(raw);
                Err(e)
            }
        }
    }

    /// Gives up ownership: the caller must `weft_comm_destroy` the handle.
    pub fn into_raw(self) -> sys::weft_comm_t {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// The raw handle, for calls through `weft-sys`; it stays owned by `self`.
    pub fn as_raw(&self) -> sys::weft_comm_t {
        self.raw
    }

    fn wrap(raw: sys::weft_comm_t) -> Result<Comm> {
        // SAFETY: raw was just returned by weft and is owned by us.
        unsafe { Comm::from_raw(raw) }
    }

    /// `weft_comm_init_from_env`: rank, size and store from the launcher's environment
    /// (weftrun, torchrun, Open MPI, PMI, Slurm), default options.
    pub fn from_env() -> Result<Comm> {
        Comm::from_env_with(None)
    }

    /// `weft_comm_init_from_env` with options.
    pub fn from_env_with(config: Option<&Config>) -> Result<Comm> {
        let cfg = RawConfig::opt(config)?;
        let mut raw: sys::weft_comm_t = ptr::null_mut();
        // SAFETY: raw is a valid out-pointer; cfg (and its name) outlive the call.
        check(unsafe { sys::weft_comm_init_from_env(&mut raw, RawConfig::ptr(&cfg)) })?;
        Comm::wrap(raw)
    }

    /// `weft_comm_init`: collective over `nranks` processes holding the same `id`.
    pub fn init(id: &UniqueId, rank: usize, nranks: usize, config: Option<&Config>) -> Result<Comm> {
        let cfg = RawConfig::opt(config)?;
        let (rank, nranks) = (to_c_int(rank, "rank")?, to_c_int(nranks, "nranks")?);
        let mut raw: sys::weft_comm_t = ptr::null_mut();
        // SAFETY: valid pointers for the duration of the call.
        check(unsafe { sys::weft_comm_init(&mut raw, &id.0, rank, nranks, RawConfig::ptr(&cfg)) })?;
        Comm::wrap(raw)
    }

    /// `weft_comm_split`, collective: ranks passing the same `color` form a new communicator,
    /// ordered by (`key`, old rank). `color` `None` (`WEFT_SPLIT_NOCOLOR`) returns `Ok(None)`.
    /// `config` `None` inherits this communicator's options.
    pub fn split(&self, color: Option<u32>, key: i32, config: Option<&Config>) -> Result<Option<Comm>> {
        let color = match color {
            Some(c) => c_int::try_from(c).map_err(|_| Error::invalid(format!("color = {c} does not fit a C int")))?,
            None => sys::WEFT_SPLIT_NOCOLOR,
        };
        let cfg = RawConfig::opt(config)?;
        let mut raw: sys::weft_comm_t = ptr::null_mut();
        // SAFETY: self.raw is live; valid pointers for the duration of the call.
        check(unsafe { sys::weft_comm_split(self.raw, color, key, &mut raw, RawConfig::ptr(&cfg)) })?;
        if raw.is_null() {
            Ok(None)
        } else {
            Comm::wrap(raw).map(Some)
        }
    }

    /// `weft_comm_dup`, collective: same ranks, own message space.
    pub fn dup(&self) -> Result<Comm> {
        let mut raw: sys::weft_comm_t = ptr::null_mut();
        // SAFETY: self.raw is live; raw a valid out-pointer.
        check(unsafe { sys::weft_comm_dup(self.raw, &mut raw) })?;
        Comm::wrap(raw)
    }

    /// This process's rank (`weft_comm_rank`, read once at creation).
    pub fn rank(&self) -> usize {
        self.rank
    }
    /// Number of ranks (`weft_comm_size`).
    pub fn size(&self) -> usize {
        self.size
    }
    /// Rank among this communicator's processes on this host (`weft_comm_local_rank`).
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }
    /// Number of this communicator's processes on this host (`weft_comm_local_size`).
    pub fn local_size(&self) -> usize {
        self.local_size
    }

    /// `weft_comm_abort`: every pending and later operation fails with `Status::Aborted`.
    pub fn abort(&self) -> Result<()> {
        // SAFETY: self.raw is live.
        check(unsafe { sys::weft_comm_abort(self.raw) })
    }

    /// A handle that may abort this communicator from any thread while it is in use.
    pub fn abort_handle(&self) -> AbortHandle<'_> {
        AbortHandle { raw: self.raw, _comm: PhantomData }
    }

    /// `weft_comm_destroy`: waits for this rank's outstanding operations, frees the handle and
    /// reports the status (dropping does the same silently).
    pub fn destroy(self) -> Result<()> {
        let raw = self.into_raw();
        // SAFETY: raw is live and ours; it is not used again.
        check(unsafe { sys::weft_comm_destroy(raw) })
    }

    /// Runs `f` with a [`Scope`] for asynchronous operations. Every request started in the
    /// scope is complete when `scope` returns (those not waited for are waited for there, their
    /// errors dropped), so buffers lent to them can be used again. See [`Scope`].
    pub fn scope<'env, F, R>(&'env self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        // Dropping `scope` at the end (or while unwinding) waits for every request it started.
        let scope = Scope::new(self);
        f(&scope)
    }

    // ------------------------------------------------------------------ checks

    fn check_root(&self, root: usize, what: &str) -> Result<c_int> {
        if root >= self.size {
            return Err(Error::invalid(format!(
                "{what} = {root}; expected 0..{} (the communicator's size)",
                self.size
            )));
        }
        to_c_int(root, what)
    }

    fn blocks(&self, len: usize, what: &str) -> Result<usize> {
        if !len.is_multiple_of(self.size) {
            return Err(Error::invalid(format!(
                "{what} has {len} elements, not a multiple of the communicator's size {}",
                self.size
            )));
        }
        Ok(len / self.size)
    }

    fn check_counts(&self, counts: &[usize], displs: &[usize], buf_len: usize, what: &str) -> Result<()> {
        if counts.len() != self.size || displs.len() != self.size {
            return Err(Error::invalid(format!(
                "{what}: counts has {} entries and displacements {}; expected the communicator's size {}",
                counts.len(),
                displs.len(),
                self.size
            )));
        }
        for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
            match d.checked_add(c) {
                Some(end) if end <= buf_len => {}
                _ => {
                    return Err(Error::invalid(format!(
                        "{what}: block {i} (displacement {d}, count {c}) ends beyond the buffer of {buf_len} elements"
                    )))
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ operations
    //
    // Each `*_raw` checks lengths, then calls C with `req` (null = blocking). They are private:
    // the public blocking methods pass null; `Scope` passes a request slot and ties the
    // buffers' borrows to the request.

    pub(crate) fn allreduce_raw<T: WeftType>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        if send.len() != recv.len() {
            return Err(Error::invalid(format!(
                "allreduce: send has {} elements, recv {}; they must match",
                send.len(),
                recv.len()
            )));
        }
        // SAFETY: both slices are valid for len elements of T, which matches T::DTYPE.
        check(unsafe {
            sys::weft_allreduce(
                data(send),
                data_mut(recv),
                send.len(),
                T::DTYPE.raw(),
                op.raw(),
                self.raw,
                ptr::null_mut(),
                req,
            )
        })
    }

    pub(crate) fn allreduce_in_place_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        op: Op,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let p = data_mut(buf);
        // SAFETY: in place (sendbuf == recvbuf), valid for buf.len() elements.
        check(unsafe { sys::weft_allreduce(p, p, buf.len(), T::DTYPE.raw(), op.raw(), self.raw, ptr::null_mut(), req) })
    }

    pub(crate) fn broadcast_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        root: usize,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let root = self.check_root(root, "root")?;
        // SAFETY: valid for buf.len() elements.
        check(unsafe {
            sys::weft_broadcast(data_mut(buf), buf.len(), T::DTYPE.raw(), root, self.raw, ptr::null_mut(), req)
        })
    }

    pub(crate) fn reduce_raw<T: WeftType>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        op: Op,
        root: usize,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let croot = self.check_root(root, "root")?;
        let recv_ptr = if self.rank == root {
            match recv {
                Some(r) if r.len() == send.len() => data_mut(r),
                Some(r) => {
                    return Err(Error::invalid(format!(
                        "reduce: send has {} elements, recv (at the root) {}; they must match",
                        send.len(),
                        r.len()
                    )))
                }
                None => return Err(Error::invalid("reduce: the root needs a receive buffer")),
            }
        } else {
            ptr::null_mut()
        };
        // SAFETY: valid buffers of send.len() elements (recv at the root only).
        check(unsafe {
            sys::weft_reduce(
                data(send),
                recv_ptr,
                send.len(),
                T::DTYPE.raw(),
                op.raw(),
                croot,
                self.raw,
                ptr::null_mut(),
                req,
            )
        })
    }

    pub(crate) fn reduce_in_place_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        op: Op,
        root: usize,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let root = self.check_root(root, "root")?;
        let p = data_mut(buf);
        // SAFETY: in place, valid for buf.len() elements.
        check(unsafe {
            sys::weft_reduce(p, p, buf.len(), T::DTYPE.raw(), op.raw(), root, self.raw, ptr::null_mut(), req)
        })
    }

    pub(crate) fn allgather_raw<T: WeftType>(
        &self,
        send: &[T],
        recv: &mut [T],
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        if send.len().checked_mul(self.size) != Some(recv.len()) {
            return Err(Error::invalid(format!(
                "allgather: recv has {} elements; expected size {} x send's {}",
                recv.len(),
                self.size,
                send.len()
            )));
        }
        // SAFETY: recv holds size * send.len() elements.
        check(unsafe {
            sys::weft_allgather(data(send), data_mut(recv), send.len(), T::DTYPE.raw(), self.raw, ptr::null_mut(), req)
        })
    }

    pub(crate) fn allgather_in_place_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let count = self.blocks(buf.len(), "allgather (in place): buf")?;
        let base = data_mut(buf);
        let send = elem_at::<T>(base, self.rank * count);
        // SAFETY: sendbuf == recvbuf + rank * count, the documented in-place form.
        check(unsafe { sys::weft_allgather(send, base, count, T::DTYPE.raw(), self.raw, ptr::null_mut(), req) })
    }

    pub(crate) fn allgatherv_raw<T: WeftType>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        self.check_counts(counts, displs, recv.len(), "allgatherv")?;
        if counts[self.rank] != send.len() {
            return Err(Error::invalid(format!(
                "allgatherv: send has {} elements but counts[{}] = {}",
                send.len(),
                self.rank,
                counts[self.rank]
            )));
        }
        // SAFETY: every block lies inside recv; arrays have size entries.
        check(unsafe {
            sys::weft_allgatherv(
                data(send),
                send.len(),
                data_mut(recv),
                counts.as_ptr(),
                displs.as_ptr(),
                T::DTYPE.raw(),
                self.raw,
                ptr::null_mut(),
                req,
            )
        })
    }

    pub(crate) fn allgatherv_in_place_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        counts: &[usize],
        displs: &[usize],
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        self.check_counts(counts, displs, buf.len(), "allgatherv (in place)")?;
        let count = counts[self.rank];
        let base = data_mut(buf);
        let send = elem_at::<T>(base, displs[self.rank]);
        // SAFETY: sendbuf == recvbuf + displs[rank], the documented in-place form.
        check(unsafe {
            sys::weft_allgatherv(
                send,
                count,
                base,
                counts.as_ptr(),
                displs.as_ptr(),
                T::DTYPE.raw(),
                self.raw,
                ptr::null_mut(),
                req,
            )
        })
    }

    pub(crate) fn reduce_scatter_raw<T: WeftType>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        if recv.len().checked_mul(self.size) != Some(send.len()) {
            return Err(Error::invalid(format!(
                "reduce_scatter: send has {} elements; expected size {} x recv's {}",
                send.len(),
                self.size,
                recv.len()
            )));
        }
        // SAFETY: send holds size * recv.len() elements.
        check(unsafe {
            sys::weft_reduce_scatter(
                data(send),
                data_mut(recv),
                recv.len(),
                T::DTYPE.raw(),
                op.raw(),
                self.raw,
                ptr::null_mut(),
                req,
            )
        })
    }

    pub(crate) fn reduce_scatter_in_place_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        op: Op,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let count = self.blocks(buf.len(), "reduce_scatter (in place): buf")?;
        let base = data_mut(buf);
        let recv = elem_at::<T>(base, self.rank * count);
        // SAFETY: recvbuf == sendbuf + rank * recvcount, the documented in-place form.
        check(unsafe {
            sys::weft_reduce_scatter(base, recv, count, T::DTYPE.raw(), op.raw(), self.raw, ptr::null_mut(), req)
        })
    }

    pub(crate) fn alltoall_raw<T: WeftType>(
        &self,
        send: &[T],
        recv: &mut [T],
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        if send.len() != recv.len() {
            return Err(Error::invalid(format!(
                "alltoall: send has {} elements, recv {}; they must match",
                send.len(),
                recv.len()
            )));
        }
        let count = self.blocks(send.len(), "alltoall: send")?;
        // SAFETY: both hold size * count elements.
        check(unsafe {
            sys::weft_alltoall(data(send), data_mut(recv), count, T::DTYPE.raw(), self.raw, ptr::null_mut(), req)
        })
    }

    pub(crate) fn alltoall_in_place_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let count = self.blocks(buf.len(), "alltoall (in place): buf")?;
        let p = data_mut(buf);
        // SAFETY: in place, size * count elements.
        check(unsafe { sys::weft_alltoall(p, p, count, T::DTYPE.raw(), self.raw, ptr::null_mut(), req) })
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn alltoallv_raw<T: WeftType>(
        &self,
        send: &[T],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
        recv_displs: &[usize],
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        self.check_counts(send_counts, send_displs, send.len(), "alltoallv (send)")?;
        self.check_counts(recv_counts, recv_displs, recv.len(), "alltoallv (recv)")?;
        // SAFETY: every block lies inside its buffer; arrays have size entries.
        check(unsafe {
            sys::weft_alltoallv(
                data(send),
                send_counts.as_ptr(),
                send_displs.as_ptr(),
                data_mut(recv),
                recv_counts.as_ptr(),
                recv_displs.as_ptr(),
                T::DTYPE.raw(),
                self.raw,
                ptr::null_mut(),
                req,
            )
        })
    }

    pub(crate) fn alltoallv_in_place_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        send_counts: &[usize],
        send_displs: &[usize],
        recv_counts: &[usize],
        recv_displs: &[usize],
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        self.check_counts(send_counts, send_displs, buf.len(), "alltoallv in place (send)")?;
        self.check_counts(recv_counts, recv_displs, buf.len(), "alltoallv in place (recv)")?;
        let p = data_mut(buf);
        // SAFETY: in place; every block lies inside buf.
        check(unsafe {
            sys::weft_alltoallv(
                p,
                send_counts.as_ptr(),
                send_displs.as_ptr(),
                p,
                recv_counts.as_ptr(),
                recv_displs.as_ptr(),
                T::DTYPE.raw(),
                self.raw,
                ptr::null_mut(),
                req,
            )
        })
    }

    pub(crate) fn gather_raw<T: WeftType>(
        &self,
        send: &[T],
        recv: Option<&mut [T]>,
        root: usize,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let croot = self.check_root(root, "root")?;
        let recv_ptr = if self.rank == root {
            match recv {
                Some(r) if send.len().checked_mul(self.size) == Some(r.len()) => data_mut(r),
                Some(r) => {
                    return Err(Error::invalid(format!(
                        "gather: recv (at the root) has {} elements; expected size {} x send's {}",
                        r.len(),
                        self.size,
                        send.len()
                    )))
                }
                None => return Err(Error::invalid("gather: the root needs a receive buffer")),
            }
        } else {
            ptr::null_mut()
        };
        // SAFETY: recv (root) holds size * send.len() elements.
        check(unsafe {
            sys::weft_gather(data(send), recv_ptr, send.len(), T::DTYPE.raw(), croot, self.raw, ptr::null_mut(), req)
        })
    }

    pub(crate) fn gather_in_place_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        root: usize,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let croot = self.check_root(root, "root")?;
        let (send, recv, count) = if self.rank == root {
            let count = self.blocks(buf.len(), "gather (in place, at the root): buf")?;
            let base = data_mut(buf);
            (elem_at::<T>(base, root * count), base, count)
        } else {
            (data_mut(buf), ptr::null_mut(), buf.len())
        };
        // SAFETY: at the root sendbuf == recvbuf + root * count (in place); elsewhere a send.
        check(unsafe { sys::weft_gather(send, recv, count, T::DTYPE.raw(), croot, self.raw, ptr::null_mut(), req) })
    }

    pub(crate) fn scatter_raw<T: WeftType>(
        &self,
        send: Option<&[T]>,
        recv: &mut [T],
        root: usize,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let croot = self.check_root(root, "root")?;
        let send_ptr = if self.rank == root {
            match send {
                Some(s) if recv.len().checked_mul(self.size) == Some(s.len()) => data(s),
                Some(s) => {
                    return Err(Error::invalid(format!(
                        "scatter: send (at the root) has {} elements; expected size {} x recv's {}",
                        s.len(),
                        self.size,
                        recv.len()
                    )))
                }
                None => return Err(Error::invalid("scatter: the root needs a send buffer")),
            }
        } else {
            ptr::null()
        };
        // SAFETY: send (root) holds size * recv.len() elements.
        check(unsafe {
            sys::weft_scatter(
                send_ptr,
                data_mut(recv),
                recv.len(),
                T::DTYPE.raw(),
                croot,
                self.raw,
                ptr::null_mut(),
                req,
            )
        })
    }

    pub(crate) fn scatter_in_place_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        root: usize,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let croot = self.check_root(root, "root")?;
        let (send, recv, count) = if self.rank == root {
            let count = self.blocks(buf.len(), "scatter (in place, at the root): buf")?;
            let base = data_mut(buf);
            (base as *const c_void, elem_at::<T>(base, root * count), count)
        } else {
            (ptr::null(), data_mut(buf), buf.len())
        };
        // SAFETY: at the root recvbuf == sendbuf + root * count (in place); elsewhere a receive.
        check(unsafe { sys::weft_scatter(send, recv, count, T::DTYPE.raw(), croot, self.raw, ptr::null_mut(), req) })
    }

    pub(crate) fn barrier_raw(&self, req: *mut sys::weft_request_t) -> Result<()> {
        // SAFETY: self.raw is live.
        check(unsafe { sys::weft_barrier(self.raw, ptr::null_mut(), req) })
    }

    pub(crate) fn send_raw<T: WeftType>(&self, buf: &[T], peer: usize, req: *mut sys::weft_request_t) -> Result<()> {
        let peer = self.check_root(peer, "peer")?;
        // SAFETY: valid for buf.len() elements.
        check(unsafe { sys::weft_send(data(buf), buf.len(), T::DTYPE.raw(), peer, self.raw, ptr::null_mut(), req) })
    }

    pub(crate) fn recv_raw<T: WeftType>(
        &self,
        buf: &mut [T],
        peer: usize,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let peer = self.check_root(peer, "peer")?;
        // SAFETY: valid for buf.len() elements.
        check(unsafe { sys::weft_recv(data_mut(buf), buf.len(), T::DTYPE.raw(), peer, self.raw, ptr::null_mut(), req) })
    }

    pub(crate) fn p2p_batch_raw<'a>(
        &self,
        ops: impl IntoIterator<Item = P2POp<'a>>,
        req: *mut sys::weft_request_t,
    ) -> Result<()> {
        let mut raw = Vec::new();
        for (i, op) in ops.into_iter().enumerate() {
            let mut r = op.raw;
            r.peer = self.check_root(op.peer, &format!("ops[{i}].peer"))?;
            raw.push(r);
        }
        let base = if raw.is_empty() { ptr::null() } else { raw.as_ptr() };
        // SAFETY: every op's buffer is borrowed for 'a (mutably for receives) by its P2POp, which
        // this call consumed; the array is read during the call only.
        check(unsafe { sys::weft_p2p_batch(base, raw.len(), self.raw, ptr::null_mut(), req) })
    }
}

/// One operation of [`Comm::p2p_batch`] / [`Scope::p2p_batch`]: a send (the buffer is
/// borrowed shared) or a receive (borrowed mutably) for `'a`. The batch consumes its ops, so a
/// buffer is lent to one batch at a time.
pub struct P2POp<'a> {
    raw: sys::weft_p2p_op_t,
    peer: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> P2POp<'a> {
    /// Sends all of `buf` to rank `peer`.
    pub fn send<T: WeftType>(buf: &'a [T], peer: usize) -> Self {
        Self::new(sys::WEFT_P2P_SEND, data(buf) as *mut c_void, buf.len(), T::DTYPE.raw(), peer)
    }
    /// Receives from rank `peer` into all of `buf` (the sender's count must equal `buf.len()`).
    pub fn recv<T: WeftType>(buf: &'a mut [T], peer: usize) -> Self {
        Self::new(sys::WEFT_P2P_RECV, data_mut(buf), buf.len(), T::DTYPE.raw(), peer)
    }
    fn new(kind: sys::weft_p2p_kind_t, buf: *mut c_void, count: usize, dtype: sys::weft_dtype_t, peer: usize) -> Self {
        Self { raw: sys::weft_p2p_op_t { kind, buf, count, dtype, peer: -1 }, peer, _borrow: PhantomData }
    }
}

impl fmt::Debug for P2POp<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.raw.kind == sys::WEFT_P2P_SEND { "send" } else { "recv" };
        f.debug_struct("P2POp").field("kind", &kind).field("count", &self.raw.count).field("peer", &self.peer).finish()
    }
}

/// Blocking collectives. Lengths are checked before the library is called; the element type
/// picks the dtype. In-place forms take one `&mut` buffer.
impl Comm {
    /// Every rank gets the reduction of all ranks' `send` in `recv` (same length).
    pub fn allreduce<T: WeftType>(&self, send: &[T], recv: &mut [T], op: Op) -> Result<()> {
        self.allreduce_raw(send, recv, op, ptr::null_mut())
    }
    /// All-reduce of `buf` into itself.
    pub fn allreduce_in_place<T: WeftType>(&self, buf: &mut [T], op: Op) -> Result<()> {
        self.allreduce_in_place_raw(buf, op, ptr::null_mut())
    }
    /// `buf` at `root` is sent; the other ranks receive into theirs (same length everywhere).
    pub fn broadcast<T: WeftType>(&self, buf: &mut [T], root: usize) -> Result<()> {
        self.broadcast_raw(buf, root, ptr::null_mut())
    }
    /// The reduction lands in `recv` at `root` (required there, same length as `send`);
    /// other ranks may pass `None` (a buffer they pass is not used).
    pub fn reduce<T: WeftType>(&self, send: &[T], recv: Option<&mut [T]>, op: Op, root: usize) -> Result<()> {
        self.reduce_raw(send, recv, op, root, ptr::null_mut())
    }
    /// Reduce into `buf` at `root`; elsewhere `buf` is only read.
    pub fn reduce_in_place<T: WeftType>(&self, buf: &mut [T], op: Op, root: usize) -> Result<()> {
        self.reduce_in_place_raw(buf, op, root, ptr::null_mut())
    }
    /// `recv` (size x `send.len()`) gets rank i's `send` at block i.
    pub fn allgather<T: WeftType>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.allgather_raw(send, recv, ptr::null_mut())
    }
    /// `buf` has size blocks; this rank's block (at rank x len/size) is its contribution.
    pub fn allgather_in_place<T: WeftType>(&self, buf: &mut [T]) -> Result<()> {
        self.allgather_in_place_raw(buf, ptr::null_mut())
    }
    /// Rank i's `send` (`counts[i]` elements) lands at `displs[i]` of `recv` on every rank.
    pub fn allgatherv<T: WeftType>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        self.allgatherv_raw(send, recv, counts, displs, ptr::null_mut())
    }
    /// In place: this rank's contribution is already at `displs[rank]` of `buf`.
    pub fn allgatherv_in_place<T: WeftType>(&self, buf: &mut [T], counts: &[usize], displs: &[usize]) -> Result<()> {
        self.allgatherv_in_place_raw(buf, counts, displs, ptr::null_mut())
    }
    /// `send` has size blocks of `recv.len()`; rank i gets the reduction of block i.
    pub fn reduce_scatter<T: WeftType>(&self, send: &[T], recv: &mut [T], op: Op) -> Result<()> {
        self.reduce_scatter_raw(send, recv, op, ptr::null_mut())
    }
    /// In place: the result is this rank's block of `buf` (at rank x len/size); the other
    /// blocks are left unspecified.
    pub fn reduce_scatter_in_place<T: WeftType>(&self, buf: &mut [T], op: Op) -> Result<()> {
        self.reduce_scatter_in_place_raw(buf, op, ptr::null_mut())
    }
    /// Block j of `send` goes to rank j; block i of `recv` comes from rank i (equal lengths,
    /// a multiple of the size).
    pub fn alltoall<T: WeftType>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.alltoall_raw(send, recv, ptr::null_mut())
    }
    pub fn alltoall_in_place<T: WeftType>(&self, buf: &mut [T]) -> Result<()> {
        self.alltoall_in_place_raw(buf, ptr::null_mut())
    }
    /// `send_counts[j]` elements at `send_displs[j]` go to rank j; `recv_counts[i]` elements
    /// from rank i land at `recv_displs[i]`.
    pub fn alltoallv<T: WeftType>(
        &self,
        send: &[T],
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<()> {
        self.alltoallv_raw(send, send_counts, send_displs, recv, recv_counts, recv_displs, ptr::null_mut())
    }
    /// In-place all-to-all-v on one buffer.
    pub fn alltoallv_in_place<T: WeftType>(
        &self,
        buf: &mut [T],
        send_counts: &[usize],
        send_displs: &[usize],
        recv_counts: &[usize],
        recv_displs: &[usize],
    ) -> Result<()> {
        self.alltoallv_in_place_raw(buf, send_counts, send_displs, recv_counts, recv_displs, ptr::null_mut())
    }
    /// `recv` at `root` (size x `send.len()`) gets rank i's `send` at block i; others pass `None`.
    pub fn gather<T: WeftType>(&self, send: &[T], recv: Option<&mut [T]>, root: usize) -> Result<()> {
        self.gather_raw(send, recv, root, ptr::null_mut())
    }
    /// At `root`, `buf` holds size blocks with root's own contribution already in block
    /// `root`; elsewhere `buf` is the contribution.
    pub fn gather_in_place<T: WeftType>(&self, buf: &mut [T], root: usize) -> Result<()> {
        self.gather_in_place_raw(buf, root, ptr::null_mut())
    }
    /// Block i of `send` at `root` (size x `recv.len()`) goes to rank i's `recv`; others pass `None`.
    pub fn scatter<T: WeftType>(&self, send: Option<&[T]>, recv: &mut [T], root: usize) -> Result<()> {
        self.scatter_raw(send, recv, root, ptr::null_mut())
    }
    /// At `root`, `buf` holds size blocks and keeps block `root`; elsewhere `buf` receives.
    pub fn scatter_in_place<T: WeftType>(&self, buf: &mut [T], root: usize) -> Result<()> {
        self.scatter_in_place_raw(buf, root, ptr::null_mut())
    }
    pub fn barrier(&self) -> Result<()> {
        self.barrier_raw(ptr::null_mut())
    }
    /// Point-to-point; matches `recv` calls at `peer` in issue order (the counts must agree).
    pub fn send<T: WeftType>(&self, buf: &[T], peer: usize) -> Result<()> {
        self.send_raw(buf, peer, ptr::null_mut())
    }
    pub fn recv<T: WeftType>(&self, buf: &mut [T], peer: usize) -> Result<()> {
        self.recv_raw(buf, peer, ptr::null_mut())
    }
    /// Posts every op together (as NCCL's grouped send/recv, torch's `batch_isend_irecv`) and
    /// returns when all have completed. Matching with the peers' sends and receives (batched or
    /// not) is in issue order per pair and direction. Use it for any exchange in which a rank
    /// both sends and receives: on GPU memory through NCCL separate calls can deadlock.
    ///
    /// ```no_run
    /// # fn f(comm: &weft::Comm) -> weft::Result<()> {
    /// use weft::P2POp;
    /// let (right, left) = ((comm.rank() + 1) % comm.size(), (comm.rank() + comm.size() - 1) % comm.size());
    /// let out = vec![comm.rank() as f32; 8];
    /// let mut inbox = vec![0f32; 8];
    /// comm.p2p_batch([P2POp::send(&out, right), P2POp::recv(&mut inbox, left)])
    /// # }
    /// ```
    pub fn p2p_batch<'a>(&self, ops: impl IntoIterator<Item = P2POp<'a>>) -> Result<()> {
        self.p2p_batch_raw(ops, ptr::null_mut())
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: self.raw is live and ours. Errors cannot be reported from drop; use destroy().
        unsafe { sys::weft_comm_destroy(self.raw) };
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm").field("rank", &self.rank).field("size", &self.size).finish()
    }
}

/// Aborts a communicator from any thread (`weft_comm_abort`), e.g. a watchdog while another
/// thread is blocked in a collective. Borrows the communicator, so it cannot outlive it.
#[derive(Clone, Copy)]
pub struct AbortHandle<'a> {
    raw: sys::weft_comm_t,
    _comm: PhantomData<&'a Comm>,
}

// SAFETY: weft.h allows weft_comm_abort from any thread at any time; the borrow keeps the
// communicator alive.
unsafe impl Send for AbortHandle<'_> {}
unsafe impl Sync for AbortHandle<'_> {}

impl AbortHandle<'_> {
    pub fn abort(&self) -> Result<()> {
        // SAFETY: the communicator is alive for 'a.
        check(unsafe { sys::weft_comm_abort(self.raw) })
    }
}
