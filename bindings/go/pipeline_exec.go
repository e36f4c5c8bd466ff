package weft

/*
#include <stdint.h>
#include <stdlib.h>
#include <weft/weft.h>

// Exported from pipeline_callbacks.go (cgo writes its prototype without const).
extern weft_status_t weftGoStageCallback(weft_stage_call_t *call, void *user_data);

static weft_stage_fn go_stage_fn_pointer(void) { return (weft_stage_fn)weftGoStageCallback; }
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// The pipeline executor (weft/pipeline.h, last part). A Pipeline runs a Schedule over a
// communicator, calling Go functions for the compute actions and moving activations and
// gradients between ranks itself.
//
// Callbacks run on the goroutine (and OS thread) inside Pipeline.Run. A callback's error
// becomes weft_pipeline_set_error(err.Error()) and WEFT_ERR_INVALID_ARGUMENT, so Run fails with
// that text and the action named; a panic is recovered and reported the same way. A callback
// must not call runtime.Goexit (testing's t.Fatal does): that would unwind the C frames below it.
//
// cgo rules: the buffers a callback sees are weft's (C memory); StageData views them as Go
// slices, valid only during the call (an F input until the backward of the same stage and
// micro-batch has returned), and never kept by C. weft keeps only a C pointer to a cgo.Handle.

// DeviceType is where a boundary lives (weft_device_type_t); the zero value means host memory.
type DeviceType int

const (
	DeviceCPU      DeviceType = C.WEFT_DEVICE_CPU
	DeviceCUDA     DeviceType = C.WEFT_DEVICE_CUDA
	DeviceCUDAHost DeviceType = C.WEFT_DEVICE_CUDA_HOST
)

// StageBuffer is a weft-owned buffer a callback is given.
type StageBuffer struct {
	Dtype    Dtype
	Shape    []int
	Device   DeviceType
	DeviceID int
	Data     unsafe.Pointer // the first element (C memory)
	strided  bool
}

// Len is the number of elements.
func (b *StageBuffer) Len() int { return product(b.Shape) }

// StageCall is what a callback is given (weft_stage_call_t). Input and Output are nil where
// pipeline.h says the call has none (stage 0's forward input, the last stage's forward output
// and backward input, stage 0's backward output, W and REDUCE_GRAD). Microbatch is -1 for
// REDUCE_GRAD.
type StageCall struct {
	Kind       ActionKind
	Stage      int
	Microbatch int
	Input      *StageBuffer
	Output     *StageBuffer
}

func bufferOf(t *C.weft_tensor_t) *StageBuffer {
	if t == nil {
		return nil
	}
	b := &StageBuffer{Dtype: Dtype(t.dtype), Device: DeviceType(t.device_type), DeviceID: int(t.device_id),
		Data: unsafe.Add(t.data, uintptr(t.byte_offset)), strided: t.strides != nil}
	if t.ndim > 0 && t.shape != nil {
		for _, x := range unsafe.Slice(t.shape, int(t.ndim)) {
			b.Shape = append(b.Shape, int(x))
		}
	}
	return b
}

func newStageCall(c *C.weft_stage_call_t) *StageCall {
	return &StageCall{Kind: ActionKind(c.kind), Stage: int(c.stage), Microbatch: int(c.microbatch),
		Input: bufferOf(c.input), Output: bufferOf(c.output)}
}

func (c *StageCall) String() string {
	return Action{Kind: c.Kind, Stage: c.Stage, Microbatch: c.Microbatch}.String()
}

// StageData views a host buffer of element type T as a slice (nil, nil for a nil buffer); an
// error says what does not match (device memory, another dtype, strides).
func StageData[T Element](b *StageBuffer) ([]T, error) {
	if b == nil {
		return nil, nil
	}
	switch {
	case b.Device == DeviceCUDA:
		return nil, fmt.Errorf("weft: the buffer is CUDA memory of device %d; use its Data pointer", b.DeviceID)
	case b.Dtype != DtypeOf[T]():
		return nil, fmt.Errorf("weft: the buffer holds dtype %d, not %d", int(b.Dtype), int(DtypeOf[T]()))
	case b.strided:
		return nil, fmt.Errorf("weft: the buffer is strided")
	}
	return cslice[T](b.Data, b.Len()), nil
}

// StageFunc is a stage callback; a non-nil error stops the run with its text.
type StageFunc func(call *StageCall) error

// Callbacks are the stage callbacks (pipeline.h: Forward is required; Backward when the
// schedule has B actions; BackwardInput and BackwardWeight when it has I and W; ReduceGrad
// optional).
type Callbacks struct {
	Forward, Backward, BackwardInput, BackwardWeight, ReduceGrad StageFunc
}

func (c *Callbacks) pick(k ActionKind) StageFunc {
	switch k {
	case ActionF:
		return c.Forward
	case ActionB:
		return c.Backward
	case ActionI:
		return c.BackwardInput
	case ActionW:
		return c.BackwardWeight
	case ActionReduceGrad:
		return c.ReduceGrad
	}
	return nil
}

// Boundary is stage s's output = stage s+1's input (and the gradient sent back).
type Boundary struct {
	Dtype    Dtype
	Shape    []int
	Device   DeviceType // zero: DeviceCPU
	DeviceID int
}

// HostBoundary is a host boundary of element type T.
func HostBoundary[T Element](shape ...int) Boundary {
	return Boundary{Dtype: DtypeOf[T](), Shape: append([]int(nil), shape...), Device: DeviceCPU}
}

// PipelineConfig holds executor options (weft_pipeline_config_t).
type PipelineConfig struct {
	Callbacks  Callbacks
	Boundaries []Boundary // S - 1 of them
	// Stream: for device boundaries, the cudaStream_t the callbacks' work is queued on (nil =
	// the communicator's).
	Stream unsafe.Pointer
	// Record: every Run records each action's start and end and gathers them to every rank
	// (set it on all ranks or none).
	Record bool
}

// Pipeline is an executor (weft_pipeline_t); used by one goroutine at a time; Close frees it.
type Pipeline struct {
	h      C.weft_pipeline_t
	handle cgo.Handle
	ud     unsafe.Pointer // C memory holding the handle: weft's user_data
	record bool
}

// NewPipeline calls weft_pipeline_create, collective over c (its size = the schedule's ranks;
// rank r runs list r). The schedule is validated; the pipeline keeps its own reference to it.
func NewPipeline(c *Comm, s *Schedule, cfg *PipelineConfig) (*Pipeline, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		return nil, err
	}
	if cfg == nil || cfg.Callbacks.Forward == nil {
		return nil, newError(StatusInvalidArgument, "NewPipeline: the Forward callback is required")
	}
	var st staging
	defer st.free()
	var bounds *C.weft_tensor_t
	if n := len(cfg.Boundaries); n > 0 {
		var z C.weft_tensor_t
		views := unsafe.Slice((*C.weft_tensor_t)(st.alloc(uintptr(n)*unsafe.Sizeof(z))), n)
		for i, b := range cfg.Boundaries {
			t, err := stageTensor(&st, nil, b.Dtype, b.Shape)
			if err != nil {
				return nil, newError(StatusInvalidArgument, "boundary %d: %v", i, err)
			}
			if b.Device != 0 {
				t.device_type = C.weft_device_type_t(b.Device)
			}
			t.device_id = C.int(b.DeviceID)
			views[i] = *t
		}
		bounds = &views[0]
	}
	cbs := cfg.Callbacks
	p := &Pipeline{handle: cgo.NewHandle(&cbs), record: cfg.Record}
	p.ud = C.malloc(C.size_t(unsafe.Sizeof(C.uintptr_t(0))))
	if p.ud == nil {
		p.handle.Delete()
		return nil, newError(StatusOutOfMemory, "NewPipeline: no memory for user_data")
	}
	*(*C.uintptr_t)(p.ud) = C.uintptr_t(p.handle)

	var z C.weft_pipeline_config_t
	cc := (*C.weft_pipeline_config_t)(st.alloc(unsafe.Sizeof(z)))
	*cc = z
	cc.struct_size = C.size_t(unsafe.Sizeof(z))
	fn := C.go_stage_fn_pointer()
	given := func(f StageFunc) C.weft_stage_fn {
		if f == nil {
			return nil
		}
		return fn
	}
	cc.forward, cc.backward = given(cbs.Forward), given(cbs.Backward)
	cc.backward_input, cc.backward_weight = given(cbs.BackwardInput), given(cbs.BackwardWeight)
	cc.reduce_grad = given(cbs.ReduceGrad)
	cc.user_data = p.ud
	cc.boundaries, cc.nboundaries = bounds, C.size_t(len(cfg.Boundaries))
	cc.stream = cfg.Stream
	if cfg.Record {
		cc.record = 1
	}
	if err := call(func() C.weft_status_t { return C.weft_pipeline_create(c.h, s.h, cc, &p.h) }); err != nil {
		p.release()
		return nil, err
	}
	return p, nil
}

func (p *Pipeline) release() {
	if p.ud != nil {
		C.free(p.ud)
		p.ud = nil
		p.handle.Delete()
	}
}

// Run calls weft_pipeline_run: one step (this rank's actions in order; the callbacks run on
// this goroutine). With Record set, the step's timeline for all ranks (Close it); else nil.
func (p *Pipeline) Run() (*Timeline, error) {
	if p == nil || p.h == nil {
		return nil, newError(StatusInvalidArgument, "the pipeline is closed")
	}
	var t C.weft_timeline_t
	out := (*C.weft_timeline_t)(nil)
	if p.record {
		out = &t
	}
	if err := call(func() C.weft_status_t { return C.weft_pipeline_run(p.h, out) }); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, nil
	}
	return &Timeline{h: t}, nil
}

// Close calls weft_pipeline_destroy and frees the callbacks' handle. Closing twice, or a nil
// *Pipeline, is a no-op.
func (p *Pipeline) Close() error {
	if p == nil || p.h == nil {
		return nil
	}
	h := p.h
	p.h = nil
	err := call(func() C.weft_status_t { return C.weft_pipeline_destroy(h) })
	p.release()
	return err
}
