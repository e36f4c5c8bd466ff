package weft

// #include <weft/weft.h>
import "C"

import "unsafe"

// Blocking collectives and point-to-point. Lengths are checked in Go before the library is
// called; the element type picks the dtype. The slices are passed to C directly and the call
// returns when the operation is complete, so no Go pointer outlives the call.

func dt[T Element]() C.weft_dtype_t { return C.weft_dtype_t(DtypeOf[T]()) }

// ptr is the address of s's first element, nil for an empty slice.
func ptr[T Element](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// at is the address of s[off] for a block of count elements (nil when count is 0).
func at[T Element](s []T, off, count int) unsafe.Pointer {
	if count == 0 {
		return nil
	}
	return unsafe.Pointer(&s[off])
}

func sz(n int) C.size_t { return C.size_t(n) }

func sizeTs(v []int) []C.size_t {
	out := make([]C.size_t, len(v))
	for i, x := range v {
		out[i] = C.size_t(x)
	}
	return out
}

func (c *Comm) checkRoot(root int, what string) error {
	if root < 0 || root >= c.size {
		return newError(StatusInvalidArgument, "%s = %d; expected 0..%d (the communicator's size)", what, root, c.size)
	}
	return nil
}

func (c *Comm) blocks(n int, what string) (int, error) {
	if n%c.size != 0 {
		return 0, newError(StatusInvalidArgument, "%s has %d elements, not a multiple of the communicator's size %d", what, n, c.size)
	}
	return n / c.size, nil
}

func (c *Comm) checkCounts(counts, displs []int, bufLen int, what string) error {
	if len(counts) != c.size || len(displs) != c.size {
		return newError(StatusInvalidArgument, "%s: counts has %d entries and displacements %d; expected the communicator's size %d",
			what, len(counts), len(displs), c.size)
	}
	for i := range counts {
		if counts[i] < 0 || displs[i] < 0 || counts[i] > bufLen || displs[i] > bufLen-counts[i] {
			return newError(StatusInvalidArgument, "%s: block %d (displacement %d, count %d) does not fit the buffer of %d elements",
				what, i, displs[i], counts[i], bufLen)
		}
	}
	return nil
}

func sameLen(a, b int, what string) error {
	if a != b {
		return newError(StatusInvalidArgument, "%s: send has %d elements, recv %d; they must match", what, a, b)
	}
	return nil
}

// Allreduce: every rank gets the reduction of all ranks' send in recv (same length).
func Allreduce[T Element](c *Comm, send, recv []T, op Op) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := sameLen(len(send), len(recv), "Allreduce"); err != nil {
		return err
	}
	return call(func() C.weft_status_t {
		return C.weft_allreduce(ptr(send), ptr(recv), sz(len(send)), dt[T](), C.weft_op_t(op), c.h, nil, nil)
	})
}

// AllreduceInPlace all-reduces buf into itself.
func AllreduceInPlace[T Element](c *Comm, buf []T, op Op) error {
	if err := c.open(); err != nil {
		return err
	}
	p := ptr(buf)
	return call(func() C.weft_status_t {
		return C.weft_allreduce(p, p, sz(len(buf)), dt[T](), C.weft_op_t(op), c.h, nil, nil)
	})
}

// Broadcast: buf at root is sent; the other ranks receive into theirs (same length everywhere).
func Broadcast[T Element](c *Comm, buf []T, root int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return err
	}
	return call(func() C.weft_status_t {
		return C.weft_broadcast(ptr(buf), sz(len(buf)), dt[T](), C.int(root), c.h, nil, nil)
	})
}

func (c *Comm) rootRecv(recvLen, want int, root int, what string) error {
	if c.rank == root && recvLen != want {
		return newError(StatusInvalidArgument, "%s: recv at the root has %d elements; expected %d", what, recvLen, want)
	}
	return nil
}

// Reduce: the reduction lands in recv at root (same length as send); recv is not used
// elsewhere (nil is fine).
func Reduce[T Element](c *Comm, send, recv []T, op Op, root int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return err
	}
	if err := c.rootRecv(len(recv), len(send), root, "Reduce"); err != nil {
		return err
	}
	if c.rank != root {
		recv = nil
	}
	return call(func() C.weft_status_t {
		return C.weft_reduce(ptr(send), ptr(recv), sz(len(send)), dt[T](), C.weft_op_t(op), C.int(root), c.h, nil, nil)
	})
}

// ReduceInPlace reduces into buf at root; elsewhere buf is only read.
func ReduceInPlace[T Element](c *Comm, buf []T, op Op, root int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return err
	}
	p := ptr(buf)
	return call(func() C.weft_status_t {
		return C.weft_reduce(p, p, sz(len(buf)), dt[T](), C.weft_op_t(op), C.int(root), c.h, nil, nil)
	})
}

// Allgather: recv (size x len(send)) gets rank i's send at block i.
func Allgather[T Element](c *Comm, send, recv []T) error {
	if err := c.open(); err != nil {
		return err
	}
	if len(recv) != len(send)*c.size {
		return newError(StatusInvalidArgument, "Allgather: recv has %d elements; expected size %d x send's %d", len(recv), c.size, len(send))
	}
	return call(func() C.weft_status_t {
		return C.weft_allgather(ptr(send), ptr(recv), sz(len(send)), dt[T](), c.h, nil, nil)
	})
}

// AllgatherInPlace: buf has size blocks; this rank's block (at rank x len/size) is its
// contribution.
func AllgatherInPlace[T Element](c *Comm, buf []T) error {
	if err := c.open(); err != nil {
		return err
	}
	count, err := c.blocks(len(buf), "AllgatherInPlace: buf")
	if err != nil {
		return err
	}
	return call(func() C.weft_status_t {
		return C.weft_allgather(at(buf, c.rank*count, count), ptr(buf), sz(count), dt[T](), c.h, nil, nil)
	})
}

// Allgatherv: rank i's send (counts[i] elements) lands at displs[i] of recv on every rank.
func Allgatherv[T Element](c *Comm, send, recv []T, counts, displs []int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkAllgatherv(len(send), len(recv), counts, displs); err != nil {
		return err
	}
	cc, cd := sizeTs(counts), sizeTs(displs)
	return call(func() C.weft_status_t {
		return C.weft_allgatherv(ptr(send), sz(len(send)), ptr(recv), &cc[0], &cd[0], dt[T](), c.h, nil, nil)
	})
}

func (c *Comm) checkAllgatherv(sendLen, recvLen int, counts, displs []int) error {
	if err := c.checkCounts(counts, displs, recvLen, "Allgatherv"); err != nil {
		return err
	}
	if counts[c.rank] != sendLen {
		return newError(StatusInvalidArgument, "Allgatherv: send has %d elements but counts[%d] = %d", sendLen, c.rank, counts[c.rank])
	}
	return nil
}

// AllgathervInPlace: this rank's contribution is already at displs[rank] of buf.
func AllgathervInPlace[T Element](c *Comm, buf []T, counts, displs []int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkCounts(counts, displs, len(buf), "AllgathervInPlace"); err != nil {
		return err
	}
	cc, cd := sizeTs(counts), sizeTs(displs)
	n := counts[c.rank]
	return call(func() C.weft_status_t {
		return C.weft_allgatherv(at(buf, displs[c.rank], n), sz(n), ptr(buf), &cc[0], &cd[0], dt[T](), c.h, nil, nil)
	})
}

// ReduceScatter: send has size blocks of len(recv); rank i gets the reduction of block i.
func ReduceScatter[T Element](c *Comm, send, recv []T, op Op) error {
	if err := c.open(); err != nil {
		return err
	}
	if len(send) != len(recv)*c.size {
		return newError(StatusInvalidArgument, "ReduceScatter: send has %d elements; expected size %d x recv's %d", len(send), c.size, len(recv))
	}
	return call(func() C.weft_status_t {
		return C.weft_reduce_scatter(ptr(send), ptr(recv), sz(len(recv)), dt[T](), C.weft_op_t(op), c.h, nil, nil)
	})
}

// ReduceScatterInPlace: the result is this rank's block of buf (at rank x len/size); the
// other blocks are left unspecified.
func ReduceScatterInPlace[T Element](c *Comm, buf []T, op Op) error {
	if err := c.open(); err != nil {
		return err
	}
	count, err := c.blocks(len(buf), "ReduceScatterInPlace: buf")
	if err != nil {
		return err
	}
	return call(func() C.weft_status_t {
		return C.weft_reduce_scatter(ptr(buf), at(buf, c.rank*count, count), sz(count), dt[T](), C.weft_op_t(op), c.h, nil, nil)
	})
}

// Alltoall: block j of send goes to rank j; block i of recv comes from rank i (equal lengths,
// a multiple of the size).
func Alltoall[T Element](c *Comm, send, recv []T) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := sameLen(len(send), len(recv), "Alltoall"); err != nil {
		return err
	}
	count, err := c.blocks(len(send), "Alltoall: send")
	if err != nil {
		return err
	}
	return call(func() C.weft_status_t {
		return C.weft_alltoall(ptr(send), ptr(recv), sz(count), dt[T](), c.h, nil, nil)
	})
}

// AlltoallInPlace is Alltoall on one buffer.
func AlltoallInPlace[T Element](c *Comm, buf []T) error {
	if err := c.open(); err != nil {
		return err
	}
	count, err := c.blocks(len(buf), "AlltoallInPlace: buf")
	if err != nil {
		return err
	}
	p := ptr(buf)
	return call(func() C.weft_status_t {
		return C.weft_alltoall(p, p, sz(count), dt[T](), c.h, nil, nil)
	})
}

// Alltoallv: sendCounts[j] elements at sendDispls[j] go to rank j; recvCounts[i] elements from
// rank i land at recvDispls[i].
func Alltoallv[T Element](c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkCounts(sendCounts, sendDispls, len(send), "Alltoallv (send)"); err != nil {
		return err
	}
	if err := c.checkCounts(recvCounts, recvDispls, len(recv), "Alltoallv (recv)"); err != nil {
		return err
	}
	sc, sd, rc, rd := sizeTs(sendCounts), sizeTs(sendDispls), sizeTs(recvCounts), sizeTs(recvDispls)
	return call(func() C.weft_status_t {
		return C.weft_alltoallv(ptr(send), &sc[0], &sd[0], ptr(recv), &rc[0], &rd[0], dt[T](), c.h, nil, nil)
	})
}

// AlltoallvInPlace is Alltoallv on one buffer.
func AlltoallvInPlace[T Element](c *Comm, buf []T, sendCounts, sendDispls, recvCounts, recvDispls []int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkCounts(sendCounts, sendDispls, len(buf), "AlltoallvInPlace (send)"); err != nil {
		return err
	}
	if err := c.checkCounts(recvCounts, recvDispls, len(buf), "AlltoallvInPlace (recv)"); err != nil {
		return err
	}
	sc, sd, rc, rd := sizeTs(sendCounts), sizeTs(sendDispls), sizeTs(recvCounts), sizeTs(recvDispls)
	p := ptr(buf)
	return call(func() C.weft_status_t {
		return C.weft_alltoallv(p, &sc[0], &sd[0], p, &rc[0], &rd[0], dt[T](), c.h, nil, nil)
	})
}

// Gather: recv at root (size x len(send)) gets rank i's send at block i; recv is not used
// elsewhere (nil is fine).
func Gather[T Element](c *Comm, send, recv []T, root int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return err
	}
	if err := c.rootRecv(len(recv), len(send)*c.size, root, "Gather"); err != nil {
		return err
	}
	if c.rank != root {
		recv = nil
	}
	return call(func() C.weft_status_t {
		return C.weft_gather(ptr(send), ptr(recv), sz(len(send)), dt[T](), C.int(root), c.h, nil, nil)
	})
}

// GatherInPlace: at root buf holds size blocks with root's contribution already in block
// root; elsewhere buf is the contribution.
func GatherInPlace[T Element](c *Comm, buf []T, root int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return err
	}
	send, recv, count := ptr(buf), unsafe.Pointer(nil), len(buf)
	if c.rank == root {
		var err error
		if count, err = c.blocks(len(buf), "GatherInPlace (at the root): buf"); err != nil {
			return err
		}
		send, recv = at(buf, root*count, count), ptr(buf)
	}
	return call(func() C.weft_status_t {
		return C.weft_gather(send, recv, sz(count), dt[T](), C.int(root), c.h, nil, nil)
	})
}

// Scatter: block i of send at root (size x len(recv)) goes to rank i's recv; send is not used
// elsewhere (nil is fine).
func Scatter[T Element](c *Comm, send, recv []T, root int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return err
	}
	if c.rank == root && len(send) != len(recv)*c.size {
		return newError(StatusInvalidArgument, "Scatter: send at the root has %d elements; expected size %d x recv's %d", len(send), c.size, len(recv))
	}
	if c.rank != root {
		send = nil
	}
	return call(func() C.weft_status_t {
		return C.weft_scatter(ptr(send), ptr(recv), sz(len(recv)), dt[T](), C.int(root), c.h, nil, nil)
	})
}

// ScatterInPlace: at root buf holds size blocks and keeps block root; elsewhere buf receives.
func ScatterInPlace[T Element](c *Comm, buf []T, root int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return err
	}
	send, recv, count := unsafe.Pointer(nil), ptr(buf), len(buf)
	if c.rank == root {
		var err error
		if count, err = c.blocks(len(buf), "ScatterInPlace (at the root): buf"); err != nil {
			return err
		}
		send, recv = ptr(buf), at(buf, root*count, count)
	}
	return call(func() C.weft_status_t {
		return C.weft_scatter(send, recv, sz(count), dt[T](), C.int(root), c.h, nil, nil)
	})
}

// Barrier blocks until every rank has entered it.
func (c *Comm) Barrier() error {
	if err := c.open(); err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_barrier(c.h, nil, nil) })
}

// Send sends buf to peer; it matches Recv calls at peer in issue order (counts must agree).
func Send[T Element](c *Comm, buf []T, peer int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkRoot(peer, "peer"); err != nil {
		return err
	}
	return call(func() C.weft_status_t {
		return C.weft_send(ptr(buf), sz(len(buf)), dt[T](), C.int(peer), c.h, nil, nil)
	})
}

// Recv receives len(buf) elements from peer.
func Recv[T Element](c *Comm, buf []T, peer int) error {
	if err := c.open(); err != nil {
		return err
	}
	if err := c.checkRoot(peer, "peer"); err != nil {
		return err
	}
	return call(func() C.weft_status_t {
		return C.weft_recv(ptr(buf), sz(len(buf)), dt[T](), C.int(peer), c.h, nil, nil)
	})
}
