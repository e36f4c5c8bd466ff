package weft

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// Tests of the mesh.h family: placements, a one-rank mesh, sharded tensors, redistribution,
// plans and checkpoints in one process; TestMeshMultiRank runs the same on 4 ranks.

func TestPlacements(t *testing.T) {
	if Shard(2).String() != "Shard(2)" || Replicate().String() != "Replicate" || Partial(OpAvg).String() != "Partial(Avg)" {
		t.Fatalf("names: %v %v %v", Shard(2), Replicate(), Partial(OpAvg))
	}
	for _, p := range []Placement{Shard(0), Shard(3), Replicate(), Partial(OpSum), Partial(OpMax)} {
		if back := placementFromC(p.c()); back != p {
			t.Errorf("%v round trip gave %v", p, back)
		}
	}
	if c := Shard(1).c(); c.kind != 1 || c.dim != 1 {
		t.Errorf("Shard(1) = %+v", c)
	}
	if got := (Layout{Shard(0), Replicate()}).String(); got != "[Shard(0), Replicate]" {
		t.Errorf("layout %s", got)
	}
	if _, err := viewStrides([]int{3, 4}, []int{1, 3}, 12); err != nil {
		t.Error(err)
	}
	if _, err := viewStrides([]int{4, 4}, []int{4, 1}, 12); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("out of bounds view: %v", err)
	}
	if s, err := viewStrides([]int{7, 0}, nil, 0); err != nil || !reflect.DeepEqual(s, []int{1, 1}) {
		t.Errorf("empty view strides %v, %v", s, err)
	}
	if s, _ := viewStrides([]int{2, 1, 3}, nil, 6); !reflect.DeepEqual(s, []int{3, 3, 1}) {
		t.Errorf("contiguous strides %v", s)
	}
}

func TestOneRankMesh(t *testing.T) {
	c := solo(t)
	m, err := NewMesh(c, []int{1, 1}, []string{"dp", "tp"}, nil)
	check(t, "mesh", err)
	defer m.Close()
	if !reflect.DeepEqual(m.Shape(), []int{1, 1}) || !reflect.DeepEqual(m.Names(), []string{"dp", "tp"}) || m.Size() != 1 {
		t.Fatalf("mesh %v", m)
	}
	if !m.IsMember() || !reflect.DeepEqual(m.Coords(), []int{0, 0}) || m.MeshRank() != 0 {
		t.Fatalf("member %v %v %v", m.IsMember(), m.Coords(), m.MeshRank())
	}
	if d, err := m.DimIndex("tp"); err != nil || d != 1 {
		t.Fatalf("DimIndex %d %v", d, err)
	}
	if _, err := m.DimIndex("nope"); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("DimIndex(nope): %v", err)
	}
	if r, err := m.ParentRank(0); err != nil || r != 0 {
		t.Fatalf("ParentRank %d %v", r, err)
	}
	tp, err := m.CommByName("tp")
	check(t, "tp", err)
	if !tp.Borrowed() || tp.Size() != 1 {
		t.Fatalf("tp %v", tp)
	}
	x := []float64{2.5}
	check(t, "tp allreduce", AllreduceInPlace(tp, x, OpSum))
	if again, _ := m.Comm(1); again != tp {
		t.Fatal("Comm(1) is not the same *Comm")
	}
	check(t, "tp close", tp.Close()) // detaches only
	whole, err := m.Comm()
	check(t, "whole", err)
	check(t, "whole barrier", whole.Barrier())
	shape, off, err := m.LocalBox(Layout{Shard(0), Shard(1)}, []int{5, 3}, -1)
	if err != nil || !reflect.DeepEqual(shape, []int{5, 3}) || !reflect.DeepEqual(off, []int{0, 0}) {
		t.Fatalf("LocalBox %v %v %v", shape, off, err)
	}
	if _, err := m.LocalShape(Layout{Shard(0)}, []int{4}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short layout: %v", err)
	}
	check(t, "close", m.Close())
	if err := whole.Barrier(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a mesh communicator after Close: %v", err)
	}
	check(t, "parent barrier", c.Barrier())

	d, err := NewMesh(c, []int{1}, nil, nil)
	check(t, "default names", err)
	if !reflect.DeepEqual(d.Names(), []string{"d0"}) {
		t.Errorf("names %v", d.Names())
	}
	d.Close()
	for _, bad := range []func() error{
		func() error { _, err := NewMesh(c, []int{2}, nil, nil); return err },
		func() error { _, err := NewMesh(c, []int{1, 1}, []string{"a", "a"}, nil); return err },
		func() error { _, err := NewMesh(c, []int{1}, nil, []int{3}); return err },
		func() error { _, err := NewMesh(c, []int{1}, []string{"a\x00"}, nil); return err },
	} {
		if err := bad(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("bad mesh: %v", err)
		}
	}
	r, err := NewMesh(c, []int{1}, []string{"x"}, []int{0})
	check(t, "ranks", err)
	if !r.IsMember() {
		t.Error("rank 0 is a member")
	}
	r.Close()
}

func TestOneRankRedistribute(t *testing.T) {
	c := solo(t)
	m, err := NewMesh(c, []int{1}, []string{"dp"}, nil)
	check(t, "mesh", err)
	defer m.Close()
	src, err := NewShardedTensor[float32](m, []int{3, 4}, Layout{Shard(0)}, "a")
	check(t, "src", err)
	defer src.Close()
	for i := range src.Local() {
		src.Local()[i] = float32(i)
	}
	want := append([]float32(nil), src.Local()...)
	dst, err := NewShardedTensor[float32](m, []int{3, 4}, Layout{Replicate()}, "")
	check(t, "dst", err)
	defer dst.Close()
	check(t, "redistribute", Redistribute(src, dst))
	same(t, "S->R", dst.Local(), want)
	v, err := src.LocalView()
	check(t, "view", err)
	if v.Data != src.local.p || v.Dtype != DtypeFloat32 || !reflect.DeepEqual(v.Shape, []int{3, 4}) {
		t.Fatalf("view %+v", v)
	}
	steps, err := Plan(src, dst)
	check(t, "plan", err)
	for _, s := range steps {
		if s.String() == "" {
			t.Error("empty step text")
		}
	}
	full, err := Full(src)
	check(t, "full", err)
	same(t, "full", full, want)

	// Column-major destination in caller memory, asynchronously.
	mem := NewHostMemory[float32](12)
	defer mem.Free()
	cm, err := NewShardedTensorOn(m, []int{3, 4}, Layout{Replicate()}, mem, []int{1, 3}, "colmajor")
	check(t, "colmajor", err)
	req, err := RedistributeAsync(src, cm)
	check(t, "async", err)
	check(t, "wait", req.Wait())
	for i := 0; i < 3; i++ {
		for j := 0; j < 4; j++ {
			if mem.Slice()[i+3*j] != want[4*i+j] {
				t.Fatalf("column-major [%d,%d] = %v", i, j, mem.Slice()[i+3*j])
			}
		}
	}
	check(t, "close cm", cm.Close())

	// SetLocal: the next buffer.
	next := NewHostMemory[float32](12)
	defer next.Free()
	check(t, "set_local", dst.SetLocal(next, nil))
	check(t, "redistribute 2", Redistribute(src, dst))
	same(t, "next", next.Slice(), want)
	if err := dst.SetLocal(NewHostMemory[float32](5), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short SetLocal: %v", err)
	}

	// Errors: a view beyond the memory, a bad layout length, PROD partial.
	if _, err := NewShardedTensorOn(m, []int{3, 4}, Layout{Replicate()}, NewHostMemory[float32](11), nil, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("short memory: %v", err)
	}
	if _, err := NewShardedTensor[float32](m, []int{3, 4}, Layout{Replicate(), Replicate()}, ""); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long layout: %v", err)
	}
	if _, err := NewShardedTensor[float32](m, []int{3, 4}, Layout{Partial(OpProd)}, "p"); err == nil {
		t.Fatal("Partial(OpProd) accepted")
	}
	check(t, "close dst", dst.Close())
	if err := Redistribute(src, dst); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("closed dst: %v", err)
	}
}

func TestOneRankCheckpoint(t *testing.T) {
	c := solo(t)
	m, err := NewMesh(c, []int{1}, []string{"dp"}, nil)
	check(t, "mesh", err)
	defer m.Close()
	dir := filepath.Join(t.TempDir(), "ck")
	w, _ := NewShardedTensor[float32](m, []int{3, 4}, Layout{Shard(0)}, "w")
	b, _ := NewShardedTensor[int64](m, []int{3}, Layout{Replicate()}, "b")
	defer w.Close()
	defer b.Close()
	for i := range w.Local() {
		w.Local()[i] = float32(i) * 0.5
	}
	copy(b.Local(), []int64{7, -8, 9})
	check(t, "save", SaveCheckpoint(c, dir, map[string]Sharded{"w": w, "b": b}, &CheckpointConfig{NoFsync: true}))
	if _, err := os.Stat(filepath.Join(dir, "index.weft")); err != nil {
		t.Fatal(err)
	}
	mem := NewHostMemory[float32](12)
	defer mem.Free()
	w2, err := NewShardedTensorOn(m, []int{3, 4}, Layout{Replicate()}, mem, []int{1, 3}, "w2")
	check(t, "w2", err)
	defer w2.Close()
	b2, _ := NewShardedTensor[int64](m, []int{3}, Layout{Shard(0)}, "b2")
	defer b2.Close()
	check(t, "load", LoadCheckpoint(dir, map[string]Sharded{"w": w2, "b": b2}, nil))
	same(t, "b", b2.Local(), []int64{7, -8, 9})
	for i := 0; i < 3; i++ {
		for j := 0; j < 4; j++ {
			if mem.Slice()[i+3*j] != w.Local()[4*i+j] {
				t.Fatalf("loaded [%d,%d] = %v", i, j, mem.Slice()[i+3*j])
			}
		}
	}
	if err := LoadCheckpoint(dir, map[string]Sharded{"nope": b2}, nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing tensor: %v", err)
	}
	ck, err := OpenCheckpoint(dir)
	check(t, "open", err)
	ts, err := ck.Tensors()
	check(t, "tensors", err)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	if len(ts) != 2 || ts[1].Name != "w" || ts[1].Dtype != DtypeFloat32 || !reflect.DeepEqual(ts[1].Shape, []int{3, 4}) || ts[1].NumShards < 1 {
		t.Fatalf("tensors %+v", ts)
	}
	check(t, "verify", ck.Verify())
	st := filepath.Join(t.TempDir(), "all.safetensors")
	check(t, "export", ck.ExportSafetensors(st))
	check(t, "close", ck.Close())
	raw, err := os.ReadFile(st)
	check(t, "read", err)
	n := binary.LittleEndian.Uint64(raw[:8])
	var header map[string]json.RawMessage
	check(t, "json", json.Unmarshal(raw[8:8+n], &header))
	if _, ok := header["w"]; !ok {
		t.Fatalf("safetensors header %s", raw[8:8+n])
	}

	// A flipped byte in the largest data file is found (its last byte: shards are aligned in
	// the file, and the padding between them is not checksummed).
	entries, _ := os.ReadDir(dir)
	var victim string
	var size int64 = -1
	for _, e := range entries {
		if info, _ := e.Info(); e.Name() != "index.weft" && !e.IsDir() && info.Size() > size {
			victim, size = filepath.Join(dir, e.Name()), info.Size()
		}
	}
	data, _ := os.ReadFile(victim)
	data[len(data)-1] ^= 0xff
	check(t, "corrupt", os.WriteFile(victim, data, 0o644))
	ck, err = OpenCheckpoint(dir)
	check(t, "reopen", err)
	if err := ck.Verify(); err == nil {
		t.Fatal("a corrupt checkpoint verified")
	}
	ck.Close()
	if _, err := OpenCheckpoint(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("opened a missing checkpoint")
	}
}

// TestMeshMultiRank re-runs this test binary under `weftrun -n 4` with
// WEFT_GO_MESH_CHILD=1; each rank builds 1-d and 2-d meshes, redistributes between layouts and
// meshes, and saves and loads a checkpoint.
func TestMeshMultiRank(t *testing.T) {
	if os.Getenv("WEFT_GO_MESH_CHILD") != "" {
		meshChild(t)
		return
	}
	runUnderWeftrun(t, 4, "TestMeshMultiRank", "WEFT_GO_MESH_CHILD")
}

func global(shape []int, salt int) []float64 {
	out := make([]float64, product(shape))
	for i := range out {
		out[i] = float64((i*3+salt)%1000) - 300
	}
	return out
}

// box is the row-major box (shape, offset) of the row-major global tensor g of gshape.
func box(g []float64, gshape, shape, off []int) []float64 {
	n := product(shape)
	out := make([]float64, 0, n)
	idx := make([]int, len(shape))
	for k := 0; k < n; k++ {
		flat := 0
		for d := range gshape {
			flat = flat*gshape[d] + off[d] + idx[d]
		}
		out = append(out, g[flat])
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

func pieceOf(t *testing.T, m *Mesh, layout Layout, g []float64, gshape []int) []float64 {
	shape, off, err := m.LocalBox(layout, gshape, -1)
	check(t, "LocalBox", err)
	return box(g, gshape, shape, off)
}

// filled makes a tensor holding this rank's piece of g.
func filled(t *testing.T, m *Mesh, layout Layout, g []float64, gshape []int) *ShardedTensor[float64] {
	x, err := NewShardedTensor[float64](m, gshape, layout, "")
	check(t, "tensor", err)
	if m.IsMember() {
		copy(x.Local(), pieceOf(t, m, layout, g, gshape))
	}
	return x
}

func meshChild(t *testing.T) {
	c, err := InitFromEnv(nil)
	check(t, "init", err)
	rank, size := c.Rank(), c.Size()
	line, err := NewMesh(c, []int{size}, []string{"dp"}, nil)
	check(t, "line", err)
	grid, err := NewMesh(c, []int{2, size / 2}, []string{"dp", "tp"}, nil)
	check(t, "grid", err)
	if !reflect.DeepEqual(grid.Coords(), []int{rank / 2, rank % 2}) || grid.MeshRank() != rank {
		t.Fatalf("coords %v", grid.Coords())
	}
	tp, err := grid.CommByName("tp")
	check(t, "tp", err)
	x := []int64{int64(rank)}
	check(t, "tp allreduce", AllreduceInPlace(tp, x, OpSum))
	if x[0] != int64(rank/2*4+1) || tp.Size() != 2 || tp.Rank() != rank%2 {
		t.Fatalf("tp sum %d", x[0])
	}

	// S -> R on the line, uneven (7 rows over 4 ranks), plan and Full.
	shape := []int{7, 3}
	g := global(shape, 0)
	src := filled(t, line, Layout{Shard(0)}, g, shape)
	dst, _ := NewShardedTensor[float64](line, shape, Layout{Replicate()}, "")
	check(t, "S->R", Redistribute(src, dst))
	same(t, "S->R", dst.Local(), g)
	steps, err := Plan(src, dst)
	check(t, "plan", err)
	gathers := 0
	for _, s := range steps {
		if s.Kind == StepAllgather {
			gathers++
			if s.MeshDim != 0 || s.From != Shard(0) || s.To != Replicate() || s.MaxBytesSent < s.BytesSent {
				t.Fatalf("step %v", s)
			}
		}
	}
	if gathers != 1 {
		t.Fatalf("plan %v", steps)
	}
	full, err := Full(src)
	check(t, "full", err)
	same(t, "full", full, g)

	// S(0) -> S(1) asynchronously; Partial(sum) -> R and -> S.
	s1, _ := NewShardedTensor[float64](line, shape, Layout{Shard(1)}, "")
	req, err := RedistributeAsync(src, s1)
	check(t, "async", err)
	check(t, "wait", req.Wait())
	same(t, "S0->S1", s1.Local(), pieceOf(t, line, Layout{Shard(1)}, g, shape))
	term := make([]float64, len(g))
	total := make([]float64, len(g))
	for i, v := range g {
		term[i], total[i] = v*float64(rank+1), v*float64(size*(size+1)/2)
	}
	part, _ := NewShardedTensor[float64](line, shape, Layout{Partial(OpSum)}, "")
	copy(part.Local(), term)
	for _, lay := range []Layout{{Replicate()}, {Shard(0)}} {
		out, _ := NewShardedTensor[float64](line, shape, lay, "")
		check(t, fmt.Sprint("P->", lay), Redistribute(part, out))
		same(t, fmt.Sprint("P->", lay), out.Local(), pieceOf(t, line, lay, total, shape))
		out.Close()
	}

	// 2-d mesh: every pair of layouts.
	shape2 := []int{6, 5}
	g2 := global(shape2, 7)
	layouts := []Layout{{Shard(0), Shard(1)}, {Replicate(), Shard(0)}, {Shard(1), Replicate()}, {Shard(0), Shard(0)}}
	for _, from := range layouts {
		a := filled(t, grid, from, g2, shape2)
		for _, to := range layouts {
			b, _ := NewShardedTensor[float64](grid, shape2, to, "")
			check(t, fmt.Sprint(from, "->", to), Redistribute(a, b))
			same(t, fmt.Sprint(from, "->", to), b.Local(), pieceOf(t, grid, to, g2, shape2))
			b.Close()
		}
		a.Close()
	}

	// Between meshes: the line -> ranks [3, 1] (descriptors on 0 and 2), and back.
	pair, err := NewMesh(c, []int{2}, []string{"pp"}, []int{3, 1})
	check(t, "pair", err)
	if pair.IsMember() != (rank == 3 || rank == 1) {
		t.Fatalf("pair member %v", pair.IsMember())
	}
	onPair, err := NewShardedTensor[float64](pair, shape, Layout{Shard(1)}, "")
	check(t, "pair tensor", err)
	if onPair.IsDescriptor() == pair.IsMember() {
		t.Fatal("descriptor on the wrong ranks")
	}
	check(t, "mesh to mesh", Redistribute(src, onPair))
	if pair.IsMember() {
		same(t, "mesh to mesh", onPair.Local(), pieceOf(t, pair, Layout{Shard(1)}, g, shape))
	}
	back, _ := NewShardedTensor[float64](line, shape, Layout{Replicate()}, "")
	check(t, "back", Redistribute(onPair, back))
	same(t, "back", back.Local(), g)

	// Checkpoint: save from the line, load on the grid.
	path := make([]byte, 256)
	if rank == 0 {
		copy(path, filepath.Join(os.TempDir(), fmt.Sprintf("weft-go-mesh-ckpt-%d", os.Getpid())))
	}
	check(t, "bcast path", Broadcast(c, path, 0))
	dir := strings.TrimRight(string(path), "\x00")
	ints, _ := NewShardedTensor[int32](line, []int{10}, Layout{Replicate()}, "")
	for i := range ints.Local() {
		ints.Local()[i] = int32(i*7 - 20)
	}
	check(t, "save", SaveCheckpoint(c, dir, map[string]Sharded{"w": src, "p": part, "i": ints}, &CheckpointConfig{NoFsync: true}))
	check(t, "barrier", c.Barrier())
	lw := Layout{Replicate(), Shard(1)}
	w2, _ := NewShardedTensor[float64](grid, shape, lw, "")
	p2, _ := NewShardedTensor[float64](grid, shape, Layout{Replicate(), Replicate()}, "")
	i2, _ := NewShardedTensor[int32](grid, []int{10}, Layout{Shard(0), Shard(0)}, "")
	check(t, "load", LoadCheckpoint(dir, map[string]Sharded{"w": w2, "p": p2, "i": i2}, nil))
	same(t, "w", w2.Local(), pieceOf(t, grid, lw, g, shape))
	same(t, "p", p2.Local(), total)
	_, off, _ := grid.LocalBox(Layout{Shard(0), Shard(0)}, []int{10}, -1)
	for k, v := range i2.Local() {
		if v != int32((off[0]+k)*7-20) {
			t.Fatalf("i[%d] = %d", off[0]+k, v)
		}
	}
	if rank == 2 {
		ck, err := OpenCheckpoint(dir)
		check(t, "open", err)
		ts, err := ck.Tensors()
		check(t, "tensors", err)
		if len(ts) != 3 {
			t.Fatalf("tensors %+v", ts)
		}
		check(t, "verify", ck.Verify())
		ck.Close()
	}
	check(t, "barrier", c.Barrier())
	if rank == 0 {
		os.RemoveAll(dir)
	}
	for _, x := range []*ShardedTensor[float64]{src, dst, s1, part, onPair, back, w2, p2} {
		check(t, "close tensor", x.Close())
	}
	ints.Close()
	i2.Close()
	check(t, "close pair", pair.Close())
	check(t, "close grid", grid.Close())
	check(t, "close line", line.Close())
	check(t, "close", c.Close())
	t.Logf("rank %d: all Go mesh checks passed", rank)
}
