package weft

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Single-process tests of the planner (weft/plan.h): a one-layer model on 2 ranks against closed
// forms written here from plan.h's cost model, the search's order and rules, the text files, and
// bad input refused with weft's message.
//
// The reference (plan.h): a dense layer of P parameters, forward f and backward b seconds per
// sample, on n samples in one micro-batch (GPipe, m = 1, pp = 1: no bubble) computes n (f + b).
// Data parallelism over dp ranks then all-reduces the P x 2 gradient bytes in a ring:
// 2 (dp - 1) / dp x bytes / bandwidth + 2 (dp - 1) x latency, sending 2 (dp - 1) / dp x bytes.
// Tensor parallelism over tp divides the compute by tp and adds 4 ring all-reduces of
// output_bytes x samples. Memory: P x (2 + 2 + 12) bytes plus one micro-batch's activations.
// Tolerance 1e-9 relative: the library adds the same few doubles in another order (rounding
// about 1e-15), while a wrong term moves the result by >= 1e-3 here.
// WEFT_TEST_INJECT=1: every check corrupts its value and must fail (pipeline_model_test.go).

const (
	planP, planF, planB, planAct, planOut = 1000.0, 1e-3, 3e-3, 100.0, 64.0
	planBW, planLat                       = 1e6, 1e-5
	planG                                 = 8
	planRel                               = 1e-9
)

func planModel() []PlanLayer {
	l := DefaultPlanLayer("fc")
	l.Params, l.ForwardSeconds, l.BackwardSeconds = planP, planF, planB
	l.ActivationBytes, l.OutputBytes = planAct, planOut
	return []PlanLayer{l}
}

func planCluster(memory float64) *PlanCluster {
	c := DefaultPlanCluster()
	c.RanksPerHost, c.MemoryPerRank, c.IntraBandwidth, c.IntraLatency = 2, memory, planBW, planLat
	return &c
}

// ringAllreduce is (seconds, bytes a rank sends) of a ring all-reduce of bytes over n ranks.
func ringAllreduce(n, bytes float64) (float64, float64) {
	return 2*(n-1)/n*bytes/planBW + 2*(n-1)*planLat, 2 * (n - 1) / n * bytes
}

func gpipeM1(dp, tp int) *PlanLayout {
	l := DefaultPlanLayout()
	l.DP, l.TP, l.Schedule, l.Microbatches = dp, tp, ScheduleGPipe, 1
	return &l
}

func predictLayout(t *testing.T, l *PlanLayout) *LayoutPlan {
	t.Helper()
	p, err := NewLayoutPlan(&PlanConfig{Layers: planModel(), Cluster: planCluster(1e9), GlobalBatch: planG, Layout: l})
	if err != nil {
		t.Fatalf("NewLayoutPlan: %v", err)
	}
	return p
}

// planOK returns v, panicking (the test fails with the message) on an error.
func planOK[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestPlanDataParallelClosedForm(t *testing.T) {
	k := newChecks(t, "plan dp=2")
	n := float64(planG / 2) // samples per replica, one micro-batch
	compute := n * (planF + planB)
	comm, sent := ringAllreduce(2, planP*2)
	step := compute + comm
	p := predictLayout(t, gpipeM1(2, 1))
	defer p.Close()
	info := planOK(p.Info())
	k.count("kept", info.Count, 1)
	k.count("ranks", info.Ranks, 2)
	b := planOK(p.Layout(0))
	k.count("dp", b.DP, 2)
	k.count("tp", b.TP, 1)
	k.count("pp", b.PP, 1)
	k.text("schedule", b.Schedule.String(), "gpipe")
	k.holds("fits", b.Fits)
	k.close("StepSeconds", b.StepSeconds, step, planRel)
	k.close("ComputeSeconds", b.ComputeSeconds, compute, planRel)
	k.close("CommunicationSeconds", b.CommunicationSeconds, comm, planRel)
	k.close("CommunicationBytes", b.CommunicationBytes, sent, planRel)
	k.close("StaticBytes", b.StaticBytes, planP*16, planRel)
	k.close("MemoryPerRank", b.MemoryPerRank, planP*16+n*planAct, planRel)

	oneRank := planG * (planF + planB)
	speedup := oneRank / step
	s := (1/speedup - 0.5) / 0.5
	sum, points, err := p.Scaling()
	if err != nil {
		t.Fatalf("Scaling: %v", err)
	}
	k.close("OneRankSeconds", sum.OneRankSeconds, oneRank, planRel)
	k.close("Speedup", sum.Speedup, speedup, planRel)
	k.close("Efficiency", sum.Efficiency, speedup/2, planRel)
	k.close("SerialFraction", sum.SerialFraction, s, planRel)
	k.close("GustafsonSpeedup", sum.GustafsonSpeedup, 2-s, planRel)
	k.count("points", len(points), 2)
	k.count("weak batch at 1", points[0].WeakBatch, planG/2)
	k.close("Amdahl at 2", points[1].AmdahlSpeedup, 1/(s+(1-s)/2), planRel)
	k.close("weak speedup at 2", points[1].WeakSpeedup, 2*n*(planF+planB)/step, planRel)
	k.finish()
}

func TestPlanTensorParallelClosedForm(t *testing.T) {
	k := newChecks(t, "plan tp=2")
	compute := planG * (planF + planB) / 2
	per, sent := ringAllreduce(2, planOut*planG)
	p := predictLayout(t, gpipeM1(1, 2))
	defer p.Close()
	b := planOK(p.Layout(0))
	k.count("tp", b.TP, 2)
	k.close("ComputeSeconds", b.ComputeSeconds, compute, planRel)
	k.close("CommunicationSeconds", b.CommunicationSeconds, 4*per, planRel)
	k.close("StepSeconds", b.StepSeconds, compute+4*per, planRel)
	k.close("CommunicationBytes", b.CommunicationBytes, 4*sent, planRel)
	k.finish()
}

// TestPlanTPReplicatedAndAllreduces: plan.h: a layer split over tp keeps its TPReplicated share r
// whole on every tp rank, so a rank computes G (f + b) (r + (1 - r) / tp); TPAllreduces = 1 (an
// MLP alone) runs one ring all-reduce of out x G per direction instead of Megatron's 2 (GPipe, one
// micro-batch of G). The model file's tp_rep= and tp_ar= keys give the same; a share over 1 is
// refused.
func TestPlanTPReplicatedAndAllreduces(t *testing.T) {
	k := newChecks(t, "plan tp_replicated")
	tp, r := 2.0, 0.25
	compute := planG * (planF + planB) * (r + (1-r)/tp) // 0.625 G (f + b)
	per, sent := ringAllreduce(tp, planOut*planG)       // 2 (n-1)/n x bytes / bw + 2 (n-1) x latency
	mlp := planModel()
	mlp[0].Name, mlp[0].TPReplicated, mlp[0].TPAllreduces = "mlp", r, 1
	p, err := NewLayoutPlan(&PlanConfig{Layers: mlp, Cluster: planCluster(1e9), GlobalBatch: planG, Layout: gpipeM1(1, 2)})
	if err != nil {
		t.Fatalf("NewLayoutPlan: %v", err)
	}
	defer p.Close()
	b := planOK(p.Layout(0))
	k.count("tp", b.TP, 2)
	k.close("ComputeSeconds", b.ComputeSeconds, compute, planRel)
	k.close("CommunicationSeconds", b.CommunicationSeconds, 2*per, planRel)
	k.close("StepSeconds", b.StepSeconds, compute+2*per, planRel)
	k.close("CommunicationBytes", b.CommunicationBytes, 2*sent, planRel)

	dir := t.TempDir()
	m, c := filepath.Join(dir, "model.txt"), filepath.Join(dir, "cluster.txt")
	for path, text := range map[string]string{
		m: "layer name=mlp params=1000 fwd=1e-3 bwd=3e-3 act=100 out=64 tp_rep=0.25 tp_ar=1\ntrain global_batch=8\n",
		c: "cluster ranks_per_host=2 memory=1e9 intra_bw=1e6 intra_lat=1e-5\n",
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	loaded, err := LoadLayoutPlan(m, c, &PlanConfig{Layout: gpipeM1(1, 2)})
	if err != nil {
		t.Fatalf("LoadLayoutPlan: %v", err)
	}
	defer loaded.Close()
	k.close("file: tp_rep=0.25 tp_ar=1", planOK(loaded.Layout(0)).StepSeconds, compute+2*per, planRel)

	mlp[0].TPReplicated = 1.5
	_, err = NewLayoutPlan(&PlanConfig{Layers: mlp, Cluster: planCluster(1e9), GlobalBatch: planG, Layout: gpipeM1(1, 2)})
	k.holds("tp_replicated 1.5 is ErrInvalidArgument", errors.Is(err, ErrInvalidArgument))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	k.contains("tp_replicated 1.5", msg, "tp_replicated")
	k.finish()
}

// TestPlanGradAllreduceBytesAndSharedParams: GradAllreduceBytes adds a ring all-reduce of that
// many bytes per parameter over the replicas before the DP reduction; an MoE layer's
// SharedParams are summed over tp once a step, then reduced as dense ones, while its experts
// (Params - SharedParams, ep 1) are reduced over their dp x tp / ep = 2 replicas (plan.h).
func TestPlanGradAllreduceBytesAndSharedParams(t *testing.T) {
	k := newChecks(t, "plan grad_allreduce_bytes/shared_params")
	n := float64(planG / 2)
	wide, _ := ringAllreduce(2, planP*8)
	plain, _ := ringAllreduce(2, planP*2)
	p, err := NewLayoutPlan(&PlanConfig{Layers: planModel(), Cluster: planCluster(1e9), GlobalBatch: planG,
		Layout: gpipeM1(2, 1), GradAllreduceBytes: 8})
	if err != nil {
		t.Fatalf("NewLayoutPlan: %v", err)
	}
	defer p.Close()
	b := planOK(p.Layout(0))
	k.close("dp 2, GradAllreduceBytes 8: step", b.StepSeconds, n*(planF+planB)+wide+plain, planRel)
	k.close("dp 2, GradAllreduceBytes 8: communication", b.CommunicationSeconds, wide+plain, planRel)

	s, tp := 200.0, 2.0
	moe := planModel()
	moe[0].Name, moe[0].Experts, moe[0].TopK, moe[0].SharedParams = "moe", 2, 1, s
	gather := (tp-1)/tp*planOut*planG/planBW + (tp-1)*planLat
	shared, _ := ringAllreduce(tp, s*2)
	experts, _ := ringAllreduce(tp, (planP-s)*2)
	compute := planG * (planF + planB) / tp
	lay := gpipeM1(1, 2)
	lay.EP = 1
	mp, err := NewLayoutPlan(&PlanConfig{Layers: moe, Cluster: planCluster(1e9), GlobalBatch: planG, Layout: lay})
	if err != nil {
		t.Fatalf("NewLayoutPlan(moe): %v", err)
	}
	defer mp.Close()
	mb := planOK(mp.Layout(0))
	k.close("tp 2, SharedParams 200: step", mb.StepSeconds, compute+2*gather+shared+experts, planRel)
	k.close("tp 2, SharedParams 200: static bytes", mb.StaticBytes, planP*16, planRel)
	moe[0].SharedParams = 2 * planP
	_, err = NewLayoutPlan(&PlanConfig{Layers: moe, Cluster: planCluster(1e9), GlobalBatch: planG, Layout: lay})
	k.holds("SharedParams above Params is ErrInvalidArgument", errors.Is(err, ErrInvalidArgument))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	k.contains("SharedParams above Params", msg, "shared_params")
	k.finish()
}

// TestPlanEveryFieldReachesTheLibrary: closed forms that only hold when each description field
// arrives where plan.h puts it (the binding's field mapping): the inter-host link, flops, bytes
// per parameter and the overhead; an MoE layer under expert parallelism; a layer kept whole over
// tp; context parallelism.
func TestPlanEveryFieldReachesTheLibrary(t *testing.T) {
	k := newChecks(t, "plan fields")
	n := float64(planG / 2)
	gm1 := func(dp, tp, ep, cp int) *PlanLayout {
		l := DefaultPlanLayout()
		l.DP, l.TP, l.EP, l.CP, l.Schedule, l.Microbatches = dp, tp, ep, cp, ScheduleGPipe, 1
		return &l
	}
	best := func(cfg PlanConfig) PlanLayout {
		cfg.GlobalBatch = planG
		p := planOK(NewLayoutPlan(&cfg))
		defer p.Close()
		return planOK(p.Layout(0))
	}
	// (a) 2 hosts of 1 rank: dp = 2 crosses hosts. Compute from flops; backward = 2 x forward;
	// 4 + 4 + 4 bytes per parameter; the 2 compute actions (F, B) of one micro-batch get the overhead.
	flops, ibw, ilat, over := 1e9, 2e6, 3e-5, 1e-4
	hosts := PlanCluster{Hosts: 2, RanksPerHost: 1, MemoryPerRank: 1e9, FlopsPerRank: flops, IntraBandwidth: planBW,
		IntraLatency: planLat, InterBandwidth: ibw, InterLatency: ilat}
	byFlops := DefaultPlanLayer("fc")
	byFlops.Params, byFlops.ForwardFlops, byFlops.ActivationBytes, byFlops.OutputBytes = planP, planF*flops, planAct, planOut
	b := best(PlanConfig{Layers: []PlanLayer{byFlops}, Cluster: &hosts, Layout: gm1(2, 1, 1, 1), WeightBytes: 4,
		GradBytes: 4, OptimizerBytes: 4, MicrobatchOverhead: over})
	k.close("inter-host dp: compute", b.ComputeSeconds, n*3*planF, planRel)
	k.close("inter-host dp: step", b.StepSeconds, n*3*planF+2*over+planP*4/ibw+2*ilat, planRel)
	k.close("inter-host dp: static", b.StaticBytes, planP*12, planRel)
	// (b) experts 2, top_k 1 over ep = 2 (dp = 2): 4 all-to-alls of top_k x out x n x 1/2 bytes; a
	// rank's expert has no other replica (no data-parallel reduction).
	moe := planModel()
	moe[0].Experts, moe[0].TopK = 2, 1
	a2a := planOut*n*0.5/planBW + planLat
	b = best(PlanConfig{Layers: moe, Cluster: planCluster(1e9), Layout: gm1(2, 1, 2, 1)})
	k.close("ep: communication", b.CommunicationSeconds, 4*a2a, planRel)
	k.close("ep: step", b.StepSeconds, n*(planF+planB)+4*a2a, planRel)
	k.close("ep: static", b.StaticBytes, planP/2*16, planRel)
	// (c) TensorParallel false: every tp rank runs the whole layer, nothing to reduce over tp.
	whole := planModel()
	whole[0].TensorParallel = false
	b = best(PlanConfig{Layers: whole, Cluster: planCluster(1e9), Layout: gm1(1, 2, 1, 1)})
	k.close("unsplittable over tp: step", b.StepSeconds, planG*(planF+planB), planRel)
	// (d) cp = 2: the work halves, 3 ring exchanges (1 forward, 2 backward) of kv x G x 1/2 bytes,
	// and the gradients are reduced over dp x cp = 2.
	kv := 32.0
	ctx := planModel()
	ctx[0].ContextBytes = kv
	b = best(PlanConfig{Layers: ctx, Cluster: planCluster(1e9), Layout: gm1(1, 1, 1, 2)})
	dpComm, _ := ringAllreduce(2, planP*2)
	comm := 3*(kv*planG*0.5/planBW+planLat) + dpComm
	k.close("cp: communication", b.CommunicationSeconds, comm, planRel)
	k.close("cp: step", b.StepSeconds, planG*(planF+planB)/2+comm, planRel)
	k.finish()
}

func TestPlanSearchAndFormats(t *testing.T) {
	k := newChecks(t, "plan search")
	p, err := NewLayoutPlan(&PlanConfig{Layers: planModel(), Cluster: planCluster(1e9), GlobalBatch: planG, Top: 50})
	if err != nil {
		t.Fatalf("NewLayoutPlan: %v", err)
	}
	defer p.Close()
	lays := planOK(p.Layouts())
	sorted, all2 := true, true
	for i, l := range lays {
		all2 = all2 && l.DP*l.TP*l.PP*l.CP == 2
		sorted = sorted && (i == 0 || lays[i-1].StepSeconds <= l.StepSeconds)
	}
	k.holds("every layout uses 2 ranks", all2)
	k.holds("sorted by step", sorted)
	dpStep, _ := ringAllreduce(2, planP*2)
	dpStep += planG / 2 * (planF + planB)
	k.count("best is data parallel", lays[0].DP, 2)
	k.close("best step", lays[0].StepSeconds, dpStep, planRel)
	one := predictLayout(t, gpipeM1(2, 1)) // the search may leave GPipe out where schedules tie (pp = 1)
	defer one.Close()
	k.contains("table", planOK(one.Format(PlanFormatTable)), "gpipe")
	k.contains("report", planOK(one.Format(PlanFormatReport)), "serial fraction")
	k.contains("json", planOK(one.Format(PlanFormatJSON)), `"layouts"`)

	none, err := NewLayoutPlan(&PlanConfig{Layers: planModel(), Cluster: planCluster(10), GlobalBatch: planG})
	if err != nil {
		t.Fatalf("NewLayoutPlan (10 bytes): %v", err)
	}
	defer none.Close()
	k.count("nothing fits", planOK(none.Info()).Count, 0)
	_, _, err = none.Scaling()
	k.holds("scaling of an empty plan fails", err != nil)
	if err != nil {
		k.contains("scaling error", err.Error(), "no layout")
	}
	k.finish()
}

func TestPlanFilesAndErrors(t *testing.T) {
	k := newChecks(t, "plan files and errors")
	dir := t.TempDir()
	m, c, bad := filepath.Join(dir, "model.txt"), filepath.Join(dir, "cluster.txt"), filepath.Join(dir, "bad.txt")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(m, "layer name=fc params=1000 fwd=1e-3 bwd=3e-3 act=100 out=64\ntrain global_batch=8\n")
	write(c, "# two ranks\ncluster ranks_per_host=2 memory=1e9 intra_bw=1e6 intra_lat=1e-5\n")
	write(bad, "# model\nlayer name=fc params=1 fwd=1 wat=3\n")
	loaded, err := LoadLayoutPlan(m, c, &PlanConfig{Layout: gpipeM1(2, 1)})
	if err != nil {
		t.Fatalf("LoadLayoutPlan: %v", err)
	}
	defer loaded.Close()
	made := predictLayout(t, gpipeM1(2, 1))
	defer made.Close()
	k.count("batch from the train line", planOK(loaded.Info()).GlobalBatch, planG)
	k.close("same step", planOK(loaded.Layout(0)).StepSeconds, planOK(made.Layout(0)).StepSeconds, planRel)

	_, err = LoadLayoutPlan(bad, c, nil)
	k.holds("unknown key is ErrInvalidArgument", errors.Is(err, ErrInvalidArgument))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	k.contains("file:line", msg, "bad.txt:2")
	k.contains("the key", msg, "wat")
	_, err = NewLayoutPlan(&PlanConfig{Layers: planModel(), Cluster: planCluster(0), GlobalBatch: planG})
	k.holds("memory 0 refused", err != nil && strings.Contains(err.Error(), "memory_per_rank"))
	l := DefaultPlanLayout()
	l.DP = 3
	_, err = NewLayoutPlan(&PlanConfig{Layers: planModel(), Cluster: planCluster(1e9), GlobalBatch: planG, Layout: &l})
	k.holds("3 ranks of 2 refused", err != nil && strings.Contains(err.Error(), "dp 3"))
	_, err = made.Layout(5)
	k.holds("index past the end", errors.Is(err, ErrInvalidArgument))
	closed := predictLayout(t, gpipeM1(2, 1))
	k.holds("close", closed.Close() == nil && closed.Close() == nil)
	_, err = closed.Info()
	k.holds("closed plan", err != nil && strings.Contains(err.Error(), "closed"))
	k.finish()
}

// TestPlanMeasuredCollectives: plan.h's measured collectives (the numbers of
// tests/unit/test_plan.cpp's MeasuredCollectivesSetTheirLatencyTerm). Within a host a measured
// entry replaces a collective's latency term: the entry for the group's size, else the per-step
// cost of the nearest smaller size, else of the nearest larger (per step: seconds / 2 (n - 1) for
// an all-reduce, / (n - 1) for an all-to-all).
func TestPlanMeasuredCollectives(t *testing.T) {
	k := newChecks(t, "plan measured collectives")
	host := func(ranks int, measured ...PlanCollective) *PlanCluster {
		c := DefaultPlanCluster()
		c.RanksPerHost, c.MemoryPerRank, c.FlopsPerRank = ranks, 1e12, 1e12
		c.IntraBandwidth, c.IntraLatency, c.IntraCollectives = 1e9, 1e-5, measured
		return &c
	}
	step := func(cfg PlanConfig) (float64, error) {
		p, err := NewLayoutPlan(&cfg)
		if err != nil {
			return 0, err
		}
		defer p.Close()
		l, err := p.Layout(0)
		return l.StepSeconds, err
	}
	// tp 2 of a 2-rank host, fixed layout, m micro-batches of G / m samples: 3fG/2 compute and 4
	// all-reduces of out x mbs per micro-batch, each (n-1)/n x 2 x bytes / bw = bytes / bw plus the
	// latency term T: the measured all-reduce of 2 ranks, else 2 x intra_latency.
	const g, m, f, out, bw, a = 4, 2, 0.004, 1e6, 1e9, 1e-5
	mbs := float64(g / m)
	bytes := out * mbs / bw
	dense := DefaultPlanLayer("dense")
	dense.Params, dense.ForwardSeconds, dense.OutputBytes = 1e3, f, out
	tp := DefaultPlanLayout()
	tp.TP, tp.Schedule, tp.Microbatches = 2, ScheduleOneFOneB, m
	compute := 3 * f * g / 2.0
	tpCase := func(what string, cl *PlanCluster, latency float64) {
		got := planOK(step(PlanConfig{Layers: []PlanLayer{dense}, Cluster: cl, GlobalBatch: g, Layout: &tp}))
		k.close(what, got, compute+m*4*(bytes+latency), planRel)
	}
	tpCase("tp 2, all-reduce of 2 measured at 70 us",
		host(2, PlanCollective{PlanAllToAll, 2, 5e-4}, PlanCollective{PlanAllReduce, 2, 7e-5}), 7e-5)
	tpCase("tp 2, only all-to-alls measured: 2 latencies", host(2, PlanCollective{PlanAllToAll, 2, 5e-4}), 2*a)
	tpCase("tp 2, nothing measured: 2 latencies", host(2), 2*a)

	// ep 4 on 4 of 8 ranks, 8 samples: 2 per rank, one micro-batch; 4 all-to-alls (dispatch and
	// combine in F and B) of (n-1)/n x top_k x out x B bytes, each with n - 1 = 3 steps of latency.
	const n, b = 4, 2.0
	moe := DefaultPlanLayer("moe")
	moe.Experts, moe.TopK, moe.Params, moe.ForwardSeconds, moe.OutputBytes = 8, 2, 4e6, 0.001, 4e5
	moved := (n - 1.0) / n * 2 * 4e5 * b / bw
	ep := DefaultPlanLayout()
	ep.DP, ep.EP, ep.Schedule, ep.Microbatches = n, n, ScheduleOneFOneB, 1
	for _, c := range []struct {
		what    string
		table   []PlanCollective
		latency float64
	}{
		{"ep 4: per step of the 2-rank entry",
			[]PlanCollective{{PlanAllToAll, 2, 3e-5}, {PlanAllToAll, 8, 7e-4}, {PlanAllReduce, 4, 1.0}}, 3 * 3e-5},
		{"ep 4: per step of the 8-rank entry", []PlanCollective{{PlanAllToAll, 8, 7e-4}}, 3 * 1e-4},
		{"ep 4: the 4-rank entry itself", []PlanCollective{{PlanAllToAll, 4, 2e-4}, {PlanAllToAll, 2, 1.0}}, 2e-4},
	} {
		got := planOK(step(PlanConfig{Layers: []PlanLayer{moe}, Cluster: host(8, c.table...), GlobalBatch: 8, Ranks: n,
			Layout: &ep}))
		k.close(c.what, got, 3*0.001*b+4*(c.latency+moved), planRel)
	}

	// The cluster file's intra_allreduce key gives the same closed form.
	dir := t.TempDir()
	mf, cf := filepath.Join(dir, "model.txt"), filepath.Join(dir, "cluster.txt")
	if err := os.WriteFile(mf, []byte("layer name=dense params=1e3 fwd=0.004 out=1e6\ntrain global_batch=4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cf, []byte("cluster ranks_per_host=2 memory=1e12 flops=1e12 intra_bw=1e9 intra_lat=1e-5\n"+
		"cluster intra_allreduce=2:7e-5 intra_alltoall=2:5e-4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadLayoutPlan(mf, cf, &PlanConfig{Layout: &tp})
	if err != nil {
		t.Fatalf("LoadLayoutPlan: %v", err)
	}
	defer loaded.Close()
	k.close("file: intra_allreduce=2:7e-5", planOK(loaded.Layout(0)).StepSeconds, compute+m*4*(bytes+7e-5), planRel)

	// Refused, naming the entry: a group larger than a host; an unknown kind (by the library).
	_, err = step(PlanConfig{Layers: []PlanLayer{dense}, Cluster: host(2, PlanCollective{PlanAllReduce, 8, 1e-6}),
		GlobalBatch: g, Layout: &tp})
	k.holds("a group larger than a host is ErrInvalidArgument", errors.Is(err, ErrInvalidArgument))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	k.contains("a group larger than a host", msg, "intra_collectives[0].ranks")
	_, err = step(PlanConfig{Layers: []PlanLayer{dense}, Cluster: host(2, PlanCollective{PlanCollectiveKind(7), 2, 1e-6}),
		GlobalBatch: g, Layout: &tp})
	msg = ""
	if err != nil {
		msg = err.Error()
	}
	k.contains("an unknown kind", msg, "intra_collectives[0].kind")
	k.text("kind names", PlanAllReduce.String()+" "+PlanAllToAll.String(), "allreduce alltoall")
	k.finish()
}
