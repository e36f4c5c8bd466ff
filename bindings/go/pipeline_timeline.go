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

// Timelines, simulation and tuning (weft/pipeline.h, middle part). A Timeline holds what
// happened, or would happen, on each rank: from Schedule.Simulate with Costs, or from a
// recorded Pipeline.Run. Tune picks a schedule, micro-batch count and virtual stages from
// per-layer costs.
//
// cgo rules: the cost and tuning arrays are copied into C memory for the call.

// TimelineFormat selects what Timeline.Write writes (weft_timeline_format_t).
type TimelineFormat int

const (
	TimelineSVG         TimelineFormat = C.WEFT_TIMELINE_SVG          // ranks as rows, actions as boxes
	TimelineChromeTrace TimelineFormat = C.WEFT_TIMELINE_CHROME_TRACE // JSON for chrome://tracing and Perfetto
)

// TimelineInfo is weft_timeline_info_t.
type TimelineInfo struct {
	Ranks          int
	Makespan       float64 // the latest end over all ranks
	BubbleFraction float64 // idle / (ranks * makespan)
}

// RankStats is weft_rank_stats_t.
type RankStats struct {
	Busy                float64 // time in F, B, I, W, REDUCE_GRAD
	Idle                float64 // makespan - busy
	PeakActivations     int     // most micro-batch activations held at once
	PeakActivationBytes float64 // the same in bytes (simulation: from the costs; a run: 0)
}

// RankTimes is one rank's times: Start[k] and End[k] of action k of the schedule's list for
// that rank.
type RankTimes struct {
	Start, End []float64
	Stats      RankStats
}

// Timeline is a weft_timeline_t: immutable, readable from any goroutine; Close frees it.
type Timeline struct {
	h C.weft_timeline_t
}

func (t *Timeline) open() error {
	if t == nil || t.h == nil {
		return newError(StatusInvalidArgument, "the timeline is closed")
	}
	return nil
}

// Close calls weft_timeline_destroy. Closing twice, or a nil *Timeline, is a no-op.
func (t *Timeline) Close() error {
	if t == nil || t.h == nil {
		return nil
	}
	h := t.h
	t.h = nil
	return call(func() C.weft_status_t { return C.weft_timeline_destroy(h) })
}

// Info calls weft_timeline_info.
func (t *Timeline) Info() (TimelineInfo, error) {
	if err := t.open(); err != nil {
		return TimelineInfo{}, err
	}
	var i C.weft_timeline_info_t
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	err := call(func() C.weft_status_t { return C.weft_timeline_info(t.h, &i) })
	return TimelineInfo{Ranks: int(i.ranks), Makespan: float64(i.makespan), BubbleFraction: float64(i.bubble_fraction)}, err
}

// Makespan is Info().Makespan (0 for a closed timeline).
func (t *Timeline) Makespan() float64 {
	i, _ := t.Info()
	return i.Makespan
}

// BubbleFraction is Info().BubbleFraction (0 for a closed timeline).
func (t *Timeline) BubbleFraction() float64 {
	i, _ := t.Info()
	return i.BubbleFraction
}

// Rank calls weft_timeline_rank: rank's start and end times (copies) and totals.
func (t *Timeline) Rank(rank int) (RankTimes, error) {
	if err := t.open(); err != nil {
		return RankTimes{}, err
	}
	if err := checkInt(rank, "rank"); err != nil {
		return RankTimes{}, err
	}
	var s, e *C.double
	var n C.size_t
	var st C.weft_rank_stats_t
	st.struct_size = C.size_t(unsafe.Sizeof(st))
	if err := call(func() C.weft_status_t { return C.weft_timeline_rank(t.h, C.int(rank), &s, &e, &n, &st) }); err != nil {
		return RankTimes{}, err
	}
	copyOut := func(p *C.double) []float64 {
		out := make([]float64, int(n))
		if n > 0 && p != nil {
			for i, v := range unsafe.Slice(p, int(n)) {
				out[i] = float64(v)
			}
		}
		return out
	}
	return RankTimes{Start: copyOut(s), End: copyOut(e), Stats: RankStats{Busy: float64(st.busy), Idle: float64(st.idle),
		PeakActivations: int(st.peak_activations), PeakActivationBytes: float64(st.peak_activation_bytes)}}, nil
}

// Write calls weft_timeline_write: an SVG picture or a Chrome trace at path.
func (t *Timeline) Write(format TimelineFormat, path string) error {
	if err := t.open(); err != nil {
		return err
	}
	cp, err := cPath(path, "timeline path")
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cp))
	return call(func() C.weft_status_t { return C.weft_timeline_write(t.h, C.weft_timeline_format_t(format), cp) })
}

// Costs for the simulator (weft_pipeline_costs_t): one entry per stage in each slice, the
// number of stages being len(Forward); nil slices take pipeline.h's defaults.
type Costs struct {
	Forward         []float64
	Backward        []float64 // the time of B; nil = BackwardInput + BackwardWeight
	BackwardInput   []float64 // the times of I and W; nil = half of Backward each
	BackwardWeight  []float64
	ActivationBytes []float64 // what F keeps until its backward is done (nil = 0)
	WeightGradBytes []float64 // of it, what is kept after I until W (nil = all of it)
	BoundaryBytes   []float64 // bytes of each stage's output (nil = 0)
	Latency         float64   // a message takes Latency + bytes / Bandwidth
	Bandwidth       float64   // 0 = infinite
	Overhead        float64   // added to every compute action
	ReduceGrad      []float64 // the time of REDUCE_GRAD (nil = 0)
	// 0 = the slices above; a COST_MODEL plugin's id (PluginEntry.ID) = every compute action's
	// time from the plugin (Forward then only gives the number of stages).
	CostModel int
	// Samples per micro-batch, passed to the cost model (0 = the header's default, 1).
	MicrobatchSize int
}

// UniformCosts gives every stage forward time f and backward time b (I and W half of it each).
func UniformCosts(stages int, f, b float64) Costs {
	c := Costs{Forward: make([]float64, stages), Backward: make([]float64, stages)}
	for i := range c.Forward {
		c.Forward[i], c.Backward[i] = f, b
	}
	return c
}

// stageDoubles copies v into C memory (nil for a nil slice).
func stageDoubles(s *staging, v []float64) *C.double {
	if v == nil {
		return nil
	}
	p := (*C.double)(s.alloc(uintptr(len(v)) * C.sizeof_double))
	if len(v) > 0 {
		dst := unsafe.Slice(p, len(v))
		for i, x := range v {
			dst[i] = C.double(x)
		}
	}
	return p
}

func (c *Costs) stage(s *staging) (*C.weft_pipeline_costs_t, error) {
	n := len(c.Forward)
	if err := checkInt(n, "len(Costs.Forward)"); err != nil {
		return nil, err
	}
	arrays := []struct {
		v    []float64
		what string
	}{{c.Backward, "Backward"}, {c.BackwardInput, "BackwardInput"}, {c.BackwardWeight, "BackwardWeight"},
		{c.ActivationBytes, "ActivationBytes"}, {c.WeightGradBytes, "WeightGradBytes"}, {c.BoundaryBytes, "BoundaryBytes"},
		{c.ReduceGrad, "ReduceGrad"}}
	for _, a := range arrays {
		if a.v != nil && len(a.v) != n {
			return nil, newError(StatusInvalidArgument, "Costs.%s has %d entries for %d stages", a.what, len(a.v), n)
		}
	}
	var z C.weft_pipeline_costs_t
	cc := (*C.weft_pipeline_costs_t)(s.alloc(unsafe.Sizeof(z)))
	*cc = z
	cc.struct_size = C.size_t(unsafe.Sizeof(z))
	cc.nstages = C.int(n)
	if n > 0 {
		cc.forward = stageDoubles(s, c.Forward)
	}
	cc.backward = stageDoubles(s, c.Backward)
	cc.backward_input = stageDoubles(s, c.BackwardInput)
	cc.backward_weight = stageDoubles(s, c.BackwardWeight)
	cc.activation_bytes = stageDoubles(s, c.ActivationBytes)
	cc.weight_grad_bytes = stageDoubles(s, c.WeightGradBytes)
	cc.boundary_bytes = stageDoubles(s, c.BoundaryBytes)
	cc.latency, cc.bandwidth, cc.overhead = C.double(c.Latency), C.double(c.Bandwidth), C.double(c.Overhead)
	cc.reduce_grad = stageDoubles(s, c.ReduceGrad)
	cc.cost_model, cc.microbatch_size = C.int(c.CostModel), C.int(c.MicrobatchSize)
	if c.MicrobatchSize == 0 {
		cc.microbatch_size = 1
	}
	return cc, nil
}

// Simulate calls weft_schedule_simulate: the timeline of this (valid) schedule under costs.
func (s *Schedule) Simulate(costs *Costs) (*Timeline, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if costs == nil {
		return nil, newError(StatusInvalidArgument, "Simulate: costs is nil")
	}
	var st staging
	defer st.free()
	cc, err := costs.stage(&st)
	if err != nil {
		return nil, err
	}
	var h C.weft_timeline_t
	if err := call(func() C.weft_status_t { return C.weft_schedule_simulate(s.h, cc, &h) }); err != nil {
		return nil, err
	}
	return &Timeline{h: h}, nil
}

// TuneConfig is the auto-tuning input (weft_tune_config_t); pipeline.h states the model. The
// number of layers is len(LayerForward); DefaultTuneConfig is WEFT_TUNE_CONFIG_INIT.
type TuneConfig struct {
	Ranks                    int
	LayerForward             []float64 // per layer, one sample's forward time
	LayerBackward            []float64 // and backward time (B; I and W half each)
	GlobalBatch              int       // samples per step; a candidate's m divides it
	MicrobatchOverhead       float64   // added to every compute action
	ActivationBytesPerSample float64   // per layer, what a forward keeps until its backward
	BoundaryBytesPerSample   float64
	Latency, Bandwidth       float64
	MemoryCap                float64        // bytes a rank may hold (0 = no cap)
	StaticBytes              float64        // added to each rank's peak
	Kinds                    []ScheduleKind // the generators to try (nil = all)
	MaxStagesPerRank         int            // the largest v tried for interleaved 1F1B (0 = 4)
	MaxMicrobatches          int            // the largest m tried (0 = GlobalBatch)
	CostModel                int            // 0 = the layer tables; a COST_MODEL plugin's id
}

// DefaultTuneConfig returns WEFT_TUNE_CONFIG_INIT (one rank, no layers, a batch of one).
func DefaultTuneConfig() TuneConfig { return TuneConfig{Ranks: 1, GlobalBatch: 1} }

// Candidate is one tuning candidate (weft_tune_candidate_t).
type Candidate struct {
	Kind           ScheduleKind
	Microbatches   int
	StagesPerRank  int
	MicrobatchSize int
	StepTime       float64 // simulated makespan
	BubbleFraction float64
	PeakBytes      float64 // the largest rank's activation peak + StaticBytes
	Fits           bool    // PeakBytes <= MemoryCap (or no cap)
}

func (c Candidate) String() string {
	return fmt.Sprintf("%v m=%d v=%d: %g (bubble %.3f, peak %g, fits %v)", c.Kind, c.Microbatches, c.StagesPerRank,
		c.StepTime, c.BubbleFraction, c.PeakBytes, c.Fits)
}

// Tune calls weft_schedule_tune: every allowed (kind, m, v) simulated, sorted by step time (those
// that fit first), and the index of the fastest that fits (-1 when none fits). Its schedule is
// GenerateSchedule(kind, {Ranks, Microbatches, StagesPerRank}).
func Tune(cfg *TuneConfig) ([]Candidate, int, error) {
	if cfg == nil {
		return nil, -1, newError(StatusInvalidArgument, "Tune: cfg is nil")
	}
	layers := len(cfg.LayerForward)
	if len(cfg.LayerBackward) != layers {
		return nil, -1, newError(StatusInvalidArgument, "TuneConfig: %d LayerBackward entries for %d layers", len(cfg.LayerBackward), layers)
	}
	for _, v := range []struct {
		n    int
		what string
	}{{cfg.Ranks, "Ranks"}, {layers, "len(LayerForward)"}, {cfg.GlobalBatch, "GlobalBatch"},
		{cfg.MaxStagesPerRank, "MaxStagesPerRank"}, {cfg.MaxMicrobatches, "MaxMicrobatches"}} {
		if err := checkInt(v.n, "TuneConfig."+v.what); err != nil {
			return nil, -1, err
		}
	}
	var s staging
	defer s.free()
	var z C.weft_tune_config_t
	c := (*C.weft_tune_config_t)(s.alloc(unsafe.Sizeof(z)))
	*c = z
	c.struct_size = C.size_t(unsafe.Sizeof(z))
	c.ranks, c.layers, c.global_batch = C.int(cfg.Ranks), C.int(layers), C.int(cfg.GlobalBatch)
	if layers > 0 {
		c.layer_forward, c.layer_backward = stageDoubles(&s, cfg.LayerForward), stageDoubles(&s, cfg.LayerBackward)
	}
	c.microbatch_overhead = C.double(cfg.MicrobatchOverhead)
	c.activation_bytes_per_sample = C.double(cfg.ActivationBytesPerSample)
	c.boundary_bytes_per_sample = C.double(cfg.BoundaryBytesPerSample)
	c.latency, c.bandwidth = C.double(cfg.Latency), C.double(cfg.Bandwidth)
	c.memory_cap, c.static_bytes = C.double(cfg.MemoryCap), C.double(cfg.StaticBytes)
	if len(cfg.Kinds) > 0 {
		var k C.weft_schedule_kind_t
		kinds := unsafe.Slice((*C.weft_schedule_kind_t)(s.alloc(uintptr(len(cfg.Kinds))*unsafe.Sizeof(k))), len(cfg.Kinds))
		for i, x := range cfg.Kinds {
			kinds[i] = C.weft_schedule_kind_t(x)
		}
		c.kinds, c.nkinds = &kinds[0], C.size_t(len(kinds))
	}
	c.max_stages_per_rank, c.max_microbatches = C.int(cfg.MaxStagesPerRank), C.int(cfg.MaxMicrobatches)
	c.cost_model = C.int(cfg.CostModel)

	var count C.size_t
	best := C.int(-1)
	if err := call(func() C.weft_status_t { return C.weft_schedule_tune(c, nil, 0, &count, &best) }); err != nil {
		return nil, -1, err
	}
	var zc C.weft_tune_candidate_t
	raw := (*C.weft_tune_candidate_t)(s.alloc(uintptr(count) * unsafe.Sizeof(zc)))
	if count > 0 {
		if err := call(func() C.weft_status_t { return C.weft_schedule_tune(c, raw, count, &count, &best) }); err != nil {
			return nil, -1, err
		}
	}
	out := make([]Candidate, int(count))
	if count > 0 {
		for i, r := range unsafe.Slice(raw, int(count)) {
			out[i] = Candidate{Kind: ScheduleKind(r.kind), Microbatches: int(r.microbatches), StagesPerRank: int(r.stages_per_rank),
				MicrobatchSize: int(r.microbatch_size), StepTime: float64(r.step_time), BubbleFraction: float64(r.bubble_fraction),
				PeakBytes: float64(r.peak_bytes), Fits: r.fits != 0}
		}
	}
	b := int(best)
	if b >= len(out) {
		b = -1
	}
	return out, b, nil
}
