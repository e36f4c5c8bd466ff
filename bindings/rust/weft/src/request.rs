//! Asynchronous operations: [`Scope`] and [`Request`].
//!
//! A request lends its buffers to the library until it completes. Tying that to a plain
//! borrow is not enough in Rust: `std::mem::forget(request)` would end the borrow while the
//! library still writes into the buffer. So requests are started inside
//! [`Comm::scope`](crate::Comm::scope), which waits for every request it started before it
//! returns (even when a request was forgotten, or on a panic), in the manner of
//! `std::thread::scope`. Inside the scope a [`Request<'scope>`] holds the buffers' borrows;
//! `wait()` / `test()` report its outcome, and dropping it waits.
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ptr;

use weft_sys as sys;

use crate::comm::{Comm, P2POp};
use crate::error::{check, Error, Result};
use crate::sharded::ShardedTensor;
use crate::types::{Op, WeftType};

/// The raw requests a scope started; `null` once waited for. Waits for the rest when dropped.
pub(crate) struct Pending {
    slots: RefCell<Vec<sys::weft_request_t>>,
}

impl Pending {
    fn take(&self, slot: usize) -> sys::weft_request_t {
        std::mem::replace(&mut self.slots.borrow_mut()[slot], ptr::null_mut())
    }
    fn get(&self, slot: usize) -> sys::weft_request_t {
        self.slots.borrow()[slot]
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        for raw in self.slots.get_mut().drain(..) {
            if !raw.is_null() {
                // SAFETY: raw is a live request of ours; freeing waits for it first.
                unsafe { sys::weft_request_free(raw) };
            }
        }
    }
}

/// Starts asynchronous operations on a communicator; made by
/// [`Comm::scope`](crate::Comm::scope). The methods mirror `Comm`'s blocking ones and return
/// a [`Request`]. Buffers are borrowed for the whole scope (`'scope`), so they must be
/// declared outside it and each can be lent once per scope; after the scope they are free.
/// Operations on one communicator complete in issue order; blocking calls on the same
/// communicator may be mixed in.
///
/// ```no_run
/// # fn main() -> weft::Result<()> {
/// let comm = weft::Comm::from_env()?;
/// let mut grads = vec![1.0f32; 1024];
/// let mut stats = [comm.rank() as u64];
/// comm.scope(|s| {
///     let r1 = s.allreduce_in_place(&mut grads, weft::Op::Sum)?;
///     let r2 = s.allreduce_in_place(&mut stats, weft::Op::Max)?;
///     // ... compute while the reductions run ...
///     r1.wait()?;
///     r2.wait()
/// })?;
/// println!("{} {}", grads[0], stats[0]);
/// # Ok(()) }
/// ```
///
/// A buffer declared inside the scope cannot be lent (it would not outlive the scope; error
/// E0597):
///
/// ```compile_fail
/// # fn f(comm: &weft::Comm) -> weft::Result<()> {
/// comm.scope(|s| {
///     let mut local = vec![0u32; 4];
///     let r = s.allreduce_in_place(&mut local, weft::Op::Sum)?;
///     r.wait()
/// })
/// # }
/// ```
///
/// a lent buffer cannot be read until the scope has ended (error E0502):
///
/// ```compile_fail
/// # fn f(comm: &weft::Comm) -> weft::Result<()> {
/// let mut buf = vec![0u32; 4];
/// comm.scope(|s| {
///     let r = s.allreduce_in_place(&mut buf, weft::Op::Sum)?;
///     println!("{}", buf[0]);
///     r.wait()
/// })
/// # }
/// ```
///
/// and a request cannot leave its scope:
///
/// ```compile_fail
/// # fn f(comm: &weft::Comm) {
/// let mut buf = vec![0u32; 4];
/// let escaped = comm.scope(|s| s.allreduce_in_place(&mut buf, weft::Op::Sum));
/// # }
/// ```
pub struct Scope<'scope, 'env: 'scope> {
    comm: &'env Comm,
    pending: Pending,
    _scope: PhantomData<&'scope mut &'scope ()>,
}

/// One asynchronous operation (`weft_request_t`), holding its buffers' borrows.
/// `wait()` returns its outcome; dropping it waits too, discarding the outcome.
#[must_use = "a request should be waited for to learn whether it succeeded"]
pub struct Request<'scope> {
    pending: &'scope Pending,
    slot: usize,
}

impl Request<'_> {
    /// `weft_wait`, then `weft_request_free`: blocks until the operation completes (or its
    /// deadline expires) and returns its outcome.
    pub fn wait(self) -> Result<()> {
        let raw = self.pending.take(self.slot);
        std::mem::forget(self);
        // SAFETY: raw is a live request of ours, freed exactly once below.
        let waited = check(unsafe { sys::weft_wait(raw) });
        let freed = check(unsafe { sys::weft_request_free(raw) });
        waited.and(freed)
    }

    /// `weft_test`: `Ok(true)` once complete (then `wait` returns at once), `Ok(false)` while
    /// pending, or the operation's error.
    pub fn test(&mut self) -> Result<bool> {
        let raw = self.pending.get(self.slot);
        let mut done = 0;
        // SAFETY: raw is a live request of ours; done a valid out-pointer.
        match unsafe { sys::weft_test(raw, &mut done) } {
            sys::WEFT_OK => Ok(true),
            sys::WEFT_IN_PROGRESS => Ok(false),
            st => Err(Error::from_failed_call(st)),
        }
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        let raw = self.pending.take(self.slot);
        // SAFETY: raw is a live request of ours (freeing waits for it).
        unsafe { sys::weft_request_free(raw) };
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    pub(crate) fn new(comm: &'env Comm) -> Scope<'scope, 'env> {
        Scope { comm, pending: Pending { slots: RefCell::new(Vec::new()) }, _scope: PhantomData }
    }

    /// The communicator (for blocking calls inside the scope).
    pub fn comm(&self) -> &'env Comm {
        self.comm
    }

    pub(crate) fn start(
        &'scope self,
        f: impl FnOnce(*mut sys::weft_request_t) -> Result<()>,
    ) -> Result<Request<'scope>> {
        let mut raw: sys::weft_request_t = ptr::null_mut();
        f(&mut raw)?;
        let mut slots = self.pending.slots.borrow_mut();
        slots.push(raw);
        Ok(Request { pending: &self.pending, slot: slots.len() - 1 })
    }

    /// Asynchronous [`Comm::allreduce`].
    pub fn allreduce<T: WeftType>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: Op,
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.allreduce_raw(send, recv, op, r))
    }
    /// Asynchronous [`Comm::allreduce_in_place`].
    pub fn allreduce_in_place<T: WeftType>(&'scope self, buf: &'scope mut [T], op: Op) -> Result<Request<'scope>> {
        self.start(|r| self.comm.allreduce_in_place_raw(buf, op, r))
    }
    /// Asynchronous [`Comm::broadcast`].
    pub fn broadcast<T: WeftType>(&'scope self, buf: &'scope mut [T], root: usize) -> Result<Request<'scope>> {
        self.start(|r| self.comm.broadcast_raw(buf, root, r))
    }
    /// Asynchronous [`Comm::reduce`].
    pub fn reduce<T: WeftType>(
        &'scope self,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        op: Op,
        root: usize,
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.reduce_raw(send, recv, op, root, r))
    }
    /// Asynchronous [`Comm::reduce_in_place`].
    pub fn reduce_in_place<T: WeftType>(
        &'scope self,
        buf: &'scope mut [T],
        op: Op,
        root: usize,
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.reduce_in_place_raw(buf, op, root, r))
    }
    /// Asynchronous [`Comm::allgather`].
    pub fn allgather<T: WeftType>(&'scope self, send: &'scope [T], recv: &'scope mut [T]) -> Result<Request<'scope>> {
        self.start(|r| self.comm.allgather_raw(send, recv, r))
    }
    /// Asynchronous [`Comm::allgather_in_place`].
    pub fn allgather_in_place<T: WeftType>(&'scope self, buf: &'scope mut [T]) -> Result<Request<'scope>> {
        self.start(|r| self.comm.allgather_in_place_raw(buf, r))
    }
    /// Asynchronous [`Comm::allgatherv`].
    pub fn allgatherv<T: WeftType>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        counts: &'scope [usize],
        displs: &'scope [usize],
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.allgatherv_raw(send, recv, counts, displs, r))
    }
    /// Asynchronous [`Comm::allgatherv_in_place`].
    pub fn allgatherv_in_place<T: WeftType>(
        &'scope self,
        buf: &'scope mut [T],
        counts: &'scope [usize],
        displs: &'scope [usize],
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.allgatherv_in_place_raw(buf, counts, displs, r))
    }
    /// Asynchronous [`Comm::reduce_scatter`].
    pub fn reduce_scatter<T: WeftType>(
        &'scope self,
        send: &'scope [T],
        recv: &'scope mut [T],
        op: Op,
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.reduce_scatter_raw(send, recv, op, r))
    }
    /// Asynchronous [`Comm::reduce_scatter_in_place`].
    pub fn reduce_scatter_in_place<T: WeftType>(&'scope self, buf: &'scope mut [T], op: Op) -> Result<Request<'scope>> {
        self.start(|r| self.comm.reduce_scatter_in_place_raw(buf, op, r))
    }
    /// Asynchronous [`Comm::alltoall`].
    pub fn alltoall<T: WeftType>(&'scope self, send: &'scope [T], recv: &'scope mut [T]) -> Result<Request<'scope>> {
        self.start(|r| self.comm.alltoall_raw(send, recv, r))
    }
    /// Asynchronous [`Comm::alltoall_in_place`].
    pub fn alltoall_in_place<T: WeftType>(&'scope self, buf: &'scope mut [T]) -> Result<Request<'scope>> {
        self.start(|r| self.comm.alltoall_in_place_raw(buf, r))
    }
    #[allow(clippy::too_many_arguments)]
    /// Asynchronous [`Comm::alltoallv`].
    pub fn alltoallv<T: WeftType>(
        &'scope self,
        send: &'scope [T],
        send_counts: &'scope [usize],
        send_displs: &'scope [usize],
        recv: &'scope mut [T],
        recv_counts: &'scope [usize],
        recv_displs: &'scope [usize],
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.alltoallv_raw(send, send_counts, send_displs, recv, recv_counts, recv_displs, r))
    }
    /// Asynchronous [`Comm::alltoallv_in_place`].
    pub fn alltoallv_in_place<T: WeftType>(
        &'scope self,
        buf: &'scope mut [T],
        send_counts: &'scope [usize],
        send_displs: &'scope [usize],
        recv_counts: &'scope [usize],
        recv_displs: &'scope [usize],
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.alltoallv_in_place_raw(buf, send_counts, send_displs, recv_counts, recv_displs, r))
    }
    /// Asynchronous [`Comm::gather`].
    pub fn gather<T: WeftType>(
        &'scope self,
        send: &'scope [T],
        recv: Option<&'scope mut [T]>,
        root: usize,
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.gather_raw(send, recv, root, r))
    }
    /// Asynchronous [`Comm::gather_in_place`].
    pub fn gather_in_place<T: WeftType>(&'scope self, buf: &'scope mut [T], root: usize) -> Result<Request<'scope>> {
        self.start(|r| self.comm.gather_in_place_raw(buf, root, r))
    }
    /// Asynchronous [`Comm::scatter`].
    pub fn scatter<T: WeftType>(
        &'scope self,
        send: Option<&'scope [T]>,
        recv: &'scope mut [T],
        root: usize,
    ) -> Result<Request<'scope>> {
        self.start(|r| self.comm.scatter_raw(send, recv, root, r))
    }
    /// Asynchronous [`Comm::scatter_in_place`].
    pub fn scatter_in_place<T: WeftType>(&'scope self, buf: &'scope mut [T], root: usize) -> Result<Request<'scope>> {
        self.start(|r| self.comm.scatter_in_place_raw(buf, root, r))
    }
    /// Asynchronous [`Comm::barrier`].
    pub fn barrier(&'scope self) -> Result<Request<'scope>> {
        self.start(|r| self.comm.barrier_raw(r))
    }
    /// Asynchronous [`Comm::send`].
    pub fn send<T: WeftType>(&'scope self, buf: &'scope [T], peer: usize) -> Result<Request<'scope>> {
        self.start(|r| self.comm.send_raw(buf, peer, r))
    }
    /// Asynchronous [`Comm::recv`].
    pub fn recv<T: WeftType>(&'scope self, buf: &'scope mut [T], peer: usize) -> Result<Request<'scope>> {
        self.start(|r| self.comm.recv_raw(buf, peer, r))
    }
    /// [`Comm::p2p_batch`] as one request; the ops' buffers are borrowed for the scope.
    pub fn p2p_batch(&'scope self, ops: impl IntoIterator<Item = P2POp<'scope>>) -> Result<Request<'scope>> {
        self.start(|r| self.comm.p2p_batch_raw(ops, r))
    }
    /// [`redistribute`](crate::redistribute) as one request: `src` is borrowed shared and `dst`
    /// mutably for the scope. It communicates over the tensors' meshes (not over this scope's
    /// communicator, which only bounds the request's life): start it in any communicator's scope,
    /// e.g. the one the meshes were made from, and issue nothing else on those meshes meanwhile.
    pub fn redistribute(
        &'scope self,
        src: &'scope ShardedTensor<'_>,
        dst: &'scope mut ShardedTensor<'_>,
    ) -> Result<Request<'scope>> {
        self.start(|r| crate::sharded::redistribute_raw(src, dst, r))
    }
}
