package weft

/*
#include <stdlib.h>
#include <weft/weft.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Sharded tensors and redistribution (weft/mesh.h, second part).
//
// A sharded tensor's handle keeps a pointer to its local memory after the call that made it
// returns, which cgo forbids for Go memory. So a ShardedTensor's local piece lives in C memory:
// a HostMemory, allocated by the tensor (NewShardedTensor) or by the caller
// (NewShardedTensorOn). Local() views it as a Go slice, valid until the memory is freed.

// HostMemory is n elements of T in C-allocated host memory (zero-filled), which a
// ShardedTensor may point at. Free it when no tensor uses it any more (memory a tensor
// allocated itself is freed by the tensor's Close).
type HostMemory[T Element] struct {
	p unsafe.Pointer
	n int
}

// NewHostMemory allocates n zeroed elements of T with C's calloc.
func NewHostMemory[T Element](n int) *HostMemory[T] {
	var z T
	if n < 0 {
		panic("weft: NewHostMemory: negative length")
	}
	m := &HostMemory[T]{n: n}
	if n > 0 {
		m.p = C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(z)))
		if m.p == nil {
			panic("weft: C.calloc failed")
		}
	}
	return m
}

// Slice views the memory as a Go slice (nil when empty). Do not keep it past Free.
func (m *HostMemory[T]) Slice() []T { return cslice[T](m.p, m.n) }

// Len is the number of elements.
func (m *HostMemory[T]) Len() int { return m.n }

// Free releases the memory; freeing twice is a no-op.
func (m *HostMemory[T]) Free() {
	if m != nil && m.p != nil {
		C.free(m.p)
		m.p, m.n = nil, 0
	}
}

// Sharded is any *ShardedTensor[T], for the functions that take tensors of several element
// types (SaveCheckpoint, LoadCheckpoint).
type Sharded interface {
	shardedHandle() C.weft_sharded_t
}

// ShardedTensor is a tensor of a global shape laid out on a mesh, with this rank's piece in C
// memory (weft_sharded_t). Close it when done (not collective).
type ShardedTensor[T Element] struct {
	h          C.weft_sharded_t
	mesh       *Mesh
	global     []int
	layout     Layout
	name       string
	local      *HostMemory[T] // nil on a descriptor
	localShape []int
	strides    []int
	owned      []*HostMemory[T] // freed by Close
}

// NewShardedTensor makes a tensor of globalShape laid out on m by layout (one Placement per
// mesh dim), with a new zero-filled contiguous local piece of this rank's local shape; on a
// rank that is not a member of m it makes a descriptor (no local memory) that describes the
// other side of a redistribution between meshes. name (may be "") appears in error messages.
func NewShardedTensor[T Element](m *Mesh, globalShape []int, layout Layout, name string) (*ShardedTensor[T], error) {
	if err := m.open(); err != nil {
		return nil, err
	}
	if !m.IsMember() {
		return newSharded[T](m, globalShape, layout, nil, nil, nil, name)
	}
	shape, err := m.LocalShape(layout, globalShape)
	if err != nil {
		return nil, err
	}
	mem := NewHostMemory[T](product(shape))
	t, err := newSharded(m, globalShape, layout, mem, shape, nil, name)
	if err != nil {
		mem.Free()
		return nil, err
	}
	t.owned = append(t.owned, mem)
	return t, nil
}

// NewShardedTensorOn makes a tensor whose local piece is the caller's memory mem, described by
// this rank's local shape and strides in elements (nil: contiguous row-major; e.g. {1, rows}
// for a column-major matrix). Every element the view reaches must lie in mem; mem must outlive
// the tensor.
func NewShardedTensorOn[T Element](m *Mesh, globalShape []int, layout Layout, mem *HostMemory[T], strides []int, name string) (*ShardedTensor[T], error) {
	if err := m.open(); err != nil {
		return nil, err
	}
	if mem == nil {
		return nil, newError(StatusInvalidArgument, "NewShardedTensorOn: nil memory (use NewShardedTensor for a descriptor)")
	}
	shape, err := m.LocalShape(layout, globalShape)
	if err != nil {
		return nil, err
	}
	return newSharded(m, globalShape, layout, mem, shape, strides, name)
}

func product(v []int) int {
	n := 1
	for _, x := range v {
		n *= x
	}
	return n
}

// viewStrides checks a view of shape/strides against mem's length and returns the strides the
// library is told: row-major for nil, and row-major ones for dims of size 1 and empty views
// (they are never stepped over; the library refuses a 0 stride on a dim longer than 1).
func viewStrides(shape, strides []int, n int) ([]int, error) {
	if strides != nil && len(strides) != len(shape) {
		return nil, newError(StatusInvalidArgument, "%d strides %v for %d dims", len(strides), strides, len(shape))
	}
	empty := product(shape) == 0
	out := make([]int, len(shape))
	acc, reach := 1, 0
	for k := len(shape) - 1; k >= 0; k-- {
		if strides != nil && !empty && shape[k] > 1 {
			if strides[k] < 0 {
				return nil, newError(StatusInvalidArgument, "stride %d of dim %d is negative", strides[k], k)
			}
			out[k] = strides[k]
		} else {
			out[k] = acc
		}
		if shape[k] > 1 {
			acc *= shape[k]
		}
		if !empty {
			reach += (shape[k] - 1) * out[k]
		}
	}
	if !empty && reach >= n {
		return nil, newError(StatusInvalidArgument, "the view of shape %v and strides %v reaches element %d of memory of %d", shape, strides, reach, n)
	}
	return out, nil
}

// tensorC fills a weft_tensor_t in C memory (its shape and strides in C memory too).
func tensorC[T Element](s *staging, mem *HostMemory[T], shape, strides []int) *C.weft_tensor_t {
	var z C.weft_tensor_t
	t := (*C.weft_tensor_t)(s.alloc(unsafe.Sizeof(z)))
	n := len(shape)
	arr := unsafe.Slice((*C.int64_t)(s.alloc(uintptr(2*n+1)*8)), 2*n+1)
	for i := 0; i < n; i++ {
		arr[i], arr[n+i] = C.int64_t(shape[i]), C.int64_t(strides[i])
	}
	t.data = mem.p
	t.device_type = C.WEFT_DEVICE_CPU
	t.device_id = 0
	t.ndim = C.int(n)
	t.dtype = dt[T]()
	t.shape = &arr[0]
	t.strides = &arr[n]
	t.byte_offset = 0
	return t
}

func newSharded[T Element](m *Mesh, globalShape []int, layout Layout, mem *HostMemory[T], shape, strides []int, name string) (*ShardedTensor[T], error) {
	if len(layout) != len(m.shape) {
		return nil, newError(StatusInvalidArgument, "the layout %v has %d placements; the mesh has %d dims %v", layout, len(layout), len(m.shape), m.names)
	}
	pl, err := layout.c()
	if err != nil {
		return nil, err
	}
	g, err := int64s(globalShape, "global shape")
	if err != nil {
		return nil, err
	}
	s := &staging{}
	defer s.free()
	var local *C.weft_tensor_t
	if mem != nil {
		strides, err = viewStrides(shape, strides, mem.n)
		if err != nil {
			return nil, err
		}
		local = tensorC(s, mem, shape, strides)
	}
	var cfg C.weft_sharded_config_t
	cfg.struct_size = C.size_t(unsafe.Sizeof(cfg))
	if name != "" {
		for i := 0; i < len(name); i++ {
			if name[i] == 0 {
				return nil, newError(StatusInvalidArgument, "ShardedTensor name contains a NUL byte")
			}
		}
		cs := C.CString(name)
		s.mem = append(s.mem, unsafe.Pointer(cs))
		cfg.name = cs
	}
	var h C.weft_sharded_t
	if err := call(func() C.weft_status_t {
		return C.weft_sharded_create(m.h, C.int(len(globalShape)), &g[0], dt[T](), &pl[0], local, &cfg, &h)
	}); err != nil {
		return nil, err
	}
	return &ShardedTensor[T]{h: h, mesh: m, global: append([]int(nil), globalShape...), layout: append(Layout(nil), layout...),
		name: name, local: mem, localShape: shape, strides: strides}, nil
}

func (t *ShardedTensor[T]) shardedHandle() C.weft_sharded_t { return t.h }

func (t *ShardedTensor[T]) open() error {
	if t == nil || t.h == nil {
		return newError(StatusInvalidArgument, "the sharded tensor is closed")
	}
	return t.mesh.open()
}

// Mesh is the mesh the tensor is laid out on.
func (t *ShardedTensor[T]) Mesh() *Mesh { return t.mesh }

// GlobalShape is the shape of the whole tensor.
func (t *ShardedTensor[T]) GlobalShape() []int { return append([]int(nil), t.global...) }

// Layout is the tensor's layout.
func (t *ShardedTensor[T]) Layout() Layout { return append(Layout(nil), t.layout...) }

// Dtype is the element type's weft dtype.
func (t *ShardedTensor[T]) Dtype() Dtype { return DtypeOf[T]() }

// Name is the name given at creation.
func (t *ShardedTensor[T]) Name() string { return t.name }

// IsDescriptor reports whether the tensor has no local memory (a rank outside its mesh).
func (t *ShardedTensor[T]) IsDescriptor() bool { return t.local == nil }

// LocalShape is the shape of this rank's piece (nil on a descriptor).
func (t *ShardedTensor[T]) LocalShape() []int { return append([]int(nil), t.localShape...) }

// LocalStrides are the piece's strides in elements as the library was told them.
func (t *ShardedTensor[T]) LocalStrides() []int { return append([]int(nil), t.strides...) }

// Local views the local memory as a Go slice (row-major for contiguous tensors; nil on a
// descriptor). It is C memory: do not keep it past Close (or the HostMemory's Free).
func (t *ShardedTensor[T]) Local() []T {
	if t.local == nil {
		return nil
	}
	return t.local.Slice()
}

// GlobalOffset is the global index of this rank's first element (members only).
func (t *ShardedTensor[T]) GlobalOffset() ([]int, error) {
	_, off, err := t.mesh.LocalBox(t.layout, t.global, -1)
	return off, err
}

// LocalView is the view a sharded tensor holds (weft_sharded_local).
type LocalView struct {
	Data       unsafe.Pointer
	Dtype      Dtype
	Shape      []int
	Strides    []int // nil: contiguous
	ByteOffset uint64
}

// LocalView calls weft_sharded_local.
func (t *ShardedTensor[T]) LocalView() (LocalView, error) {
	var v LocalView
	if err := t.open(); err != nil {
		return v, err
	}
	var c C.weft_tensor_t
	if err := call(func() C.weft_status_t { return C.weft_sharded_local(t.h, &c) }); err != nil {
		return v, err
	}
	n := int(c.ndim)
	v.Data, v.Dtype, v.ByteOffset = c.data, Dtype(c.dtype), uint64(c.byte_offset)
	if c.shape != nil {
		for _, x := range unsafe.Slice((*C.int64_t)(unsafe.Pointer(c.shape)), n) {
			v.Shape = append(v.Shape, int(x))
		}
	}
	if c.strides != nil {
		for _, x := range unsafe.Slice((*C.int64_t)(unsafe.Pointer(c.strides)), n) {
			v.Strides = append(v.Strides, int(x))
		}
	}
	return v, nil
}

// SetLocal calls weft_sharded_set_local: points the tensor at other memory of the same local
// shape (e.g. next step's buffer), with strides as in NewShardedTensorOn. Memory the tensor
// allocated itself stays allocated until Close.
func (t *ShardedTensor[T]) SetLocal(mem *HostMemory[T], strides []int) error {
	if err := t.open(); err != nil {
		return err
	}
	if mem == nil {
		return newError(StatusInvalidArgument, "SetLocal: nil memory")
	}
	st, err := viewStrides(t.localShape, strides, mem.n)
	if err != nil {
		return err
	}
	s := &staging{}
	defer s.free()
	local := tensorC(s, mem, t.localShape, st)
	if err := call(func() C.weft_status_t { return C.weft_sharded_set_local(t.h, local) }); err != nil {
		return err
	}
	t.local, t.strides = mem, st
	return nil
}

// Close calls weft_sharded_destroy and frees the memory the tensor allocated. Closing twice,
// or a nil tensor, is a no-op.
func (t *ShardedTensor[T]) Close() error {
	if t == nil || t.h == nil {
		return nil
	}
	h := t.h
	t.h = nil
	err := call(func() C.weft_status_t { return C.weft_sharded_destroy(h) })
	for _, m := range t.owned {
		m.Free()
	}
	t.owned, t.local = nil, nil
	return err
}

func (t *ShardedTensor[T]) String() string {
	where := fmt.Sprintf("local %v", t.localShape)
	if t.local == nil {
		where = "descriptor"
	}
	return fmt.Sprintf("weft.ShardedTensor(%q %v on %v %v, %s)", t.name, t.global, t.mesh.shape, t.layout, where)
}

func openPair[T Element](src, dst *ShardedTensor[T]) error {
	if err := src.open(); err != nil {
		return err
	}
	return dst.open()
}

// Redistribute calls weft_redistribute: writes into dst's local memory the values of src laid
// out as dst says. Collective over the members of both meshes (the same mesh, or two meshes
// made from one communicator); on a rank outside one mesh that side is a descriptor. The
// element type fixes the dtype, the same on both sides. HostMemory is host memory (weft.h's
// device-memory path, with a CUDA stream, is not wrapped by this binding).
func Redistribute[T Element](src, dst *ShardedTensor[T]) error {
	if err := openPair(src, dst); err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_redistribute(src.h, dst.h, nil, nil) })
}

// RedistributeAsync starts Redistribute and returns its *Request. The memory is C memory, so
// nothing is staged: dst's memory holds the result once Wait returns. Both tensors must stay
// open until then, and nothing else may run on their meshes meanwhile.
func RedistributeAsync[T Element](src, dst *ShardedTensor[T]) (*Request, error) {
	if err := openPair(src, dst); err != nil {
		return nil, err
	}
	var h C.weft_request_t
	if err := call(func() C.weft_status_t { return C.weft_redistribute(src.h, dst.h, nil, &h) }); err != nil {
		return nil, err
	}
	return &Request{h: h, st: &staging{}}, nil
}

// StepKind is a weft_redistribute_kind_t.
type StepKind int

const (
	StepLocal         StepKind = C.WEFT_STEP_LOCAL          // a local copy, slice or zero fill
	StepAllgather     StepKind = C.WEFT_STEP_ALLGATHER      // over the mesh dim's group
	StepAllreduce     StepKind = C.WEFT_STEP_ALLREDUCE      // over the mesh dim's group
	StepReduceScatter StepKind = C.WEFT_STEP_REDUCE_SCATTER // over the mesh dim's group
	StepAlltoall      StepKind = C.WEFT_STEP_ALLTOALL       // over the mesh dim's group
	StepExchange      StepKind = C.WEFT_STEP_EXCHANGE       // point-to-point exchange over the mesh(es)
)

var stepNames = map[StepKind]string{StepLocal: "local copy", StepAllgather: "all-gather", StepAllreduce: "all-reduce",
	StepReduceScatter: "reduce-scatter", StepAlltoall: "all-to-all", StepExchange: "point-to-point exchange"}

func (k StepKind) String() string {
	if n, ok := stepNames[k]; ok {
		return n
	}
	return fmt.Sprintf("step kind %d", int(k))
}

// Step is one step of a redistribution (weft_redistribute_step_t).
type Step struct {
	Kind         StepKind
	MeshDim      int       // the mesh dim changed; -1 for an exchange or the final copy
	From, To     Placement // the placements on MeshDim before and after
	BytesSent    uint64    // by this rank
	MaxBytesSent uint64    // by the rank that sends most
}

func (s Step) String() string {
	out := s.Kind.String()
	if s.MeshDim >= 0 {
		out += fmt.Sprintf(" over mesh dim %d: %v -> %v", s.MeshDim, s.From, s.To)
	}
	return out + fmt.Sprintf("; sends %d B (at most %d B by one rank)", s.BytesSent, s.MaxBytesSent)
}

// Plan calls weft_redistribute_plan: the steps Redistribute(src, dst) would run, in order,
// without communicating (any rank involved).
func Plan[T Element](src, dst *ShardedTensor[T]) ([]Step, error) {
	if err := openPair(src, dst); err != nil {
		return nil, err
	}
	var n C.size_t
	if err := call(func() C.weft_status_t { return C.weft_redistribute_plan(src.h, dst.h, nil, 0, &n) }); err != nil {
		return nil, err
	}
	steps := make([]C.weft_redistribute_step_t, int(n)+1)
	capacity := n
	if err := call(func() C.weft_status_t {
		return C.weft_redistribute_plan(src.h, dst.h, &steps[0], capacity, &n)
	}); err != nil {
		return nil, err
	}
	if n > capacity {
		n = capacity
	}
	out := make([]Step, int(n))
	for i := range out {
		c := steps[i]
		out[i] = Step{Kind: StepKind(c.kind), MeshDim: int(c.mesh_dim), From: placementFromC(c.from), To: placementFromC(c.to),
			BytesSent: uint64(c.bytes_sent), MaxBytesSent: uint64(c.max_bytes_sent)}
	}
	return out, nil
}

// Full returns the whole global tensor (row-major) on every member of src's mesh, by
// redistributing into a new all-Replicate tensor; nil on other ranks. Collective over the
// mesh's members.
func Full[T Element](src *ShardedTensor[T]) ([]T, error) {
	if err := src.open(); err != nil {
		return nil, err
	}
	m := src.mesh
	if !m.IsMember() {
		return nil, nil
	}
	layout := make(Layout, m.NDim())
	for i := range layout {
		layout[i] = Replicate()
	}
	rep, err := NewShardedTensor[T](m, src.global, layout, src.name+" (full)")
	if err != nil {
		return nil, err
	}
	defer rep.Close()
	if err := Redistribute(src, rep); err != nil {
		return nil, err
	}
	return append([]T(nil), rep.Local()...), nil
}
