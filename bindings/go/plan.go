package weft

/*
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// The planner (weft/plan.h). From a model (PlanLayers), a cluster (PlanCluster) and a global
// batch, NewLayoutPlan ranks the parallel layouts (PlanLayout: dp, tp, pp, ep, cp, ZeRO stage,
// schedule, micro-batches) by predicted step time under the memory cap; Scaling says what
// parallelism buys (Amdahl and Gustafson). LoadLayoutPlan reads plan.h's text files instead.
// Nothing communicates. The names say LayoutPlan because Plan is the redistribution plan of
// sharded tensors. Close frees a plan.

// PlanLayer is one layer kind of the model (weft_plan_layer_t), Count copies in a row. Per-sample
// quantities are for one sample of the global batch. Experts > 0 makes an MoE layer (Params
// counts every expert). Use DefaultPlanLayer for the header's defaults (Count 1, TopK 1,
// TensorParallel true).
type PlanLayer struct {
	Name            string // for messages and tables ("" = "layer<i>")
	Count           int
	Experts         int  // 0 = dense
	TopK            int  // experts per token of an MoE layer
	TensorParallel  bool // Megatron-splittable over tp; false = whole on every tp rank
	Params          float64
	ForwardFlops    float64 // per sample
	ForwardSeconds  float64 // per sample; > 0 overrides ForwardFlops
	BackwardSeconds float64 // per sample; 0 = 2 x forward
	ActivationBytes float64 // kept from forward to backward, per sample
	OutputBytes     float64 // the layer's output per sample
	ContextBytes    float64 // K/V bytes per sample a context-parallel rank needs from the others
	// TPReplicated: of a layer split over tp (TensorParallel, or an MoE layer), the share (0..1)
	// of its forward and backward time that every tp rank runs whole (norms, residual adds, a
	// projection outside the split); 0 = none.
	TPReplicated float64
	// TPAllreduces: all-reduces over tp per micro-batch in each direction of a splittable dense
	// layer (0 = 2: a transformer block; 1: an MLP or attention block alone).
	TPAllreduces int
	// SharedParams: of an MoE layer's Params, those every rank holds whole (the router, shared
	// experts). Its tokens are split over tp, so their gradients are all-reduced over tp once a
	// step, then reduced over dp as a dense layer's; the rest are the experts, sharded over ep.
	SharedParams float64
}

// DefaultPlanLayer returns a dense, tensor-parallel layer of one copy named name, with no cost
// yet.
func DefaultPlanLayer(name string) PlanLayer {
	return PlanLayer{Name: name, Count: 1, TopK: 1, TensorParallel: true}
}

// PlanCollectiveKind is weft_plan_collective_kind_t: the collectives a cluster may give measured
// costs for.
type PlanCollectiveKind int

// The measured collective kinds.
const (
	PlanAllReduce PlanCollectiveKind = C.WEFT_PLAN_ALLREDUCE // a ring all-reduce: 2 (n - 1) steps
	PlanAllToAll  PlanCollectiveKind = C.WEFT_PLAN_ALLTOALL  // an all-to-all: n - 1 steps
)

// String names the kind ("allreduce", "alltoall").
func (k PlanCollectiveKind) String() string {
	switch k {
	case PlanAllReduce:
		return "allreduce"
	case PlanAllToAll:
		return "alltoall"
	}
	return fmt.Sprintf("PlanCollectiveKind(%d)", int(k))
}

// PlanCollective is weft_plan_collective_t: one small collective of Kind over Ranks ranks of one
// host (2 <= Ranks <= RanksPerHost, each kind and size at most once) took Seconds while every
// rank of the host computed between calls (weft-bench --cluster-file measures them). Within a
// host it replaces that kind's latency term (plan.h's cost model: the entry of the group's size,
// else the per-step cost of the nearest smaller size, else of the nearest larger).
type PlanCollective struct {
	Kind    PlanCollectiveKind
	Ranks   int
	Seconds float64
}

// PlanCluster is the machines (weft_plan_cluster_t); bandwidths in bytes/s per rank, latencies in
// seconds. DefaultPlanCluster is WEFT_PLAN_CLUSTER_INIT. IntraCollectives (optional, nil = none)
// are measured small collectives within a host; without them every collective's latency term
// comes from IntraLatency.
type PlanCluster struct {
	Hosts, RanksPerHost          int
	MemoryPerRank                float64 // bytes
	FlopsPerRank                 float64 // needed when a layer gives flops only
	IntraBandwidth, IntraLatency float64 // within a host
	InterBandwidth, InterLatency float64 // between hosts (needed when Hosts > 1)
	IntraCollectives             []PlanCollective
}

// DefaultPlanCluster returns WEFT_PLAN_CLUSTER_INIT (one host of one rank; set the memory and
// the bandwidth).
func DefaultPlanCluster() PlanCluster { return PlanCluster{Hosts: 1, RanksPerHost: 1} }

// PlanLayout is a layout and its prediction (weft_plan_layout_t). As PlanConfig.Layout only the
// first nine fields count (Schedule ScheduleCustom = try every generator, Microbatches 0 = every
// count, StagesPerRank 0 = every allowed one); a plan's layouts have every field set.
// DefaultPlanLayout is WEFT_PLAN_LAYOUT_INIT.
type PlanLayout struct {
	DP, TP, PP, EP, CP   int
	ZeroStage            int
	Schedule             ScheduleKind
	Microbatches         int
	StagesPerRank        int
	Fits                 bool    // MemoryPerRank within the cluster's
	StepSeconds          float64 // the pipeline's makespan + the exposed data-parallel time
	ComputeSeconds       float64 // arithmetic on the busiest pipeline rank
	CommunicationSeconds float64 // communication on the critical path
	BubbleFraction       float64
	MemoryPerRank        float64 // StaticBytes + ActivationBytes of the largest rank
	StaticBytes          float64 // weights, gradients, optimizer state
	ActivationBytes      float64
	CommunicationBytes   float64 // bytes one rank sends per step
}

// DefaultPlanLayout returns WEFT_PLAN_LAYOUT_INIT: one rank of everything, schedule and
// micro-batches searched.
func DefaultPlanLayout() PlanLayout {
	return PlanLayout{DP: 1, TP: 1, PP: 1, EP: 1, CP: 1, Schedule: ScheduleCustom}
}

// String prints the layout and its prediction on one line.
func (l PlanLayout) String() string {
	return fmt.Sprintf("dp=%d tp=%d pp=%d ep=%d cp=%d zero=%d %v m=%d v=%d: %g s (memory %g, fits %v)", l.DP, l.TP,
		l.PP, l.EP, l.CP, l.ZeroStage, l.Schedule, l.Microbatches, l.StagesPerRank, l.StepSeconds, l.MemoryPerRank, l.Fits)
}

// PlanConfig is what to plan (weft_plan_config_t); zero fields take plan.h's defaults.
// LoadLayoutPlan ignores Layers and Cluster (the files give them).
type PlanConfig struct {
	Layers                                 []PlanLayer
	Cluster                                *PlanCluster
	GlobalBatch                            int     // samples per step
	Ranks                                  int     // 0 = the cluster's
	WeightBytes, GradBytes, OptimizerBytes float64 // per parameter (0 = 2, 2, 12)
	MicrobatchOverhead                     float64 // seconds added to every compute action
	Top                                    int     // layouts kept (0 = 10)
	IncludeInfeasible                      bool
	MaxPP, MaxTP, MaxCP                    int
	TPAcrossHosts                          bool
	Kinds                                  []ScheduleKind // schedules tried (nil = every generator)
	MaxMicrobatches                        int
	Layout                                 *PlanLayout // nil = search; else predict this layout only
	Scaling                                bool        // compute the scaling curves at once
	// GradAllreduceBytes: bytes per parameter of an all-reduce of the gradients over their
	// replicas before the DP reduction (a float64 sum for reproducibility: 8); 0 = none
	// (LoadLayoutPlan: the model file's).
	GradAllreduceBytes float64
}

// PlanInfo is weft_plan_info_t.
type PlanInfo struct {
	Ranks, GlobalBatch        int
	Count, Searched, Feasible int // layouts kept, predicted, and of them fitting
}

// PlanScaling is weft_plan_scaling_t: what parallelism buys at the plan's Ranks (N).
type PlanScaling struct {
	Ranks            int
	OneRankSeconds   float64
	StepSeconds      float64
	Speedup          float64 // OneRankSeconds / StepSeconds
	Efficiency       float64 // Speedup / N
	SerialFraction   float64 // Amdahl's s solved from Speedup
	GustafsonSpeedup float64 // N - s (N - 1)
}

// ScalingPoint is weft_plan_scaling_point_t: one point of the strong and weak curves.
type ScalingPoint struct {
	Ranks, WeakBatch                            int
	Fits                                        bool
	StrongSeconds, StrongSpeedup, AmdahlSpeedup float64
	WeakSeconds, WeakSpeedup, GustafsonSpeedup  float64
}

// PlanFormat is weft_plan_format_kind_t.
type PlanFormat int

const (
	PlanFormatTable  PlanFormat = C.WEFT_PLAN_FORMAT_TABLE  // the kept layouts, best first
	PlanFormatReport PlanFormat = C.WEFT_PLAN_FORMAT_REPORT // Amdahl/Gustafson with the curves
	PlanFormatJSON   PlanFormat = C.WEFT_PLAN_FORMAT_JSON
)

// LayoutPlan is a plan (weft_plan_t): immutable, safe to read from several goroutines.
type LayoutPlan struct {
	h C.weft_plan_t
}

func (l *PlanLayout) stage(c *C.weft_plan_layout_t) error {
	*c = C.weft_plan_layout_t{}
	c.struct_size = C.size_t(unsafe.Sizeof(*c))
	for _, v := range []struct {
		n    int
		what string
	}{{l.DP, "DP"}, {l.TP, "TP"}, {l.PP, "PP"}, {l.EP, "EP"}, {l.CP, "CP"}, {l.ZeroStage, "ZeroStage"},
		{l.Microbatches, "Microbatches"}, {l.StagesPerRank, "StagesPerRank"}} {
		if err := checkInt(v.n, "PlanLayout."+v.what); err != nil {
			return err
		}
	}
	c.dp, c.tp, c.pp, c.ep, c.cp = C.int(l.DP), C.int(l.TP), C.int(l.PP), C.int(l.EP), C.int(l.CP)
	c.zero_stage, c.schedule = C.int(l.ZeroStage), C.weft_schedule_kind_t(l.Schedule)
	c.microbatches, c.stages_per_rank = C.int(l.Microbatches), C.int(l.StagesPerRank)
	return nil
}

func goLayout(c *C.weft_plan_layout_t) PlanLayout {
	return PlanLayout{DP: int(c.dp), TP: int(c.tp), PP: int(c.pp), EP: int(c.ep), CP: int(c.cp),
		ZeroStage: int(c.zero_stage), Schedule: ScheduleKind(c.schedule), Microbatches: int(c.microbatches),
		StagesPerRank: int(c.stages_per_rank), Fits: c.fits != 0, StepSeconds: float64(c.step_seconds),
		ComputeSeconds: float64(c.compute_seconds), CommunicationSeconds: float64(c.communication_seconds),
		BubbleFraction: float64(c.bubble_fraction), MemoryPerRank: float64(c.memory_per_rank),
		StaticBytes: float64(c.static_bytes), ActivationBytes: float64(c.activation_bytes),
		CommunicationBytes: float64(c.communication_bytes)}
}

// stageString copies str into C memory (NUL-terminated).
func stageString(s *staging, str string) *C.char {
	p := s.alloc(uintptr(len(str) + 1))
	b := unsafe.Slice((*byte)(p), len(str)+1)
	copy(b, str)
	b[len(str)] = 0
	return (*C.char)(p)
}

// stage builds the C config in C memory (cgo: C must not keep, nor be handed, Go pointers inside
// a struct), with the layers, names, cluster (and its measured collectives), kinds and layout it
// points at.
func (cfg *PlanConfig) stage(s *staging, withModel bool) (*C.weft_plan_config_t, error) {
	var z C.weft_plan_config_t
	c := (*C.weft_plan_config_t)(s.alloc(unsafe.Sizeof(z)))
	*c = z
	c.struct_size = C.size_t(unsafe.Sizeof(z))
	for _, v := range []struct {
		n    int
		what string
	}{{cfg.GlobalBatch, "GlobalBatch"}, {cfg.Ranks, "Ranks"}, {cfg.Top, "Top"}, {cfg.MaxPP, "MaxPP"},
		{cfg.MaxTP, "MaxTP"}, {cfg.MaxCP, "MaxCP"}, {cfg.MaxMicrobatches, "MaxMicrobatches"}} {
		if err := checkInt(v.n, "PlanConfig."+v.what); err != nil {
			return nil, err
		}
	}
	if withModel && len(cfg.Layers) > 0 {
		var zl C.weft_plan_layer_t
		layers := unsafe.Slice((*C.weft_plan_layer_t)(s.alloc(uintptr(len(cfg.Layers))*unsafe.Sizeof(zl))), len(cfg.Layers))
		for i, l := range cfg.Layers {
			if strings.IndexByte(l.Name, 0) >= 0 {
				return nil, newError(StatusInvalidArgument, "PlanConfig.Layers[%d]: name %q contains a NUL byte", i, l.Name)
			}
			for _, v := range []struct {
				n    int
				what string
			}{{l.Count, "Count"}, {l.Experts, "Experts"}, {l.TopK, "TopK"}, {l.TPAllreduces, "TPAllreduces"}} {
				if err := checkInt(v.n, fmt.Sprintf("PlanConfig.Layers[%d].%s", i, v.what)); err != nil {
					return nil, err
				}
			}
			d := &layers[i]
			*d = zl
			if l.Name != "" {
				d.name = stageString(s, l.Name)
			}
			d.count, d.experts, d.top_k = C.int(l.Count), C.int(l.Experts), C.int(l.TopK)
			d.tensor_parallel = cBool(l.TensorParallel)
			d.params, d.forward_flops = C.double(l.Params), C.double(l.ForwardFlops)
			d.forward_seconds, d.backward_seconds = C.double(l.ForwardSeconds), C.double(l.BackwardSeconds)
			d.activation_bytes, d.output_bytes = C.double(l.ActivationBytes), C.double(l.OutputBytes)
			d.context_bytes = C.double(l.ContextBytes)
			d.tp_replicated, d.tp_allreduces = C.double(l.TPReplicated), C.int(l.TPAllreduces)
			d.shared_params = C.double(l.SharedParams)
		}
		c.layers, c.num_layers = &layers[0], C.size_t(len(layers))
		c.layer_size = C.size_t(unsafe.Sizeof(zl)) // the stride of layers: the 104-byte weft_plan_layer_t
	}
	if withModel && cfg.Cluster != nil {
		k := cfg.Cluster
		if err := checkInt(k.Hosts, "PlanCluster.Hosts"); err != nil {
			return nil, err
		}
		if err := checkInt(k.RanksPerHost, "PlanCluster.RanksPerHost"); err != nil {
			return nil, err
		}
		var zc C.weft_plan_cluster_t
		cl := (*C.weft_plan_cluster_t)(s.alloc(unsafe.Sizeof(zc)))
		*cl = zc
		cl.struct_size = C.size_t(unsafe.Sizeof(zc))
		cl.hosts, cl.ranks_per_host = C.int(k.Hosts), C.int(k.RanksPerHost)
		cl.memory_per_rank, cl.flops_per_rank = C.double(k.MemoryPerRank), C.double(k.FlopsPerRank)
		cl.intra_bandwidth, cl.intra_latency = C.double(k.IntraBandwidth), C.double(k.IntraLatency)
		cl.inter_bandwidth, cl.inter_latency = C.double(k.InterBandwidth), C.double(k.InterLatency)
		if n := len(k.IntraCollectives); n > 0 {
			// C memory, as the rest: the library reads it during weft_plan_create and keeps nothing.
			var zm C.weft_plan_collective_t
			ms := unsafe.Slice((*C.weft_plan_collective_t)(s.alloc(uintptr(n)*unsafe.Sizeof(zm))), n)
			for i, m := range k.IntraCollectives {
				if err := checkInt(int(m.Kind), fmt.Sprintf("PlanCluster.IntraCollectives[%d].Kind", i)); err != nil {
					return nil, err
				}
				if err := checkInt(m.Ranks, fmt.Sprintf("PlanCluster.IntraCollectives[%d].Ranks", i)); err != nil {
					return nil, err
				}
				ms[i] = zm
				// An unknown kind goes through: the library refuses it, naming the entry.
				ms[i].kind = C.weft_plan_collective_kind_t(m.Kind)
				ms[i].ranks, ms[i].seconds = C.int(m.Ranks), C.double(m.Seconds)
			}
			cl.intra_collectives, cl.num_intra_collectives = &ms[0], C.size_t(n)
		}
		c.cluster = cl
	}
	c.global_batch, c.ranks = C.int(cfg.GlobalBatch), C.int(cfg.Ranks)
	c.weight_bytes, c.grad_bytes = C.double(cfg.WeightBytes), C.double(cfg.GradBytes)
	c.optimizer_bytes, c.microbatch_overhead = C.double(cfg.OptimizerBytes), C.double(cfg.MicrobatchOverhead)
	c.grad_allreduce_bytes = C.double(cfg.GradAllreduceBytes)
	c.top, c.include_infeasible = C.int(cfg.Top), cBool(cfg.IncludeInfeasible)
	c.max_pp, c.max_tp, c.max_cp = C.int(cfg.MaxPP), C.int(cfg.MaxTP), C.int(cfg.MaxCP)
	c.tp_across_hosts = cBool(cfg.TPAcrossHosts)
	if len(cfg.Kinds) > 0 {
		var k C.weft_schedule_kind_t
		kinds := unsafe.Slice((*C.weft_schedule_kind_t)(s.alloc(uintptr(len(cfg.Kinds))*unsafe.Sizeof(k))), len(cfg.Kinds))
		for i, x := range cfg.Kinds {
			kinds[i] = C.weft_schedule_kind_t(x)
		}
		c.kinds, c.nkinds = &kinds[0], C.size_t(len(kinds))
	}
	c.max_microbatches = C.int(cfg.MaxMicrobatches)
	if cfg.Layout != nil {
		var zl C.weft_plan_layout_t
		l := (*C.weft_plan_layout_t)(s.alloc(unsafe.Sizeof(zl)))
		if err := cfg.Layout.stage(l); err != nil {
			return nil, err
		}
		c.layout = l
	}
	c.scaling = cBool(cfg.Scaling)
	return c, nil
}

// NewLayoutPlan calls weft_plan_create: the layouts of cfg.Layers on *cfg.Cluster ranked by
// predicted step time (those that fit first), or cfg.Layout alone predicted.
func NewLayoutPlan(cfg *PlanConfig) (*LayoutPlan, error) {
	if cfg == nil {
		return nil, newError(StatusInvalidArgument, "NewLayoutPlan: cfg is nil")
	}
	var s staging
	defer s.free()
	c, err := cfg.stage(&s, true)
	if err != nil {
		return nil, err
	}
	var h C.weft_plan_t
	if err := call(func() C.weft_status_t { return C.weft_plan_create(c, &h) }); err != nil {
		return nil, err
	}
	return &LayoutPlan{h: h}, nil
}

// LoadLayoutPlan calls weft_plan_load: the model and the cluster from plan.h's text files
// (errors name file:line and the key); cfg may be nil, and its nonzero fields override the
// files' values (its Layers and Cluster are ignored).
func LoadLayoutPlan(modelPath, clusterPath string, cfg *PlanConfig) (*LayoutPlan, error) {
	mp, err := cPath(modelPath, "model path")
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(mp))
	cp, err := cPath(clusterPath, "cluster path")
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cp))
	var s staging
	defer s.free()
	var c *C.weft_plan_config_t
	if cfg != nil {
		if c, err = cfg.stage(&s, false); err != nil {
			return nil, err
		}
	}
	var h C.weft_plan_t
	if err := call(func() C.weft_status_t { return C.weft_plan_load(mp, cp, c, &h) }); err != nil {
		return nil, err
	}
	return &LayoutPlan{h: h}, nil
}

func (p *LayoutPlan) open() error {
	if p == nil || p.h == nil {
		return newError(StatusInvalidArgument, "the LayoutPlan is closed")
	}
	return nil
}

// Info calls weft_plan_info.
func (p *LayoutPlan) Info() (PlanInfo, error) {
	if err := p.open(); err != nil {
		return PlanInfo{}, err
	}
	var i C.weft_plan_info_t
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	if err := call(func() C.weft_status_t { return C.weft_plan_info(p.h, &i) }); err != nil {
		return PlanInfo{}, err
	}
	return PlanInfo{Ranks: int(i.ranks), GlobalBatch: int(i.global_batch), Count: int(i.count),
		Searched: int(i.searched), Feasible: int(i.feasible)}, nil
}

// Layout calls weft_plan_layout: the index-th kept layout, best first.
func (p *LayoutPlan) Layout(index int) (PlanLayout, error) {
	if err := p.open(); err != nil {
		return PlanLayout{}, err
	}
	if index < 0 {
		return PlanLayout{}, newError(StatusInvalidArgument, "LayoutPlan.Layout: index %d is negative", index)
	}
	var l C.weft_plan_layout_t
	l.struct_size = C.size_t(unsafe.Sizeof(l))
	if err := call(func() C.weft_status_t { return C.weft_plan_layout(p.h, C.size_t(index), &l) }); err != nil {
		return PlanLayout{}, err
	}
	return goLayout(&l), nil
}

// Layouts returns every kept layout, best first.
func (p *LayoutPlan) Layouts() ([]PlanLayout, error) {
	info, err := p.Info()
	if err != nil {
		return nil, err
	}
	out := make([]PlanLayout, info.Count)
	for i := range out {
		if out[i], err = p.Layout(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Scaling calls weft_plan_scaling: the Amdahl/Gustafson summary at the plan's ranks and the
// strong and weak scaling curve (computed on the first call unless PlanConfig.Scaling was set).
func (p *LayoutPlan) Scaling() (PlanScaling, []ScalingPoint, error) {
	if err := p.open(); err != nil {
		return PlanScaling{}, nil, err
	}
	var s staging
	defer s.free()
	var zs C.weft_plan_scaling_t
	sum := (*C.weft_plan_scaling_t)(s.alloc(unsafe.Sizeof(zs)))
	*sum = zs
	sum.struct_size = C.size_t(unsafe.Sizeof(zs))
	var n C.size_t
	if err := call(func() C.weft_status_t { return C.weft_plan_scaling(p.h, sum, nil, 0, &n) }); err != nil {
		return PlanScaling{}, nil, err
	}
	var zp C.weft_plan_scaling_point_t
	pts := (*C.weft_plan_scaling_point_t)(s.alloc(uintptr(n) * unsafe.Sizeof(zp)))
	if n > 0 {
		if err := call(func() C.weft_status_t { return C.weft_plan_scaling(p.h, sum, pts, n, &n) }); err != nil {
			return PlanScaling{}, nil, err
		}
	}
	out := PlanScaling{Ranks: int(sum.ranks), OneRankSeconds: float64(sum.one_rank_seconds),
		StepSeconds: float64(sum.step_seconds), Speedup: float64(sum.speedup), Efficiency: float64(sum.efficiency),
		SerialFraction: float64(sum.serial_fraction), GustafsonSpeedup: float64(sum.gustafson_speedup)}
	points := make([]ScalingPoint, int(n))
	if n > 0 {
		for i, c := range unsafe.Slice(pts, int(n)) {
			points[i] = ScalingPoint{Ranks: int(c.ranks), WeakBatch: int(c.weak_batch), Fits: c.fits != 0,
				StrongSeconds: float64(c.strong_seconds), StrongSpeedup: float64(c.strong_speedup),
				AmdahlSpeedup: float64(c.amdahl_speedup), WeakSeconds: float64(c.weak_seconds),
				WeakSpeedup: float64(c.weak_speedup), GustafsonSpeedup: float64(c.gustafson_speedup)}
		}
	}
	return out, points, nil
}

// Format calls weft_plan_format: the plan as a table, the report or JSON.
func (p *LayoutPlan) Format(what PlanFormat) (string, error) {
	if err := p.open(); err != nil {
		return "", err
	}
	var n C.size_t
	if err := call(func() C.weft_status_t {
		return C.weft_plan_format(p.h, C.weft_plan_format_kind_t(what), nil, 0, &n)
	}); err != nil {
		return "", err
	}
	buf := (*C.char)(C.malloc(n + 1))
	if buf == nil {
		return "", newError(StatusOutOfMemory, "no memory for a plan text of %d bytes", int(n))
	}
	defer C.free(unsafe.Pointer(buf))
	if err := call(func() C.weft_status_t {
		return C.weft_plan_format(p.h, C.weft_plan_format_kind_t(what), buf, n+1, &n)
	}); err != nil {
		return "", err
	}
	return C.GoStringN(buf, C.int(n)), nil
}

// Close calls weft_plan_destroy. Closing twice, or a nil *LayoutPlan, is a no-op.
func (p *LayoutPlan) Close() error {
	if p == nil || p.h == nil {
		return nil
	}
	h := p.h
	p.h = nil
	return call(func() C.weft_status_t { return C.weft_plan_destroy(h) })
}
