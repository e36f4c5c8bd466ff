package weft

/*
#include <stdlib.h>
#include <weft/weft.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Asynchronous operations. cgo forbids C from keeping a Go pointer after a call returns, so
// an asynchronous operation never sees the Go slices: its inputs are copied into C.malloc'ed
// staging buffers when it starts, it runs on those, and Wait (or the Test that reports
// completion) copies the outputs into the Go slices and frees the staging memory. Until then
// the Go slices are not touched: results appear in them only after Wait.
//
// Every Request must be waited for (Wait, or Test until done); an abandoned Request keeps its
// staging memory and its library request. After a failed operation the staging memory is
// deliberately not freed (the transport might still hold it).

type staging struct {
	mem  []unsafe.Pointer
	back []func()
}

func (s *staging) alloc(bytes uintptr) unsafe.Pointer {
	if bytes == 0 {
		return nil
	}
	p := C.malloc(C.size_t(bytes))
	if p == nil {
		panic("weft: C.malloc failed")
	}
	s.mem = append(s.mem, p)
	return p
}

// cslice views n elements of C memory as a Go slice (a view of C memory, which Go may index
// but must not keep past free).
func cslice[T Element](p unsafe.Pointer, n int) []T {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(p), n)
}

// stageIn copies src into C memory.
func stageIn[T Element](s *staging, src []T) unsafe.Pointer {
	var z T
	p := s.alloc(uintptr(len(src)) * unsafe.Sizeof(z))
	copy(cslice[T](p, len(src)), src)
	return p
}

// stageOut allocates C memory for dst, copied into dst on completion.
func stageOut[T Element](s *staging, dst []T) unsafe.Pointer {
	var z T
	p := s.alloc(uintptr(len(dst)) * unsafe.Sizeof(z))
	s.back = append(s.back, func() { copy(dst, cslice[T](p, len(dst))) })
	return p
}

// stageInOut copies buf in now and back on completion.
func stageInOut[T Element](s *staging, buf []T) unsafe.Pointer {
	p := stageIn(s, buf)
	s.back = append(s.back, func() { copy(buf, cslice[T](p, len(buf))) })
	return p
}

func stageCounts(s *staging, v []int) *C.size_t {
	p := s.alloc(uintptr(len(v)) * C.sizeof_size_t)
	dst := unsafe.Slice((*C.size_t)(p), len(v))
	for i, x := range v {
		dst[i] = C.size_t(x)
	}
	return (*C.size_t)(p)
}

func (s *staging) free() {
	for _, p := range s.mem {
		C.free(p)
	}
	s.mem, s.back = nil, nil
}

// Request is an asynchronous operation (weft_request_t) with its staging memory.
type Request struct {
	h    C.weft_request_t
	st   *staging
	done bool
	err  error
}

func (c *Comm) start(s *staging, f func(req *C.weft_request_t) C.weft_status_t) (*Request, error) {
	var h C.weft_request_t
	if err := call(func() C.weft_status_t { return f(&h) }); err != nil {
		s.free() // rejected before anything started
		return nil, err
	}
	return &Request{h: h, st: s}, nil
}

func (r *Request) finish(err error) error {
	r.done, r.err = true, err
	if err == nil {
		for _, b := range r.st.back {
			b()
		}
		r.st.free()
	}
	r.st = nil
	r.h = nil
	return err
}

// Wait blocks until the operation completes (weft_wait), copies its results into the Go
// slices, and frees the request (weft_request_free). Waiting again returns the same result.
func (r *Request) Wait() error {
	if r.done {
		return r.err
	}
	h := r.h
	err := call(func() C.weft_status_t { return C.weft_wait(h) })
	ferr := call(func() C.weft_status_t { return C.weft_request_free(h) })
	if err == nil {
		err = ferr
	}
	return r.finish(err)
}

// Test reports whether the operation has completed (weft_test) without blocking; on
// completion it does what Wait does and returns Wait's result.
func (r *Request) Test() (bool, error) {
	if r.done {
		return true, r.err
	}
	runtime.LockOSThread()
	var done C.int
	st := C.weft_test(r.h, &done)
	var err error
	if st != C.WEFT_OK && st != C.WEFT_IN_PROGRESS {
		err = &Error{Status: Status(st), Message: C.GoString(C.weft_last_error())}
	}
	runtime.UnlockOSThread()
	if st == C.WEFT_IN_PROGRESS {
		return false, nil
	}
	if err != nil {
		h := r.h
		C.weft_request_free(h)
		return true, r.finish(err)
	}
	return true, r.Wait()
}

// WaitAll waits for every request and returns the first error.
func WaitAll(reqs ...*Request) error {
	var first error
	for _, r := range reqs {
		if r == nil {
			continue
		}
		if err := r.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// AllreduceAsync starts Allreduce (send and recv may be the same slice).
func AllreduceAsync[T Element](c *Comm, send, recv []T, op Op) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := sameLen(len(send), len(recv), "AllreduceAsync"); err != nil {
		return nil, err
	}
	s := &staging{}
	p := stageIn(s, send)
	s.back = append(s.back, func() { copy(recv, cslice[T](p, len(recv))) })
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_allreduce(p, p, sz(len(send)), dt[T](), C.weft_op_t(op), c.h, nil, req)
	})
}

// BroadcastAsync starts Broadcast.
func BroadcastAsync[T Element](c *Comm, buf []T, root int) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return nil, err
	}
	s := &staging{}
	p := stageInOut(s, buf)
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_broadcast(p, sz(len(buf)), dt[T](), C.int(root), c.h, nil, req)
	})
}

// ReduceAsync starts Reduce (recv used at root only).
func ReduceAsync[T Element](c *Comm, send, recv []T, op Op, root int) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return nil, err
	}
	if err := c.rootRecv(len(recv), len(send), root, "ReduceAsync"); err != nil {
		return nil, err
	}
	s := &staging{}
	ps := stageIn(s, send)
	var pr unsafe.Pointer
	if c.rank == root {
		pr = stageOut(s, recv)
	}
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_reduce(ps, pr, sz(len(send)), dt[T](), C.weft_op_t(op), C.int(root), c.h, nil, req)
	})
}

// AllgatherAsync starts Allgather.
func AllgatherAsync[T Element](c *Comm, send, recv []T) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if len(recv) != len(send)*c.size {
		return nil, newError(StatusInvalidArgument, "AllgatherAsync: recv has %d elements; expected size %d x send's %d", len(recv), c.size, len(send))
	}
	s := &staging{}
	ps, pr := stageIn(s, send), stageOut(s, recv)
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_allgather(ps, pr, sz(len(send)), dt[T](), c.h, nil, req)
	})
}

// AllgathervAsync starts Allgatherv.
func AllgathervAsync[T Element](c *Comm, send, recv []T, counts, displs []int) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.checkAllgatherv(len(send), len(recv), counts, displs); err != nil {
		return nil, err
	}
	s := &staging{}
	ps, pr := stageIn(s, send), stageInOut(s, recv) // gaps between blocks keep their values
	pc, pd := stageCounts(s, counts), stageCounts(s, displs)
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_allgatherv(ps, sz(len(send)), pr, pc, pd, dt[T](), c.h, nil, req)
	})
}

// ReduceScatterAsync starts ReduceScatter.
func ReduceScatterAsync[T Element](c *Comm, send, recv []T, op Op) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if len(send) != len(recv)*c.size {
		return nil, newError(StatusInvalidArgument, "ReduceScatterAsync: send has %d elements; expected size %d x recv's %d", len(send), c.size, len(recv))
	}
	s := &staging{}
	ps, pr := stageIn(s, send), stageOut(s, recv)
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_reduce_scatter(ps, pr, sz(len(recv)), dt[T](), C.weft_op_t(op), c.h, nil, req)
	})
}

// AlltoallAsync starts Alltoall.
func AlltoallAsync[T Element](c *Comm, send, recv []T) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := sameLen(len(send), len(recv), "AlltoallAsync"); err != nil {
		return nil, err
	}
	count, err := c.blocks(len(send), "AlltoallAsync: send")
	if err != nil {
		return nil, err
	}
	s := &staging{}
	ps, pr := stageIn(s, send), stageOut(s, recv)
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_alltoall(ps, pr, sz(count), dt[T](), c.h, nil, req)
	})
}

// AlltoallvAsync starts Alltoallv.
func AlltoallvAsync[T Element](c *Comm, send []T, sendCounts, sendDispls []int, recv []T, recvCounts, recvDispls []int) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.checkCounts(sendCounts, sendDispls, len(send), "AlltoallvAsync (send)"); err != nil {
		return nil, err
	}
	if err := c.checkCounts(recvCounts, recvDispls, len(recv), "AlltoallvAsync (recv)"); err != nil {
		return nil, err
	}
	s := &staging{}
	ps, pr := stageIn(s, send), stageInOut(s, recv)
	sc, sd := stageCounts(s, sendCounts), stageCounts(s, sendDispls)
	rc, rd := stageCounts(s, recvCounts), stageCounts(s, recvDispls)
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_alltoallv(ps, sc, sd, pr, rc, rd, dt[T](), c.h, nil, req)
	})
}

// GatherAsync starts Gather (recv used at root only).
func GatherAsync[T Element](c *Comm, send, recv []T, root int) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return nil, err
	}
	if err := c.rootRecv(len(recv), len(send)*c.size, root, "GatherAsync"); err != nil {
		return nil, err
	}
	s := &staging{}
	ps := stageIn(s, send)
	var pr unsafe.Pointer
	if c.rank == root {
		pr = stageOut(s, recv)
	}
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_gather(ps, pr, sz(len(send)), dt[T](), C.int(root), c.h, nil, req)
	})
}

// ScatterAsync starts Scatter (send used at root only).
func ScatterAsync[T Element](c *Comm, send, recv []T, root int) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.checkRoot(root, "root"); err != nil {
		return nil, err
	}
	if c.rank == root && len(send) != len(recv)*c.size {
		return nil, newError(StatusInvalidArgument, "ScatterAsync: send at the root has %d elements; expected size %d x recv's %d", len(send), c.size, len(recv))
	}
	s := &staging{}
	var ps unsafe.Pointer
	if c.rank == root {
		ps = stageIn(s, send)
	}
	pr := stageOut(s, recv)
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_scatter(ps, pr, sz(len(recv)), dt[T](), C.int(root), c.h, nil, req)
	})
}

// BarrierAsync starts a barrier.
func (c *Comm) BarrierAsync() (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	return c.start(&staging{}, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_barrier(c.h, nil, req)
	})
}

// SendAsync starts a Send (buf is copied at once and may be reused immediately).
func SendAsync[T Element](c *Comm, buf []T, peer int) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.checkRoot(peer, "peer"); err != nil {
		return nil, err
	}
	s := &staging{}
	p := stageIn(s, buf)
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_send(p, sz(len(buf)), dt[T](), C.int(peer), c.h, nil, req)
	})
}

// RecvAsync starts a Recv; buf is filled by Wait.
func RecvAsync[T Element](c *Comm, buf []T, peer int) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := c.checkRoot(peer, "peer"); err != nil {
		return nil, err
	}
	s := &staging{}
	p := stageOut(s, buf)
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_recv(p, sz(len(buf)), dt[T](), C.int(peer), c.h, nil, req)
	})
}

// P2POp is one operation of P2PBatch / P2PBatchAsync, made by P2PSend or P2PRecv.
type P2POp struct {
	kind  C.weft_p2p_kind_t
	count int
	dtype C.weft_dtype_t
	peer  int
	stage func(s *staging) unsafe.Pointer
}

// P2PSend is a batch operation sending buf to peer (buf is copied when the batch starts).
func P2PSend[T Element](buf []T, peer int) P2POp {
	return P2POp{kind: C.WEFT_P2P_SEND, count: len(buf), dtype: dt[T](), peer: peer,
		stage: func(s *staging) unsafe.Pointer { return stageIn(s, buf) }}
}

// P2PRecv is a batch operation receiving len(buf) elements from peer (buf is filled when the
// batch completes).
func P2PRecv[T Element](buf []T, peer int) P2POp {
	return P2POp{kind: C.WEFT_P2P_RECV, count: len(buf), dtype: dt[T](), peer: peer,
		stage: func(s *staging) unsafe.Pointer { return stageOut(s, buf) }}
}

// stageBatch checks the peers and builds the weft_p2p_op_t array in C memory. Every buffer is
// staged through C memory: cgo forbids handing C an array that holds Go pointers (and this
// module supports Go releases without runtime.Pinner).
func (c *Comm) stageBatch(s *staging, ops []P2POp) (*C.weft_p2p_op_t, error) {
	for i, o := range ops {
		if err := c.checkRoot(o.peer, fmt.Sprintf("ops[%d].peer", i)); err != nil {
			return nil, err
		}
	}
	var z C.weft_p2p_op_t
	p := s.alloc(uintptr(len(ops)) * unsafe.Sizeof(z))
	if p == nil {
		return nil, nil
	}
	arr := unsafe.Slice((*C.weft_p2p_op_t)(p), len(ops))
	for i, o := range ops {
		arr[i] = C.weft_p2p_op_t{kind: o.kind, buf: o.stage(s), count: sz(o.count), dtype: o.dtype, peer: C.int(o.peer)}
	}
	return (*C.weft_p2p_op_t)(p), nil
}

// P2PBatchAsync starts a P2PBatch; receive buffers are filled by Wait.
func P2PBatchAsync(c *Comm, ops []P2POp) (*Request, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	s := &staging{}
	arr, err := c.stageBatch(s, ops)
	if err != nil {
		s.free()
		return nil, err
	}
	return c.start(s, func(req *C.weft_request_t) C.weft_status_t {
		return C.weft_p2p_batch(arr, sz(len(ops)), c.h, nil, req)
	})
}

// P2PBatch posts every operation together (weft_p2p_batch, as NCCL's grouped send/recv or
// torch's batch_isend_irecv) and returns when all have completed. Matching with the peers'
// sends and receives (batched or not) is in issue order per pair and direction. Use it for any
// exchange in which a rank both sends and receives: on GPU memory through NCCL, separate calls
// can deadlock. Buffers go through C memory (see stageBatch).
func P2PBatch(c *Comm, ops []P2POp) error {
	if err := c.open(); err != nil {
		return err
	}
	s := &staging{}
	defer s.free()
	arr, err := c.stageBatch(s, ops)
	if err != nil {
		return err
	}
	if err := call(func() C.weft_status_t { return C.weft_p2p_batch(arr, sz(len(ops)), c.h, nil, nil) }); err != nil {
		return err
	}
	for _, b := range s.back {
		b()
	}
	return nil
}
