//! Point-to-point operations as `Comm` methods (send, receive, batches of [`P2POp`]): the
//! `*_raw` forms (used by the blocking methods here and by `Scope`) and the blocking forms.
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ptr;

use weft_sys as sys;

use super::{data, data_mut, Comm};
use crate::error::{check, Result};
use crate::types::WeftType;

// Each `*_raw` checks its arguments, then calls C with `req` (null = blocking), as in
// `collectives`.
impl Comm {
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

/// One operation of [`Comm::p2p_batch`] / [`Scope::p2p_batch`](crate::Scope::p2p_batch): a send (the buffer is
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

/// Blocking point-to-point operations. The element type picks the dtype.
impl Comm {
    /// Point-to-point; matches `recv` calls at `peer` in issue order (the counts must agree).
    pub fn send<T: WeftType>(&self, buf: &[T], peer: usize) -> Result<()> {
        self.send_raw(buf, peer, ptr::null_mut())
    }
    /// Receives `buf.len()` elements from rank `peer` (matched in order with its [`Comm::send`]).
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
