package weft

/*
#include <stdlib.h>
#include <weft/weft.h>
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// Device meshes and placements (weft/mesh.h, first part).

// PlacementKind is a weft_placement_kind_t.
type PlacementKind int

const (
	PlacementReplicate PlacementKind = C.WEFT_REPLICATE // every rank along the mesh dim holds the same values
	PlacementShard     PlacementKind = C.WEFT_SHARD     // a tensor dim is split into chunks along the mesh dim
	PlacementPartial   PlacementKind = C.WEFT_PARTIAL   // each rank holds a term; the value is their reduction
)

// Placement is one mesh dim's placement of a tensor (weft_placement_t): make it with Shard,
// Replicate or Partial.
type Placement struct {
	Kind PlacementKind
	Dim  int // PlacementShard: the tensor dim
	Op   Op  // PlacementPartial: OpSum, OpAvg, OpMin or OpMax (the library refuses OpProd)
}

// Shard splits tensor dim dim into chunks along the mesh dim (torch.chunk's rule: chunks of
// ceil(n/k) elements, trailing ones smaller or empty; never padded).
func Shard(dim int) Placement { return Placement{Kind: PlacementShard, Dim: dim} }

// Replicate: every rank along the mesh dim holds the whole (of the other dims' piece).
func Replicate() Placement { return Placement{Kind: PlacementReplicate} }

// Partial: each rank along the mesh dim holds a term; the value is their reduction by op.
func Partial(op Op) Placement { return Placement{Kind: PlacementPartial, Op: op} }

var opNames = map[Op]string{OpSum: "Sum", OpProd: "Prod", OpMin: "Min", OpMax: "Max", OpAvg: "Avg"}

func (p Placement) String() string {
	switch p.Kind {
	case PlacementReplicate:
		return "Replicate"
	case PlacementShard:
		return fmt.Sprintf("Shard(%d)", p.Dim)
	case PlacementPartial:
		if n, ok := opNames[p.Op]; ok {
			return "Partial(" + n + ")"
		}
		return fmt.Sprintf("Partial(%d)", int(p.Op))
	}
	return fmt.Sprintf("Placement(kind %d, dim %d, op %d)", p.Kind, p.Dim, int(p.Op))
}

func (p Placement) c() C.weft_placement_t {
	op := p.Op
	if p.Kind != PlacementPartial {
		op = OpSum
	}
	dim := p.Dim
	if p.Kind != PlacementShard {
		dim = 0
	}
	return C.weft_placement_t{kind: C.weft_placement_kind_t(p.Kind), dim: C.int(dim), op: C.weft_op_t(op)}
}

func placementFromC(p C.weft_placement_t) Placement {
	return Placement{Kind: PlacementKind(p.kind), Dim: int(p.dim), Op: Op(p.op)}
}

// Layout is one Placement per mesh dim, in mesh-dim order.
type Layout []Placement

func (l Layout) String() string {
	parts := make([]string, len(l))
	for i, p := range l {
		parts[i] = p.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (l Layout) c() ([]C.weft_placement_t, error) {
	out := make([]C.weft_placement_t, len(l)+1) // never empty: &out[0] is valid
	for i, p := range l {
		if p.Kind == PlacementShard {
			if err := checkInt(p.Dim, "Shard dim"); err != nil {
				return nil, err
			}
		}
		out[i] = p.c()
	}
	return out, nil
}

func int64s(v []int, what string) ([]C.int64_t, error) {
	if len(v) > C.WEFT_TENSOR_MAX_DIMS {
		return nil, newError(StatusInvalidArgument, "%s %v has %d dims; weft takes at most %d", what, v, len(v), C.WEFT_TENSOR_MAX_DIMS)
	}
	out := make([]C.int64_t, len(v)+1)
	for i, x := range v {
		if x < 0 {
			return nil, newError(StatusInvalidArgument, "%s %v has a negative entry", what, v)
		}
		out[i] = C.int64_t(x)
	}
	return out, nil
}

// Mesh is a device mesh (weft_mesh_t): ranks of a communicator in an n-d grid with named
// dims. Close it when done (not collective); it is not closed by the garbage collector.
//
// A rank outside the mesh's ranks gets a descriptor mesh: every query about the grid works
// (and it can describe the other side of a redistribution), but it has no coordinates and no
// communicators. The mesh keeps its own reference to the communicator's connections: the
// parent Comm may be closed first. Like a communicator, a mesh is used by one goroutine at a
// time.
type Mesh struct {
	h        C.weft_mesh_t
	shape    []int
	names    []string
	coords   []int
	meshRank int
	comms    map[string]*Comm
}

// NewMesh calls weft_mesh_create, collective over every rank of c (members or not): a mesh of
// shape with dims named names (nil: "d0", "d1", ...) over ranks of c in mesh order (row-major
// over shape, the last dim fastest; nil: every rank of c in rank order).
func NewMesh(c *Comm, shape []int, names []string, ranks []int) (*Mesh, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if len(shape) < 1 || len(shape) > C.WEFT_MESH_MAX_DIMS {
		return nil, newError(StatusInvalidArgument, "mesh shape %v: expected 1..%d dims", shape, C.WEFT_MESH_MAX_DIMS)
	}
	if names != nil && len(names) != len(shape) {
		return nil, newError(StatusInvalidArgument, "mesh: %d names %v for %d dims", len(names), names, len(shape))
	}
	cshape := make([]C.int, len(shape))
	for i, n := range shape {
		if err := checkInt(n, "mesh shape"); err != nil {
			return nil, err
		}
		cshape[i] = C.int(n)
	}
	// Everything C reads through a pointer held in another struct lives in C memory (cgo
	// forbids Go memory that holds Go pointers).
	s := &staging{}
	defer s.free()
	var cnames **C.char
	if names != nil {
		arr := unsafe.Slice((**C.char)(s.alloc(uintptr(len(names))*unsafe.Sizeof((*C.char)(nil)))), len(names))
		for i, n := range names {
			if strings.IndexByte(n, 0) >= 0 {
				return nil, newError(StatusInvalidArgument, "mesh dim name %q contains a NUL byte", n)
			}
			cs := C.CString(n)
			s.mem = append(s.mem, unsafe.Pointer(cs))
			arr[i] = cs
		}
		cnames = &arr[0]
	}
	var cfg *C.weft_mesh_config_t
	if ranks != nil {
		cfg = &C.weft_mesh_config_t{}
		cfg.struct_size = C.size_t(unsafe.Sizeof(*cfg))
		if len(ranks) > 0 {
			arr := unsafe.Slice((*C.int)(s.alloc(uintptr(len(ranks))*C.sizeof_int)), len(ranks))
			for i, r := range ranks {
				if err := checkInt(r, "mesh rank"); err != nil {
					return nil, err
				}
				arr[i] = C.int(r)
			}
			cfg.ranks = &arr[0]
		}
		cfg.nranks = C.size_t(len(ranks))
	}
	var h C.weft_mesh_t
	if err := call(func() C.weft_status_t {
		return C.weft_mesh_create(c.h, C.int(len(shape)), &cshape[0], cnames, cfg, &h)
	}); err != nil {
		return nil, err
	}
	m := &Mesh{h: h, meshRank: -1, comms: map[string]*Comm{}}
	if err := m.query(); err != nil {
		C.weft_mesh_destroy(h)
		return nil, err
	}
	return m, nil
}

func (m *Mesh) query() error {
	var nd C.int
	if err := call(func() C.weft_status_t { return C.weft_mesh_shape(m.h, &nd, nil) }); err != nil {
		return err
	}
	dims := make([]C.int, int(nd)+1)
	if err := call(func() C.weft_status_t { return C.weft_mesh_shape(m.h, &nd, &dims[0]) }); err != nil {
		return err
	}
	m.shape = make([]int, int(nd))
	m.names = make([]string, int(nd))
	for i := range m.shape {
		m.shape[i] = int(dims[i])
		var p *C.char
		if err := call(func() C.weft_status_t { return C.weft_mesh_dim_name(m.h, C.int(i), &p) }); err != nil {
			return err
		}
		m.names[i] = C.GoString(p)
	}
	var member C.int
	if err := call(func() C.weft_status_t { return C.weft_mesh_is_member(m.h, &member) }); err != nil {
		return err
	}
	if member != 0 {
		coords := make([]C.int, int(nd)+1)
		var mr C.int
		if err := call(func() C.weft_status_t { return C.weft_mesh_coords(m.h, &coords[0], &mr) }); err != nil {
			return err
		}
		m.coords = make([]int, int(nd))
		for i := range m.coords {
			m.coords[i] = int(coords[i])
		}
		m.meshRank = int(mr)
	}
	return nil
}

func (m *Mesh) open() error {
	if m == nil || m.h == nil {
		return newError(StatusInvalidArgument, "the mesh is closed")
	}
	return nil
}

// Shape returns the size of each dim.
func (m *Mesh) Shape() []int { return append([]int(nil), m.shape...) }

// Names returns each dim's name.
func (m *Mesh) Names() []string { return append([]string(nil), m.names...) }

// NDim is the number of dims.
func (m *Mesh) NDim() int { return len(m.shape) }

// Size is the number of member ranks (the product of the shape).
func (m *Mesh) Size() int {
	n := 1
	for _, s := range m.shape {
		n *= s
	}
	return n
}

// IsMember reports whether this rank is a member (false on a descriptor mesh).
func (m *Mesh) IsMember() bool { return m.coords != nil }

// Coords returns this rank's coordinates (nil when not a member).
func (m *Mesh) Coords() []int {
	if m.coords == nil {
		return nil
	}
	return append([]int(nil), m.coords...)
}

// MeshRank is this rank's position in mesh order (row-major), -1 when not a member.
func (m *Mesh) MeshRank() int { return m.meshRank }

// DimIndex calls weft_mesh_dim_index: the index of the dim called name.
func (m *Mesh) DimIndex(name string) (int, error) {
	if err := m.open(); err != nil {
		return -1, err
	}
	if strings.IndexByte(name, 0) >= 0 {
		return -1, newError(StatusInvalidArgument, "mesh dim name %q contains a NUL byte", name)
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var d C.int
	err := call(func() C.weft_status_t { return C.weft_mesh_dim_index(m.h, cs, &d) })
	return int(d), err
}

// ParentRank calls weft_mesh_parent_rank: the rank, in the communicator the mesh was made
// from, of the member at mesh position meshRank. Works on every rank.
func (m *Mesh) ParentRank(meshRank int) (int, error) {
	if err := m.open(); err != nil {
		return -1, err
	}
	if err := checkInt(meshRank, "meshRank"); err != nil {
		return -1, err
	}
	var r C.int
	err := call(func() C.weft_status_t { return C.weft_mesh_parent_rank(m.h, C.int(meshRank), &r) })
	return int(r), err
}

// Comm calls weft_mesh_comm: the communicator over mesh dims dims (distinct, increasing; none:
// every dim, the whole mesh), members only. Its ranks share this rank's coordinates on every
// other dim, ordered row-major over the chosen dims. It belongs to the mesh: use it for any
// operation; Close on it only detaches the *Comm (the mesh frees it), and it stops working when
// the mesh is closed. The same *Comm is returned for the same dims.
func (m *Mesh) Comm(dims ...int) (*Comm, error) {
	if err := m.open(); err != nil {
		return nil, err
	}
	if len(dims) == 0 {
		for i := range m.shape {
			dims = append(dims, i)
		}
	}
	key := fmt.Sprint(dims)
	if c := m.comms[key]; c != nil && c.h != nil {
		return c, nil
	}
	cdims := make([]C.int, len(dims)+1)
	for i, d := range dims {
		if err := checkInt(d, "mesh dim"); err != nil {
			return nil, err
		}
		cdims[i] = C.int(d)
	}
	var h C.weft_comm_t
	if err := call(func() C.weft_status_t { return C.weft_mesh_comm(m.h, &cdims[0], C.int(len(dims)), &h) }); err != nil {
		return nil, err
	}
	c, err := borrowComm(h, m)
	if err != nil {
		return nil, err
	}
	m.comms[key] = c
	return c, nil
}

// CommByName is Comm with dims given by name.
func (m *Mesh) CommByName(names ...string) (*Comm, error) {
	dims := make([]int, len(names))
	for i, n := range names {
		d, err := m.DimIndex(n)
		if err != nil {
			return nil, err
		}
		dims[i] = d
	}
	return m.Comm(dims...)
}

// borrowComm wraps a communicator owned by mesh m (never destroyed through the *Comm).
func borrowComm(h C.weft_comm_t, m *Mesh) (*Comm, error) {
	c := &Comm{h: h, mesh: m}
	for _, q := range []struct {
		dst *int
		f   func(*C.int) C.weft_status_t
	}{
		{&c.rank, func(v *C.int) C.weft_status_t { return C.weft_comm_rank(h, v) }},
		{&c.size, func(v *C.int) C.weft_status_t { return C.weft_comm_size(h, v) }},
		{&c.localRank, func(v *C.int) C.weft_status_t { return C.weft_comm_local_rank(h, v) }},
		{&c.localSize, func(v *C.int) C.weft_status_t { return C.weft_comm_local_size(h, v) }},
	} {
		var v C.int
		if err := call(func() C.weft_status_t { return q.f(&v) }); err != nil {
			return nil, err
		}
		*q.dst = int(v)
	}
	return c, nil
}

// LocalBox calls weft_mesh_local_shape, without data or communication: the shape of mesh
// member meshRank's local piece (-1: this rank, members only) of a tensor of globalShape laid
// out by layout, and the global index of its first element.
func (m *Mesh) LocalBox(layout Layout, globalShape []int, meshRank int) (shape, offset []int, err error) {
	if err := m.open(); err != nil {
		return nil, nil, err
	}
	if len(layout) != len(m.shape) {
		return nil, nil, newError(StatusInvalidArgument, "the layout %v has %d placements; the mesh has %d dims %v", layout, len(layout), len(m.shape), m.names)
	}
	pl, err := layout.c()
	if err != nil {
		return nil, nil, err
	}
	g, err := int64s(globalShape, "global shape")
	if err != nil {
		return nil, nil, err
	}
	if err := checkInt(meshRank, "meshRank"); err != nil {
		return nil, nil, err
	}
	n := len(globalShape)
	ls, off := make([]C.int64_t, n+1), make([]C.int64_t, n+1)
	if err := call(func() C.weft_status_t {
		return C.weft_mesh_local_shape(m.h, &pl[0], C.int(n), &g[0], C.int(meshRank), &ls[0], &off[0])
	}); err != nil {
		return nil, nil, err
	}
	shape, offset = make([]int, n), make([]int, n)
	for i := 0; i < n; i++ {
		shape[i], offset[i] = int(ls[i]), int(off[i])
	}
	return shape, offset, nil
}

// LocalShape is the shape of this rank's local piece (see LocalBox).
func (m *Mesh) LocalShape(layout Layout, globalShape []int) ([]int, error) {
	s, _, err := m.LocalBox(layout, globalShape, -1)
	return s, err
}

// Close calls weft_mesh_destroy (not collective): frees the mesh and its communicators; the
// *Comm values from Comm stop working. Close the ShardedTensors on the mesh first. Closing
// twice, or a nil *Mesh, is a no-op.
func (m *Mesh) Close() error {
	if m == nil || m.h == nil {
		return nil
	}
	for _, c := range m.comms {
		c.h = nil
	}
	h := m.h
	m.h = nil
	return call(func() C.weft_status_t { return C.weft_mesh_destroy(h) })
}

func (m *Mesh) String() string {
	if m == nil || m.h == nil {
		return "weft.Mesh(closed)"
	}
	parts := make([]string, len(m.shape))
	for i := range m.shape {
		parts[i] = fmt.Sprintf("%s=%d", m.names[i], m.shape[i])
	}
	where := "not a member"
	if m.coords != nil {
		where = fmt.Sprintf("coords %v", m.coords)
	}
	return fmt.Sprintf("weft.Mesh(%s, %s)", strings.Join(parts, " x "), where)
}
