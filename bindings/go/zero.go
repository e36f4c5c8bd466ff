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

// ZeRO stages 0-3 with a fused optimizer (weft/training.h). weft holds the parameters,
// gradients, optimizer state and master weights; the caller reads the parameters (ZeroParam),
// hands in gradients (GradReady) and steps.

// OptimizerKind is a weft_optimizer_kind_t: torch.optim's formulas (foreach=False) in float32.
type OptimizerKind int

const (
	OptimizerSGD   OptimizerKind = C.WEFT_OPTIMIZER_SGD   // momentum, dampening 0, weight decay added to the gradient
	OptimizerAdam  OptimizerKind = C.WEFT_OPTIMIZER_ADAM  // L2 weight decay added to the gradient
	OptimizerAdamW OptimizerKind = C.WEFT_OPTIMIZER_ADAMW // decoupled weight decay
)

// OptimizerConfig is weft_optimizer_config_t; start from DefaultOptimizerConfig().
type OptimizerConfig struct {
	Kind        OptimizerKind
	LR          float32
	Momentum    float32 // SGD
	Beta1       float32 // Adam, AdamW
	Beta2       float32
	Eps         float32
	WeightDecay float32
}

// DefaultOptimizerConfig is WEFT_OPTIMIZER_CONFIG_INIT: AdamW, lr 1e-3, betas (0.9, 0.999),
// eps 1e-8, weight decay 0.01.
func DefaultOptimizerConfig() OptimizerConfig {
	return OptimizerConfig{Kind: OptimizerAdamW, LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
}

// ZeroConfig is weft_zero_config_t; start from DefaultZeroConfig() (a nil config means the
// defaults).
type ZeroConfig struct {
	// 0 = plain data parallel; 1 = optimizer state sharded; 2 = + gradients; 3 = + parameters.
	Stage int
	// DtypeFloat32, DtypeBFloat16 or DtypeFloat16 (16-bit ones with float32 master weights).
	ParamDtype Dtype
	Optimizer  OptimizerConfig
	// Each parameter's group (0, 1, ... without gaps, non-decreasing): one flat buffer, reduced,
	// partitioned and (stage 3) gathered together. nil: consecutive parameters up to GroupBytes.
	Groups     []int
	GroupBytes int // 0 = 25 MiB
	// Parameter names for messages and the saved state (nil: "param[i]").
	Names       []string
	GradOp      Op // OpAvg (the mean over the data-parallel ranks) or OpSum
	Wire        WireFormat
	MaxGradNorm float32 // clip the unscaled gradients to this global L2 norm (0 = no clipping)
	LossScale   float32 // the factor the loss was multiplied by (1 = none)
	// torch.amp.GradScaler's rule: a skipped step multiplies the scale by Backoff,
	// GrowthInterval clean steps in a row by Growth.
	DynamicLossScale bool
	Growth           float32
	Backoff          float32
	GrowthInterval   int
	ErrorFeedback    bool // as the bucketer's (compressed wires only)
}

// DefaultZeroConfig is WEFT_ZERO_CONFIG_INIT: stage 2, float32, AdamW, 25 MiB groups, OpAvg,
// the native wire, no clipping, no loss scaling.
func DefaultZeroConfig() ZeroConfig {
	return ZeroConfig{Stage: 2, ParamDtype: DtypeFloat32, Optimizer: DefaultOptimizerConfig(), GradOp: OpAvg,
		Wire: WireNative, LossScale: 1, Growth: 2, Backoff: 0.5, GrowthInterval: 2000}
}

// ZeroStepInfo is weft_zero_step_info_t: what Step did.
type ZeroStepInfo struct {
	Skipped      bool    // an inf/NaN gradient on some rank: no parameter changed
	GradNorm     float32 // global L2 norm of the unscaled gradient, before clipping
	LossScale    float32 // the scale to multiply the next step's loss by
	CommElements uint64  // elements this rank's collectives moved since the last step
	CommBytes    uint64  // the same in bytes, in the wire format
}

// ZeroMemory is weft_zero_memory_t: bytes weft holds for this rank.
type ZeroMemory struct {
	Params, Grads, Optimizer, Buffers, BuffersPeak uint64
}

// Zero is a ZeRO handle (weft_zero_t). Close it when done (not collective); it is not closed by
// the garbage collector. Used by one goroutine at a time.
type Zero struct {
	h      C.weft_zero_t
	shapes [][]int
	dtype  Dtype
}

// NewZero calls weft_zero_create, collective over the members of m: partitions over mesh dim
// dpDim (every other dim keeps its own copy). params are the initial values (weft.Tensor(slice,
// shape...), of cfg.ParamDtype or float32), read during the call; the dp coordinate 0's values
// are broadcast to the others.
func NewZero(m *Mesh, dpDim string, params []HostTensor, cfg *ZeroConfig) (*Zero, error) {
	if err := m.open(); err != nil {
		return nil, err
	}
	if cfg == nil {
		d := DefaultZeroConfig()
		cfg = &d
	}
	s := &staging{}
	defer s.free()
	n := len(params)
	var views *C.weft_tensor_t
	shapes := make([][]int, n)
	if n > 0 {
		var z C.weft_tensor_t
		arr := unsafe.Slice((*C.weft_tensor_t)(s.alloc(uintptr(n)*unsafe.Sizeof(z))), n)
		for i, p := range params {
			t, err := p.stage(s, false)
			if err != nil {
				return nil, fmt.Errorf("parameter %d: %w", i, err)
			}
			arr[i] = *t
			shapes[i] = p.Shape()
		}
		views = &arr[0]
	}
	dim, err := cString(s, dpDim, "dp_dim")
	if err != nil {
		return nil, err
	}
	var cc C.weft_zero_config_t
	cc.struct_size = C.size_t(unsafe.Sizeof(cc))
	for _, v := range []struct {
		x    int
		what string
	}{{cfg.Stage, "Stage"}, {cfg.GroupBytes, "GroupBytes"}, {cfg.GrowthInterval, "GrowthInterval"}} {
		if v.x < 0 || checkInt(v.x, v.what) != nil {
			return nil, newError(StatusInvalidArgument, "ZeroConfig.%s = %d; expected a non-negative C int", v.what, v.x)
		}
	}
	cc.stage = C.int(cfg.Stage)
	cc.param_dtype = C.weft_dtype_t(cfg.ParamDtype)
	o := cfg.Optimizer
	cc.optimizer.struct_size = C.size_t(unsafe.Sizeof(cc.optimizer))
	cc.optimizer.kind = C.weft_optimizer_kind_t(o.Kind)
	cc.optimizer.lr, cc.optimizer.momentum = C.float(o.LR), C.float(o.Momentum)
	cc.optimizer.beta1, cc.optimizer.beta2 = C.float(o.Beta1), C.float(o.Beta2)
	cc.optimizer.eps, cc.optimizer.weight_decay = C.float(o.Eps), C.float(o.WeightDecay)
	if cfg.Groups != nil {
		if len(cfg.Groups) != n {
			return nil, newError(StatusInvalidArgument, "ZeroConfig.Groups has %d entries for %d parameters", len(cfg.Groups), n)
		}
		if n > 0 {
			g := unsafe.Slice((*C.int)(s.alloc(uintptr(n)*C.sizeof_int)), n)
			for i, x := range cfg.Groups {
				if err := checkInt(x, "group index"); err != nil {
					return nil, err
				}
				g[i] = C.int(x)
			}
			cc.groups = &g[0]
		}
	}
	cc.group_bytes = C.size_t(cfg.GroupBytes)
	if cc.names, err = cStrings(s, cfg.Names, n, "parameter"); err != nil {
		return nil, err
	}
	cc.grad_op = C.weft_op_t(cfg.GradOp)
	cc.wire = C.weft_wire_format_t(cfg.Wire)
	cc.max_grad_norm, cc.loss_scale = C.float(cfg.MaxGradNorm), C.float(cfg.LossScale)
	cc.dynamic_loss_scale = cBool(cfg.DynamicLossScale)
	cc.growth, cc.backoff, cc.growth_interval = C.float(cfg.Growth), C.float(cfg.Backoff), C.int(cfg.GrowthInterval)
	cc.error_feedback = cBool(cfg.ErrorFeedback)
	var h C.weft_zero_t
	if err := call(func() C.weft_status_t { return C.weft_zero_create(m.h, dim, views, C.size_t(n), &cc, &h) }); err != nil {
		return nil, err
	}
	return &Zero{h: h, shapes: shapes, dtype: cfg.ParamDtype}, nil
}

func (z *Zero) open() error {
	if z == nil || z.h == nil {
		return newError(StatusInvalidArgument, "the ZeRO handle is closed")
	}
	return nil
}

// NumParams is the number of parameters.
func (z *Zero) NumParams() int { return len(z.shapes) }

// ParamShape is parameter p's shape.
func (z *Zero) ParamShape(p int) []int {
	if p < 0 || p >= len(z.shapes) {
		return nil
	}
	return append([]int(nil), z.shapes[p]...)
}

// NumGroups calls weft_zero_num_groups.
func (z *Zero) NumGroups() (int, error) {
	if err := z.open(); err != nil {
		return 0, err
	}
	var n C.size_t
	err := call(func() C.weft_status_t { return C.weft_zero_num_groups(z.h, &n) })
	return int(n), err
}

// GroupOf calls weft_zero_group_of: parameter p's group.
func (z *Zero) GroupOf(p int) (int, error) {
	if err := z.open(); err != nil {
		return 0, err
	}
	var g C.size_t
	err := call(func() C.weft_status_t { return C.weft_zero_group_of(z.h, C.size_t(p), &g) })
	return int(g), err
}

// ZeroParam calls weft_zero_param: the full value of parameter p (row-major, its shape) as a
// view of weft's memory; T must match ParamDtype. Valid until the next Step (stages 0-2) or the
// group's Release (stage 3, where it is readable only while the group is gathered); the caller
// must not write it.
func ZeroParam[T Element](z *Zero, p int) ([]T, error) {
	if err := z.open(); err != nil {
		return nil, err
	}
	if DtypeOf[T]() != z.dtype {
		return nil, newError(StatusInvalidArgument, "the parameters are dtype %d, not %d", int(z.dtype), int(DtypeOf[T]()))
	}
	var v C.weft_tensor_t
	if err := call(func() C.weft_status_t { return C.weft_zero_param(z.h, C.size_t(p), &v) }); err != nil {
		return nil, err
	}
	n := product(z.shapes[p])
	if n == 0 || v.data == nil {
		return nil, nil
	}
	return cslice[T](unsafe.Add(v.data, int(v.byte_offset)), n), nil
}

// ParamFloat32 is a float32 copy of parameter p (of any ParamDtype).
func (z *Zero) ParamFloat32(p int) ([]float32, error) {
	switch z.dtype {
	case DtypeBFloat16:
		v, err := ZeroParam[BFloat16](z, p)
		return widen(v, func(x BFloat16) float32 { return x.Float32() }), err
	case DtypeFloat16:
		v, err := ZeroParam[Float16](z, p)
		return widen(v, func(x Float16) float32 { return x.Float32() }), err
	}
	v, err := ZeroParam[float32](z, p)
	return append([]float32(nil), v...), err
}

func widen[T any](v []T, f func(T) float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

// Gather calls weft_zero_gather, blocking: stage 3 all-gathers group g (at once when it is
// already gathered); stages 0-2 do nothing.
func (z *Zero) Gather(g int) error {
	if err := z.open(); err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_zero_gather(z.h, C.size_t(g), nil) })
}

// GatherAsync calls weft_zero_gather with a request: the gather runs while the caller computes
// (prefetch group g + 1 during g's forward); its parameters are readable once Wait returns. A
// gather with nothing to do returns a completed Request.
func (z *Zero) GatherAsync(g int) (*Request, error) {
	if err := z.open(); err != nil {
		return nil, err
	}
	var h C.weft_request_t
	if err := call(func() C.weft_status_t { return C.weft_zero_gather(z.h, C.size_t(g), &h) }); err != nil {
		return nil, err
	}
	if h == nil {
		return &Request{done: true}, nil
	}
	return &Request{h: h, st: &staging{}}, nil
}

// Release calls weft_zero_release: stage 3 frees group g's gathered parameters (no gather may
// be in flight for it); stages 0-2 do nothing.
func (z *Zero) Release(g int) error {
	if err := z.open(); err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_zero_release(z.h, C.size_t(g)) })
}

// GradReady calls weft_zero_grad_ready: parameter p's gradient for this step
// (weft.Tensor(slice, shape...) of ParamDtype and the parameter's shape), copied during the call.
// Completing a group starts its reduction. Twice in a step is an error naming the parameter.
func (z *Zero) GradReady(p int, grad HostTensor) error {
	if err := z.open(); err != nil {
		return err
	}
	s := &staging{}
	defer s.free()
	t, err := grad.stage(s, false)
	if err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_zero_grad_ready(z.h, C.size_t(p), t) })
}

// Step calls weft_zero_step, collective over the mesh's members: waits for the reductions,
// unscales, agrees on skipping, clips, runs the optimizer on this rank's shard and (stages 0-2)
// all-gathers the new parameters. Parameter views taken before it are invalid after it.
func (z *Zero) Step() (ZeroStepInfo, error) {
	if err := z.open(); err != nil {
		return ZeroStepInfo{}, err
	}
	var i C.weft_zero_step_info_t
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	if err := call(func() C.weft_status_t { return C.weft_zero_step(z.h, &i) }); err != nil {
		return ZeroStepInfo{}, err
	}
	return ZeroStepInfo{Skipped: i.skipped != 0, GradNorm: float32(i.grad_norm), LossScale: float32(i.loss_scale),
		CommElements: uint64(i.comm_elements), CommBytes: uint64(i.comm_bytes)}, nil
}

// Memory calls weft_zero_memory.
func (z *Zero) Memory() (ZeroMemory, error) {
	if err := z.open(); err != nil {
		return ZeroMemory{}, err
	}
	var m C.weft_zero_memory_t
	m.struct_size = C.size_t(unsafe.Sizeof(m))
	if err := call(func() C.weft_status_t { return C.weft_zero_memory(z.h, &m) }); err != nil {
		return ZeroMemory{}, err
	}
	return ZeroMemory{Params: uint64(m.params), Grads: uint64(m.grads), Optimizer: uint64(m.optimizer),
		Buffers: uint64(m.buffers), BuffersPeak: uint64(m.buffers_peak)}, nil
}

// Save calls weft_zero_save, collective over the mesh's members: the optimizer state (master
// weights, optimizer buffers, step count, loss scale) as a weft checkpoint in directory dir.
func (z *Zero) Save(dir string) error {
	if err := z.open(); err != nil {
		return err
	}
	s := &staging{}
	defer s.free()
	d, err := cString(s, dir, "directory")
	if err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_zero_save(z.h, d) })
}

// Load calls weft_zero_load, collective: reads a state saved with the same parameter shapes and
// optimizer, on any data-parallel size, and all-gathers the parameters.
func (z *Zero) Load(dir string) error {
	if err := z.open(); err != nil {
		return err
	}
	s := &staging{}
	defer s.free()
	d, err := cString(s, dir, "directory")
	if err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_zero_load(z.h, d) })
}

// Close calls weft_zero_destroy. Closing twice, or a nil *Zero, is a no-op.
func (z *Zero) Close() error {
	if z == nil || z.h == nil {
		return nil
	}
	h := z.h
	z.h = nil
	return call(func() C.weft_status_t { return C.weft_zero_destroy(h) })
}

func (z *Zero) String() string {
	if z == nil || z.h == nil {
		return "weft.Zero(closed)"
	}
	return fmt.Sprintf("weft.Zero(%d parameters, dtype %d)", len(z.shapes), int(z.dtype))
}
