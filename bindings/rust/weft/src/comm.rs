//! Communicators: their configuration, creation, queries and lifetime. The operations are in
//! the submodules: [`collectives`] (blocking collectives and their `*_raw` forms) and [`p2p`]
//! (send, receive, [`P2POp`] batches).
use std::cell::Cell;
use std::ffi::{c_int, c_void, CString};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::time::Duration;

use weft_sys as sys;

use crate::error::{check, Error, Result};
use crate::request::Scope;
use crate::types::{to_c_int, Transport};

mod collectives;
mod p2p;

pub use p2p::P2POp;

/// Communicator options (`weft_comm_config_t`). `Config::default()` is `WEFT_COMM_CONFIG_INIT`.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Deadline for every blocking wait. `None`: `WEFT_TIMEOUT` (seconds) or 300 s.
    /// Durations are rounded up to whole milliseconds.
    pub timeout: Option<Duration>,
    /// The host transport preference (`WEFT_TRANSPORT_*`).
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

    /// The id's bytes, to send to the other ranks by any means (a file, MPI, a socket).
    pub fn to_bytes(&self) -> [u8; sys::WEFT_UNIQUE_ID_BYTES] {
        self.0.internal.map(|c| c as u8)
    }

    /// An id from bytes made by [`UniqueId::to_bytes`] on the rank that created it.
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

    /// `weft_comm_shrink`, collective over the survivors: after ranks of this communicator
    /// died (an operation returned `Status::Remote`, say), the survivors agree on who is gone
    /// and get a new communicator without them, with the same membership on every survivor, in
    /// the survivors' order. `self` may be broken and is still dropped as usual; on a healthy
    /// communicator this equals [`Comm::dup`]. A rank the survivors took for dead gets an error.
    /// If a rank dies during the shrink, the new communicator may still hold it: its first
    /// operation fails, and the survivors shrink again.
    pub fn shrink(&self) -> Result<Comm> {
        let mut raw: sys::weft_comm_t = ptr::null_mut();
        // SAFETY: self.raw is live; raw a valid out-pointer.
        check(unsafe { sys::weft_comm_shrink(self.raw, &mut raw) })?;
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
    /// Aborts this communicator's pending and future operations (they fail with
    /// [`Status::Aborted`](crate::Status::Aborted)).
    pub fn abort(&self) -> Result<()> {
        // SAFETY: the communicator is alive for 'a.
        check(unsafe { sys::weft_comm_abort(self.raw) })
    }
}
