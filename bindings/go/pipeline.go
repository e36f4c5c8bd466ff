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

// Pipeline schedules (weft/pipeline.h, first part). A Schedule is plain data: per pipeline rank,
// an ordered list of Actions. Make one with GenerateSchedule, NewSchedule (caller-given lists),
// ScheduleFromCSV (torch's CSV) or LoadSchedule; inspect it (Info, Actions, StageRank), check it
// (Validate), export it (ToCSV, Save) and simulate it (Simulate, in pipeline_timeline.go). The
// executor is in pipeline_exec.go. Close frees a schedule (timelines and pipelines made from it
// keep their own reference).

// ActionKind is what an Action does (weft_action_kind_t); pipeline.h states each.
type ActionKind int

const (
	ActionF          ActionKind = C.WEFT_ACTION_F           // forward of a micro-batch through a stage
	ActionB          ActionKind = C.WEFT_ACTION_B           // the whole backward
	ActionI          ActionKind = C.WEFT_ACTION_I           // backward for the inputs only
	ActionW          ActionKind = C.WEFT_ACTION_W           // backward for the weights only (after I)
	ActionSendF      ActionKind = C.WEFT_ACTION_SEND_F      // send the stage's output to the next stage's rank
	ActionRecvF      ActionKind = C.WEFT_ACTION_RECV_F      // receive the stage's input
	ActionSendB      ActionKind = C.WEFT_ACTION_SEND_B      // send the input gradient back
	ActionRecvB      ActionKind = C.WEFT_ACTION_RECV_B      // receive the output gradient
	ActionReduceGrad ActionKind = C.WEFT_ACTION_REDUCE_GRAD // the stage's gradients are complete (micro-batch -1)
)

var actionNames = map[ActionKind]string{
	ActionF: "F", ActionB: "B", ActionI: "I", ActionW: "W", ActionSendF: "SEND_F", ActionRecvF: "RECV_F",
	ActionSendB: "SEND_B", ActionRecvB: "RECV_B", ActionReduceGrad: "REDUCE_GRAD",
}

// String is torch's name of the kind ("F", "SEND_F", "REDUCE_GRAD").
func (k ActionKind) String() string {
	if n, ok := actionNames[k]; ok {
		return n
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// IsCompute reports whether the kind is a compute action (F, B, I, W, REDUCE_GRAD).
func (k ActionKind) IsCompute() bool {
	return k == ActionF || k == ActionB || k == ActionI || k == ActionW || k == ActionReduceGrad
}

// Action is one action {kind, stage, micro-batch} (weft_action_t); Microbatch is -1 for
// REDUCE_GRAD.
type Action struct {
	Kind       ActionKind
	Stage      int
	Microbatch int
}

// String writes the action as torch does: "0F0", "1SEND_F0", "2REDUCE_GRAD".
func (a Action) String() string {
	if a.Microbatch < 0 {
		return fmt.Sprintf("%d%s", a.Stage, a.Kind)
	}
	return fmt.Sprintf("%d%s%d", a.Stage, a.Kind, a.Microbatch)
}

// ScheduleKind is a generator (weft_schedule_kind_t); pipeline.h states each one's rule.
type ScheduleKind int

const (
	ScheduleCustom          ScheduleKind = C.WEFT_SCHEDULE_CUSTOM // NewSchedule, ScheduleFromCSV, LoadSchedule
	ScheduleGPipe           ScheduleKind = C.WEFT_SCHEDULE_GPIPE
	ScheduleOneFOneB        ScheduleKind = C.WEFT_SCHEDULE_ONE_F_ONE_B
	ScheduleInterleaved1F1B ScheduleKind = C.WEFT_SCHEDULE_INTERLEAVED_1F1B
	ScheduleZBH1            ScheduleKind = C.WEFT_SCHEDULE_ZB_H1
	ScheduleZBH2            ScheduleKind = C.WEFT_SCHEDULE_ZB_H2
	ScheduleZBV             ScheduleKind = C.WEFT_SCHEDULE_ZB_V
	ScheduleDualPipeV       ScheduleKind = C.WEFT_SCHEDULE_DUALPIPE_V
	NumScheduleKinds                     = C.WEFT_SCHEDULE_NUM_KINDS
)

// ScheduleGenerators lists every generator in C enum order.
var ScheduleGenerators = []ScheduleKind{ScheduleGPipe, ScheduleOneFOneB, ScheduleInterleaved1F1B, ScheduleZBH1,
	ScheduleZBH2, ScheduleZBV, ScheduleDualPipeV}

var scheduleNames = map[ScheduleKind]string{
	ScheduleCustom: "custom", ScheduleGPipe: "gpipe", ScheduleOneFOneB: "1f1b", ScheduleInterleaved1F1B: "interleaved-1f1b",
	ScheduleZBH1: "zb-h1", ScheduleZBH2: "zb-h2", ScheduleZBV: "zb-v", ScheduleDualPipeV: "dualpipe-v",
}

func (k ScheduleKind) String() string {
	if n, ok := scheduleNames[k]; ok {
		return n
	}
	return fmt.Sprintf("ScheduleKind(%d)", int(k))
}

// ScheduleConfig holds generator options (weft_schedule_config_t); DefaultScheduleConfig is
// WEFT_SCHEDULE_CONFIG_INIT (one rank, one micro-batch).
type ScheduleConfig struct {
	Ranks         int  // p (>= 1)
	Microbatches  int  // m (>= 1)
	StagesPerRank int  // v; 0 = the method's own (2 for ZB-V and DualPipeV, else 1)
	ReduceGrad    bool // end each rank's list with REDUCE_GRAD per stage
}

// DefaultScheduleConfig returns WEFT_SCHEDULE_CONFIG_INIT.
func DefaultScheduleConfig() ScheduleConfig { return ScheduleConfig{Ranks: 1, Microbatches: 1} }

// ScheduleInfo is what Schedule.Info reports (weft_schedule_info_t).
type ScheduleInfo struct {
	Kind          ScheduleKind
	Ranks         int
	Stages        int
	Microbatches  int
	StagesPerRank int // the most stages any rank holds
}

// CSVFormat selects the actions Schedule.ToCSV writes (weft_csv_format_t).
type CSVFormat int

const (
	CSVComputeComms CSVFormat = C.WEFT_CSV_COMPUTE_COMMS // every action (torch's "compute_comms")
	CSVComputeOnly  CSVFormat = C.WEFT_CSV_COMPUTE_ONLY  // F, B, I, W only (torch's "compute_only")
)

// Schedule is a pipeline schedule (weft_schedule_t). It is immutable: any number of goroutines
// may read it; Close frees it.
type Schedule struct {
	h C.weft_schedule_t
}

func (s *Schedule) open() error {
	if s == nil || s.h == nil {
		return newError(StatusInvalidArgument, "the schedule is closed")
	}
	return nil
}

// GenerateSchedule calls weft_schedule_generate: the schedule of generator kind with its
// SEND/RECV actions; a violated rule of the method is StatusInvalidArgument naming it.
func GenerateSchedule(kind ScheduleKind, cfg *ScheduleConfig) (*Schedule, error) {
	c := DefaultScheduleConfig()
	if cfg != nil {
		c = *cfg
	}
	for _, v := range []struct {
		n    int
		what string
	}{{c.Ranks, "Ranks"}, {c.Microbatches, "Microbatches"}, {c.StagesPerRank, "StagesPerRank"}} {
		if err := checkInt(v.n, "ScheduleConfig."+v.what); err != nil {
			return nil, err
		}
	}
	var cc C.weft_schedule_config_t
	cc.struct_size = C.size_t(unsafe.Sizeof(cc))
	cc.ranks, cc.microbatches, cc.stages_per_rank = C.int(c.Ranks), C.int(c.Microbatches), C.int(c.StagesPerRank)
	if c.ReduceGrad {
		cc.reduce_grad = 1
	}
	var h C.weft_schedule_t
	if err := call(func() C.weft_status_t {
		return C.weft_schedule_generate(C.weft_schedule_kind_t(kind), &cc, &h)
	}); err != nil {
		return nil, err
	}
	return &Schedule{h: h}, nil
}

// NewSchedule calls weft_schedule_create: a schedule from one action list per rank (copied).
// Lists without any SEND/RECV get them inserted; everything but kinds and signs is checked by
// Validate, so a broken schedule can still be built and inspected.
func NewSchedule(lists [][]Action) (*Schedule, error) {
	if err := checkInt(len(lists), "number of rank lists"); err != nil {
		return nil, err
	}
	var s staging
	defer s.free()
	var ptrs **C.weft_action_t
	var counts *C.size_t
	if len(lists) > 0 {
		var a C.weft_action_t
		ps := unsafe.Slice((**C.weft_action_t)(s.alloc(uintptr(len(lists))*unsafe.Sizeof(ptrs))), len(lists))
		ns := make([]int, len(lists))
		for r, l := range lists {
			ns[r] = len(l)
			ps[r] = (*C.weft_action_t)(s.alloc(uintptr(len(l)) * unsafe.Sizeof(a)))
			if len(l) == 0 {
				continue
			}
			dst := unsafe.Slice(ps[r], len(l))
			for i, x := range l {
				if x.Stage != int(int32(x.Stage)) || x.Microbatch != int(int32(x.Microbatch)) {
					return nil, newError(StatusInvalidArgument, "rank %d action %d (%v) does not fit 32-bit fields", r, i, x)
				}
				dst[i] = C.weft_action_t{kind: C.weft_action_kind_t(x.Kind), stage: C.int32_t(x.Stage), microbatch: C.int32_t(x.Microbatch)}
			}
		}
		ptrs, counts = &ps[0], stageCounts(&s, ns)
	}
	var h C.weft_schedule_t
	if err := call(func() C.weft_status_t { return C.weft_schedule_create(C.int(len(lists)), ptrs, counts, &h) }); err != nil {
		return nil, err
	}
	return &Schedule{h: h}, nil
}

// ScheduleFromCSV calls weft_schedule_from_csv: parses torch's CSV (either form; empty cells and
// "None" are idle steps; "\n" or "\r\n" rows).
func ScheduleFromCSV(text string) (*Schedule, error) {
	cs := C.CString(text)
	defer C.free(unsafe.Pointer(cs))
	var h C.weft_schedule_t
	if err := call(func() C.weft_status_t { return C.weft_schedule_from_csv(cs, C.size_t(len(text)), &h) }); err != nil {
		return nil, err
	}
	return &Schedule{h: h}, nil
}

// LoadSchedule calls weft_schedule_load: a schedule written by Schedule.Save (the file is
// verified before it is read).
func LoadSchedule(path string) (*Schedule, error) {
	cp, err := cPath(path, "schedule path")
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(cp))
	var h C.weft_schedule_t
	if err := call(func() C.weft_status_t { return C.weft_schedule_load(cp, &h) }); err != nil {
		return nil, err
	}
	return &Schedule{h: h}, nil
}

// Close calls weft_schedule_destroy. Closing twice, or a nil *Schedule, is a no-op.
func (s *Schedule) Close() error {
	if s == nil || s.h == nil {
		return nil
	}
	h := s.h
	s.h = nil
	return call(func() C.weft_status_t { return C.weft_schedule_destroy(h) })
}

// Info calls weft_schedule_info.
func (s *Schedule) Info() (ScheduleInfo, error) {
	if err := s.open(); err != nil {
		return ScheduleInfo{}, err
	}
	var i C.weft_schedule_info_t
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	i.kind = C.WEFT_SCHEDULE_CUSTOM
	err := call(func() C.weft_status_t { return C.weft_schedule_info(s.h, &i) })
	return ScheduleInfo{Kind: ScheduleKind(i.kind), Ranks: int(i.ranks), Stages: int(i.stages),
		Microbatches: int(i.microbatches), StagesPerRank: int(i.stages_per_rank)}, err
}

// Actions calls weft_schedule_actions: rank's actions in order (a copy).
func (s *Schedule) Actions(rank int) ([]Action, error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if err := checkInt(rank, "rank"); err != nil {
		return nil, err
	}
	var p *C.weft_action_t
	var n C.size_t
	if err := call(func() C.weft_status_t { return C.weft_schedule_actions(s.h, C.int(rank), &p, &n) }); err != nil {
		return nil, err
	}
	out := make([]Action, int(n))
	if n > 0 {
		for i, a := range unsafe.Slice(p, int(n)) {
			out[i] = Action{Kind: ActionKind(a.kind), Stage: int(a.stage), Microbatch: int(a.microbatch)}
		}
	}
	return out, nil
}

// StageRank calls weft_schedule_stage_rank: the rank that holds stage, -1 when no rank runs its
// forward.
func (s *Schedule) StageRank(stage int) (int, error) {
	if err := s.open(); err != nil {
		return -1, err
	}
	if err := checkInt(stage, "stage"); err != nil {
		return -1, err
	}
	r := C.int(-1)
	err := call(func() C.weft_status_t { return C.weft_schedule_stage_rank(s.h, C.int(stage), &r) })
	return int(r), err
}

// Validate calls weft_schedule_validate: nil, or StatusInvalidArgument naming the rank, the
// action index, the action and the rule broken (placement, completeness, order, transfers, no
// deadlock).
func (s *Schedule) Validate() error {
	if err := s.open(); err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_schedule_validate(s.h) })
}

// ToCSV calls weft_schedule_to_csv: torch's CSV, one row per rank, rows ended by "\r\n".
func (s *Schedule) ToCSV(format CSVFormat) (string, error) {
	if err := s.open(); err != nil {
		return "", err
	}
	var n C.size_t
	if err := call(func() C.weft_status_t {
		return C.weft_schedule_to_csv(s.h, C.weft_csv_format_t(format), nil, 0, &n)
	}); err != nil {
		return "", err
	}
	buf := (*C.char)(C.malloc(n + 1))
	if buf == nil {
		return "", newError(StatusOutOfMemory, "no memory for a CSV of %d bytes", int(n))
	}
	defer C.free(unsafe.Pointer(buf))
	if err := call(func() C.weft_status_t {
		return C.weft_schedule_to_csv(s.h, C.weft_csv_format_t(format), buf, n+1, &n)
	}); err != nil {
		return "", err
	}
	return C.GoStringN(buf, C.int(n)), nil
}

// Save calls weft_schedule_save: the schedule as a FlatBuffers file.
func (s *Schedule) Save(path string) error {
	if err := s.open(); err != nil {
		return err
	}
	cp, err := cPath(path, "schedule path")
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(cp))
	return call(func() C.weft_status_t { return C.weft_schedule_save(s.h, cp) })
}

func (s *Schedule) String() string {
	i, err := s.Info()
	if err != nil {
		return "weft.Schedule(closed)"
	}
	return fmt.Sprintf("weft.Schedule(%v, p=%d, S=%d, m=%d)", i.Kind, i.Ranks, i.Stages, i.Microbatches)
}

// FormatActions joins actions as torch's strings ("0F0 0SEND_F0 ...").
func FormatActions(actions []Action) string {
	parts := make([]string, len(actions))
	for i, a := range actions {
		parts[i] = a.String()
	}
	return strings.Join(parts, " ")
}
