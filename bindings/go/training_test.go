package weft

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tests of the training family (weft/training.h): one-rank checks here, and
// TestTrainingMultiRank under `weftrun -n 3`: bucketer reductions against a plain sum, the MLP of
// mlp_test.go trained data-parallel with the bucketer and with ZeRO stages 0-3 against the same
// training in one process (<= 1e-5 relative), bad input, region_apply and ring_shift.

const parityTolerance = 1e-5

func TestTrainingDefaults(t *testing.T) {
	b := DefaultBucketerConfig()
	if b.Op != OpAvg || b.Wire != WireNative || b.Reduction != BucketAllreduce || b.BucketBytes != 0 {
		t.Fatalf("DefaultBucketerConfig %+v", b)
	}
	z := DefaultZeroConfig()
	if z.Stage != 2 || z.ParamDtype != DtypeFloat32 || z.GradOp != OpAvg || z.LossScale != 1 || z.GrowthInterval != 2000 ||
		z.Optimizer.Kind != OptimizerAdamW || z.Optimizer.LR != 1e-3 || z.Optimizer.Eps != 1e-8 {
		t.Fatalf("DefaultZeroConfig %+v", z)
	}
	if RegionSeqReduceScatter != 5 || WireFP8E4M3 != 2 || WireFP8Block != 256 {
		t.Fatal("enum values differ from training.h")
	}
	if err := Tensor([]float32{1, 2, 3}, 2, 2).err; !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a shape of the wrong size: %v", err)
	}
}

func TestTrainingOneRank(t *testing.T) {
	c := solo(t)
	a, b := NewHostMemory[float32](5), NewHostMemory[float32](3)
	defer a.Free()
	defer b.Free()
	for i := range a.Slice() {
		a.Slice()[i] = 1.5
	}
	cfg := DefaultBucketerConfig()
	cfg.Op, cfg.Reduction = OpSum, BucketReduceScatter
	bk, err := NewBucketer(c, []Gradient{{Mem: a}, {Mem: b, Shape: []int{3, 1}}}, &cfg)
	must(t, err)
	nb, err := bk.NumBuckets()
	must(t, err)
	bucket, off, err := bk.BucketOf(1)
	must(t, err)
	if nb != 1 || bucket != 0 || off != 5 {
		t.Fatalf("buckets %d, gradient 1 at %d/%d", nb, bucket, off)
	}
	must(t, bk.MarkReady(1))
	must(t, bk.MarkReady(0))
	must(t, bk.Finish())
	soff, shard, err := BucketShard[float32](bk, 0)
	must(t, err)
	eq(t, shard, []float32{1.5, 1.5, 1.5, 1.5, 1.5, 0, 0, 0})
	if soff != 0 {
		t.Fatalf("shard offset %d", soff)
	}
	if _, _, err := BucketShard[float64](bk, 0); err == nil {
		t.Fatal("a shard of the wrong element type")
	}
	st, err := bk.Stats()
	must(t, err)
	if st.Steps != 1 {
		t.Fatalf("stats %+v", st)
	}
	must(t, bk.Close())
	must(t, bk.Close())
	if err := bk.MarkReady(0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a closed bucketer: %v", err)
	}

	m, err := NewMesh(c, []int{1}, []string{"dp"}, nil)
	must(t, err)
	defer m.Close()
	zc := DefaultZeroConfig()
	zc.Stage = 3
	zc.Optimizer = OptimizerConfig{Kind: OptimizerSGD, LR: 0.5}
	z, err := NewZero(m, "dp", []HostTensor{Tensor([]float32{1, 2, 3, 4}, 2, 2)}, &zc)
	must(t, err)
	if _, err := ZeroParam[float32](z, 0); err == nil {
		t.Fatal("stage 3: a parameter read before its gather")
	}
	r, err := z.GatherAsync(0)
	must(t, err)
	must(t, r.Wait())
	w, err := ZeroParam[float32](z, 0)
	must(t, err)
	eq(t, w, []float32{1, 2, 3, 4})
	must(t, z.Release(0))
	must(t, z.GradReady(0, Tensor([]float32{2, 2, 2, 2}, 2, 2)))
	info, err := z.Step()
	must(t, err)
	if info.Skipped || info.GradNorm != 4 {
		t.Fatalf("step %+v", info)
	}
	must(t, z.Gather(0))
	w, err = z.ParamFloat32(0)
	must(t, err)
	eq(t, w, []float32{0, 1, 2, 3})
	must(t, z.Close())

	x, y := []float64{1, 2, 3}, make([]float64, 3)
	must(t, RegionApply(m, "dp", RegionGather, false, 0, Tensor(x), Tensor(y)))
	eq(t, y, x)
	if err := RegionApply(m, "nope", RegionCopy, false, 0, Tensor(x), Tensor(y)); err == nil {
		t.Fatal("an unknown mesh dim")
	}
	ring := make([]uint8, 2)
	must(t, RingShift(m, "dp", 1, []uint8{7, 9}, ring))
	eq(t, ring, []uint8{7, 9})
}

// ------------------------------------------------------------------ three ranks

func TestTrainingMultiRank(t *testing.T) {
	if os.Getenv("WEFT_GO_TRAINING_CHILD") != "" {
		trainingChild(t)
		return
	}
	runUnderWeftrun(t, 3, "TestTrainingMultiRank", "WEFT_GO_TRAINING_CHILD")
}

func trainingChild(t *testing.T) {
	c, err := InitFromEnv(nil)
	check(t, "init", err)
	defer c.Close()
	if c.Size() != 3 {
		t.Fatalf("size %d", c.Size())
	}
	bucketerReductions(t, c)
	bucketerTraining(t, c)
	bucketerBadInput(t, c)
	m, err := NewMesh(c, []int{c.Size()}, []string{"dp"}, nil)
	check(t, "mesh", err)
	defer m.Close()
	zeroTraining(t, c, m)
	zeroBadInput(t, m)
	regionsAndRing(t, c, m)
	check(t, "barrier", c.Barrier())
}

// gradValue is gradient g's element i on rank r: small integers, so every sum is exact.
func gradValue(r, g, i int) float64 { return float64((i*7+g*3+r)%9) - 4 }

func bucketerReductions(t *testing.T, c *Comm) {
	rank, n := c.Rank(), c.Size()
	sum := func(g, i int) float64 {
		s := 0.0
		for r := 0; r < n; r++ {
			s += gradValue(r, g, i)
		}
		return s
	}
	sizes := []int{1, 7, 1000}
	for _, red := range []BucketReduction{BucketAllreduce, BucketReduceScatter} {
		// Three float32 gradients and one float64 (a bucket of its own: the dtype changes).
		f32 := make([]*HostMemory[float32], len(sizes))
		grads := make([]Gradient, 0, 4)
		for g, size := range sizes {
			f32[g] = NewHostMemory[float32](size)
			for i := range f32[g].Slice() {
				f32[g].Slice()[i] = float32(gradValue(rank, g, i))
			}
			grads = append(grads, Gradient{Mem: f32[g]})
		}
		f64 := NewHostMemory[float64](13)
		for i := range f64.Slice() {
			f64.Slice()[i] = gradValue(rank, 3, i)
		}
		grads = append(grads, Gradient{Mem: f64})
		cfg := DefaultBucketerConfig()
		cfg.BucketBytes, cfg.Op, cfg.Reduction = 64, OpSum, red
		bk, err := NewBucketer(c, grads, &cfg)
		check(t, "bucketer", err)
		for _, g := range []int{3, 2, 1, 0} {
			check(t, "mark", bk.MarkReady(g))
		}
		check(t, "finish", bk.Finish())
		for g := 0; g < 4; g++ {
			size := 13
			if g < 3 {
				size = sizes[g]
			}
			got := func(i int) float64 {
				if g == 3 {
					return f64.Slice()[i]
				}
				return float64(f32[g].Slice()[i])
			}
			if red == BucketAllreduce {
				for i := 0; i < size; i++ {
					if got(i) != sum(g, i) {
						t.Fatalf("all-reduced gradient %d element %d: %v, want %v", g, i, got(i), sum(g, i))
					}
				}
				continue
			}
			bucket, goff, err := bk.BucketOf(g)
			check(t, "bucket_of", err)
			var soff int
			var shard []float64
			if g == 3 {
				soff, shard, err = BucketShard[float64](bk, bucket)
			} else {
				var s32 []float32
				soff, s32, err = BucketShard[float32](bk, bucket)
				shard = make([]float64, len(s32))
				for i, v := range s32 {
					shard[i] = float64(v)
				}
			}
			check(t, "shard", err)
			for e := max(goff, soff); e < min(goff+size, soff+len(shard)); e++ {
				if shard[e-soff] != sum(g, e-goff) {
					t.Fatalf("reduce-scattered gradient %d element %d: %v, want %v", g, e-goff, shard[e-soff], sum(g, e-goff))
				}
			}
		}
		st, err := bk.Stats()
		check(t, "stats", err)
		if st.Steps != 1 || st.WireBytes == 0 {
			t.Fatalf("stats %+v", st)
		}
		check(t, "close", bk.Close())
		for _, g := range f32 {
			g.Free()
		}
		f64.Free()
	}
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func expectParity(t *testing.T, what string, rank int, got, want params) {
	t.Helper()
	for p := range want {
		e := relErr(got[p], want[p])
		if rank == 0 {
			t.Logf("%s parity %s: relative error %.2e", what, mlpNames[p], e)
		}
		if e > parityTolerance {
			t.Fatalf("%s, %s: relative error %e", what, mlpNames[p], e)
		}
	}
}

func bucketerTraining(t *testing.T, c *Comm) {
	rank, n := c.Rank(), c.Size()
	rows, steps := mlpBatch/n, 10
	p := mlpInit(7)
	opt := refAdamW(0.01)
	// Registered in backward's order (W2, b2, W1, b1), 100-byte buckets: a few of them.
	order := []int{2, 3, 0, 1}
	mem := make([]*HostMemory[float32], 4)
	grads := make([]Gradient, 4)
	names := make([]string, 4)
	for slot, q := range order {
		mem[q] = NewHostMemory[float32](mlpCount(q))
		defer mem[q].Free()
		grads[slot] = Gradient{Mem: mem[q], Shape: mlpShapes[q]}
		names[slot] = mlpNames[q]
	}
	cfg := DefaultBucketerConfig()
	cfg.BucketBytes, cfg.Names = 100, names
	bk, err := NewBucketer(c, grads, &cfg)
	check(t, "bucketer", err)
	defer bk.Close()
	if nb, err := bk.NumBuckets(); err != nil || nb < 2 {
		t.Fatalf("%d buckets: %v", nb, err)
	}
	slotOf := map[int]int{2: 0, 3: 1, 0: 2, 1: 3}
	for step := 0; step < steps; step++ {
		x, y := mlpBatchOf(step)
		a := mlpForward(p, x, rank*rows, rows)
		mlpBackward(p, a, y, float32(rows), func(q int, g []float32) {
			copy(mem[q].Slice(), g)
			check(t, "mark", bk.MarkReady(slotOf[q]))
		})
		check(t, "finish", bk.Finish())
		g := make(params, 4)
		for q := range g {
			g[q] = mem[q].Slice()
		}
		opt.step(p, g)
	}
	expectParity(t, "bucketer DP", rank, p, mlpReference(steps, refAdamW(0.01)))
}

func bucketerBadInput(t *testing.T, c *Comm) {
	w, b := NewHostMemory[float32](10), NewHostMemory[float32](5)
	defer w.Free()
	defer b.Free()
	cfg := DefaultBucketerConfig()
	cfg.Names = []string{"layer.weight", "layer.bias"}
	bk, err := NewBucketer(c, []Gradient{{Mem: w}, {Mem: b}}, &cfg)
	check(t, "bucketer", err)
	defer bk.Close()
	check(t, "mark 0", bk.MarkReady(0))
	err = bk.MarkReady(0)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "layer.weight") {
		t.Fatalf("marking a gradient twice: %v", err)
	}
	check(t, "mark 1", bk.MarkReady(1))
	check(t, "finish", bk.Finish())
	cfg.BucketOf = []int{0}
	if _, err := NewBucketer(c, []Gradient{{Mem: w}, {Mem: b}}, &cfg); err == nil {
		t.Fatal("BucketOf of the wrong length")
	}
}

var zeroGroups = []int{0, 0, 1, 1}

func newMLPZero(t *testing.T, m *Mesh, stage int, opt OptimizerConfig) *Zero {
	init := mlpInit(7)
	ps := make([]HostTensor, 4)
	for q := range ps {
		ps[q] = Tensor(init[q], mlpShapes[q]...)
	}
	cfg := DefaultZeroConfig()
	cfg.Stage, cfg.Optimizer, cfg.Groups, cfg.Names = stage, opt, zeroGroups, mlpNames
	z, err := NewZero(m, "dp", ps, &cfg)
	check(t, "zero", err)
	return z
}

// readParams copies every parameter (stage 3: group 0 gathered blocking, group 1 as a prefetch).
func readParams(t *testing.T, z *Zero) params {
	check(t, "gather 0", z.Gather(0))
	r, err := z.GatherAsync(1)
	check(t, "gather 1", err)
	check(t, "wait 1", r.Wait())
	p := make(params, 4)
	for q := range p {
		p[q], err = z.ParamFloat32(q)
		check(t, "param", err)
	}
	check(t, "release 0", z.Release(0))
	check(t, "release 1", z.Release(1))
	return p
}

func trainZero(t *testing.T, z *Zero, first, last, rank, n int) []ZeroStepInfo {
	rows := mlpBatch / n
	var infos []ZeroStepInfo
	for step := first; step < last; step++ {
		x, y := mlpBatchOf(step)
		p := readParams(t, z)
		a := mlpForward(p, x, rank*rows, rows)
		mlpBackward(p, a, y, float32(rows), func(q int, g []float32) {
			check(t, "grad_ready", z.GradReady(q, Tensor(g, mlpShapes[q]...)))
		})
		info, err := z.Step()
		check(t, "step", err)
		infos = append(infos, info)
	}
	return infos
}

func adamW() OptimizerConfig {
	o := DefaultOptimizerConfig()
	o.LR = 0.01
	return o
}

func zeroTraining(t *testing.T, c *Comm, m *Mesh) {
	rank, n := c.Rank(), c.Size()
	steps := 8
	want := mlpReference(steps, refAdamW(0.01))
	padded := (mlpCount(0)+mlpCount(1)+n-1)/n*n + (mlpCount(2)+mlpCount(3)+n-1)/n*n
	for stage := 0; stage <= 3; stage++ {
		z := newMLPZero(t, m, stage, adamW())
		if ng, err := z.NumGroups(); err != nil || ng != 2 {
			t.Fatalf("%d groups: %v", ng, err)
		}
		for q, g := range zeroGroups {
			if got, err := z.GroupOf(q); err != nil || got != g {
				t.Fatalf("group of %d: %d, %v", q, got, err)
			}
		}
		infos := trainZero(t, z, 0, steps, rank, n)
		for _, i := range infos {
			if i.Skipped || i.GradNorm <= 0 || i.LossScale != 1 || i.CommElements != uint64(2*padded) {
				t.Fatalf("stage %d: step info %+v (P = %d)", stage, i, padded)
			}
		}
		mem, err := z.Memory()
		check(t, "memory", err)
		wantParams, wantOpt := 4*padded, 8*padded/n
		if stage == 3 {
			wantParams = 4 * padded / n
		}
		if stage == 0 {
			wantOpt = 8 * padded
		}
		if mem.Params != uint64(wantParams) || mem.Optimizer != uint64(wantOpt) {
			t.Fatalf("stage %d: memory %+v, want params %d optimizer %d", stage, mem, wantParams, wantOpt)
		}
		expectParity(t, fmt.Sprintf("ZeRO stage %d", stage), rank, readParams(t, z), want)
		check(t, "close", z.Close())
	}

	sgd := OptimizerConfig{Kind: OptimizerSGD, LR: 0.05, Momentum: 0.9, WeightDecay: 0.01}
	z := newMLPZero(t, m, 3, sgd)
	trainZero(t, z, 0, steps, rank, n)
	expectParity(t, "ZeRO stage 3 SGD", rank, readParams(t, z), mlpReference(steps, refSGD(0.05, 0.9)))
	check(t, "close", z.Close())

	// Stage 1: 4 steps, saved, loaded into a fresh handle, 4 more steps = 8 steps.
	buf := make([]uint8, 256)
	if rank == 0 {
		dir, err := os.MkdirTemp("", "weft-go-zero-")
		check(t, "tempdir", err)
		copy(buf, filepath.Join(dir, "state"))
	}
	check(t, "broadcast", Broadcast(c, buf, 0))
	dir := strings.TrimRight(string(buf), "\x00")
	z = newMLPZero(t, m, 1, adamW())
	trainZero(t, z, 0, steps/2, rank, n)
	check(t, "save", z.Save(dir))
	check(t, "close", z.Close())
	z = newMLPZero(t, m, 1, adamW())
	check(t, "load", z.Load(dir))
	trainZero(t, z, steps/2, steps, rank, n)
	expectParity(t, "ZeRO stage 1 saved and resumed", rank, readParams(t, z), want)
	check(t, "close", z.Close())
	check(t, "barrier", c.Barrier())
	if rank == 0 {
		os.RemoveAll(filepath.Dir(dir))
	}
}

func zeroBadInput(t *testing.T, m *Mesh) {
	z := newMLPZero(t, m, 3, adamW())
	defer z.Close()
	if _, err := ZeroParam[float32](z, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("stage 3: a parameter read before its gather: %v", err)
	}
	g := make([]float32, mlpCount(0))
	check(t, "grad_ready", z.GradReady(0, Tensor(g, mlpShapes[0]...)))
	err := z.GradReady(0, Tensor(g, mlpShapes[0]...))
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "fc1.weight") {
		t.Fatalf("a gradient given twice: %v", err)
	}
	if _, err := z.Step(); err == nil || !strings.Contains(err.Error(), "fc1.bias") {
		t.Fatalf("a step with a missing gradient: %v", err)
	}
}

func regionsAndRing(t *testing.T, c *Comm, m *Mesh) {
	rank, n := c.Rank(), c.Size()
	rows, cols := 7, 2 // chunks of 3, 3 and 1 rows over 3 ranks
	g := make([]float32, rows*cols)
	for i := range g {
		g[i] = float32(i) - 5
	}
	chunk := (rows + n - 1) / n
	lo, hi := min(rank*chunk, rows), min((rank+1)*chunk, rows)
	mine := g[lo*cols : hi*cols]
	scaled := func(k float32) []float32 {
		out := make([]float32, len(g))
		for i, v := range g {
			out[i] = v * k
		}
		return out
	}
	out := make([]float32, len(mine))
	check(t, "scatter", RegionApply(m, "dp", RegionScatter, false, 0, Tensor(g, rows, cols), Tensor(out, hi-lo, cols)))
	eq(t, out, mine)
	all := make([]float32, len(g))
	check(t, "gather", RegionApply(m, "dp", RegionGather, false, 0, Tensor(mine, hi-lo, cols), Tensor(all, rows, cols)))
	eq(t, all, g)
	x := scaled(float32(rank + 1))
	check(t, "copy backward", RegionApply(m, "dp", RegionCopy, true, 0, Tensor(x, rows, cols), Tensor(x, rows, cols)))
	total := float32(n * (n + 1) / 2)
	eq(t, x, scaled(total))
	part := scaled(float32(rank + 1))
	rs1, rs2 := make([]float32, len(mine)), make([]float32, len(mine))
	r1, err := RegionApplyAsync(m, "dp", RegionSeqReduceScatter, false, 0, Tensor(part, rows, cols), Tensor(rs1, hi-lo, cols))
	check(t, "seq reduce-scatter", err)
	r2, err := RegionApplyAsync(m, "dp", RegionSeqGather, true, 0, Tensor(part, rows, cols), Tensor(rs2, hi-lo, cols))
	check(t, "seq gather backward", err)
	send, recv, back := []int64{int64(rank) * 10, 1, 2}, make([]int64, 3), make([]int64, 3)
	r3, err := RingShiftAsync(m, "dp", 1, send, recv)
	check(t, "ring", err)
	check(t, "wait", WaitAll(r1, r2, r3))
	want := make([]float32, len(mine))
	for i, v := range mine {
		want[i] = v * total
	}
	eq(t, rs1, want)
	eq(t, rs2, want)
	eq(t, recv, []int64{int64((rank+n-1)%n) * 10, 1, 2})
	check(t, "ring back", RingShift(m, "dp", -1, recv, back))
	eq(t, back, send)
	if err := RingShift(m, "dp", 3, send, make([]int64, 2)); err == nil {
		t.Fatal("a shift by the group size with a short recv")
	}
	err = RegionApply(m, "dp", RegionScatter, false, 0, Tensor(g, rows, cols), Tensor(make([]float32, 1), 1, 1))
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "out") {
		t.Fatalf("a wrong output shape: %v", err)
	}
}
