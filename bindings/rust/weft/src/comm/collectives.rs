//! The collectives as `Comm` methods: the `*_raw` forms (used by the blocking methods here and
//! by `Scope`) and the blocking forms.
use std::ffi::c_void;
use std::ptr;

use weft_sys as sys;

use super::{data, data_mut, elem_at, Comm};
use crate::error::{check, Error, Result};
use crate::types::{Op, WeftType};

impl Comm {
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
    /// All-to-all in place: block j of `buf` goes to rank j and is replaced by rank j's block.
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
    /// Returns once every rank of the communicator has entered the barrier.
    pub fn barrier(&self) -> Result<()> {
        self.barrier_raw(ptr::null_mut())
    }
}
