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

// Expert parallelism (weft/moe.h) over host memory: the router (Route, RouterBackward,
// UpdateBias), the dispatch layout (MoeLayout), and Moe, whose MoeDispatch sends each token to
// the ranks of its experts and returns a *MoeHandle (what this rank received) that MoeCombine
// and MoeCombineBackward reuse. Every call copies its inputs into C memory and its results back
// (the cgo rules), so Go slices are never kept by C.

// MoeDropped is WEFT_MOE_DROPPED, the expert index of a dropped slot.
const MoeDropped = int32(C.WEFT_MOE_DROPPED)

// RouterScore is weft_router_score_t (moe.h gives the formulas).
type RouterScore int

const (
	RouterSoftmax     RouterScore = C.WEFT_ROUTER_SOFTMAX      // softmax over all E, the k largest
	RouterTopkSoftmax RouterScore = C.WEFT_ROUTER_TOPK_SOFTMAX // the k largest logits, softmax over them
	RouterSigmoid     RouterScore = C.WEFT_ROUTER_SIGMOID      // sigmoid scores over their sum
)

// DropPolicy is weft_router_drop_t: which slots an expert over capacity drops.
type DropPolicy int

const (
	DropNone          DropPolicy = C.WEFT_DROP_NONE           // dropless
	DropByProbability DropPolicy = C.WEFT_DROP_BY_PROBABILITY // keep the C of highest weight
	DropByPosition    DropPolicy = C.WEFT_DROP_BY_POSITION    // keep the first C in token order
)

// RouterConfig is weft_router_config_t. CapacityFactor 0 means the header's default, 1.
type RouterConfig struct {
	Experts, TopK      int
	Score              RouterScore
	Normalize          bool
	Groups, TopKGroups int       // group-limited routing (Groups <= 1: off)
	Bias               []float32 // nil, or Experts values added to the scores for selection only
	Drop               DropPolicy
	CapacityFactor     float64
	AuxLossCoeff       float32
	ZLossCoeff         float32
	Selector           int // 0 = the built-in top-k; a ROUTER plugin's id (PluginEntry.ID)
}

// RouterResult is what the router chose, per token t and slot j at t*TopK+j.
type RouterResult struct {
	Indices           []int32   // expert per slot, or MoeDropped
	Weights           []float32 // 0 for dropped slots
	TokensPerExpert   []int64   // kept after dropping
	SelectedPerExpert []int64   // before dropping
	AuxLoss, ZLoss    float32
}

// RouterInput is the constraint of the router's logits: float32 or BFloat16.
type RouterInput interface{ ~float32 | BFloat16 }

// cArray copies src into C memory; at least one element is allocated so that C never sees NULL
// for an empty array.
func cArray[T Element](s *staging, src []T) unsafe.Pointer {
	var z T
	n := len(src)
	if n == 0 {
		n = 1
	}
	p := s.alloc(uintptr(n) * unsafe.Sizeof(z))
	copy(unsafe.Slice((*T)(p), n), src)
	return p
}

// cZeros allocates n zeroed elements of T in C memory (at least one).
func cZeros[T Element](s *staging, n int) unsafe.Pointer {
	return cArray(s, make([]T, n))
}

func (c *RouterConfig) toC(s *staging) (*C.weft_router_config_t, error) {
	if c == nil {
		return nil, newError(StatusInvalidArgument, "RouterConfig is nil")
	}
	if c.Bias != nil && len(c.Bias) != c.Experts {
		return nil, newError(StatusInvalidArgument, "RouterConfig.Bias has %d values, expected Experts = %d", len(c.Bias), c.Experts)
	}
	for _, v := range []struct {
		x    int
		name string
	}{{c.Experts, "Experts"}, {c.TopK, "TopK"}, {c.Groups, "Groups"}, {c.TopKGroups, "TopKGroups"}} {
		if err := checkInt(v.x, "RouterConfig."+v.name); err != nil {
			return nil, err
		}
	}
	r := (*C.weft_router_config_t)(s.alloc(C.sizeof_weft_router_config_t))
	*r = C.weft_router_config_t{}
	r.struct_size = C.sizeof_weft_router_config_t
	r.experts, r.topk = C.int(c.Experts), C.int(c.TopK)
	r.score = C.weft_router_score_t(c.Score)
	r.normalize = cBool(c.Normalize)
	r.groups, r.topk_groups = C.int(c.Groups), C.int(c.TopKGroups)
	if c.Bias != nil {
		r.bias = (*C.float)(cArray(s, c.Bias))
	}
	r.drop = C.weft_router_drop_t(c.Drop)
	r.capacity_factor = C.double(c.CapacityFactor)
	if c.CapacityFactor == 0 {
		r.capacity_factor = 1
	}
	r.aux_loss_coeff, r.z_loss_coeff = C.float(c.AuxLossCoeff), C.float(c.ZLossCoeff)
	r.selector = C.int(c.Selector)
	return r, nil
}

// tokensOf is T for logits of T*Experts values.
func (c *RouterConfig) tokensOf(n int) (int, error) {
	if c.Experts <= 0 || n%c.Experts != 0 {
		return 0, newError(StatusInvalidArgument, "logits hold %d values, expected a multiple of Experts = %d (shape [T, E])", n, c.Experts)
	}
	return n / c.Experts, nil
}

// hostTensor2 describes a [rows, cols] host tensor of dtype at data, in C memory.
func hostTensor2(s *staging, data unsafe.Pointer, dtype Dtype, rows, cols int) *C.weft_tensor_t {
	t, _ := stageTensor(s, data, dtype, []int{rows, cols}) // two dims never exceed the maximum
	return t
}

// Route is weft_router_forward on host logits [T, E] (T = len(logits) / cfg.Experts).
func Route[T RouterInput](logits []T, cfg *RouterConfig) (*RouterResult, error) {
	s := &staging{}
	defer s.free()
	c, err := cfg.toC(s)
	if err != nil {
		return nil, err
	}
	tokens, err := cfg.tokensOf(len(logits))
	if err != nil {
		return nil, err
	}
	slots := tokens * cfg.TopK
	lt := hostTensor2(s, cArray(s, logits), DtypeOf[T](), tokens, cfg.Experts)
	res := (*C.weft_router_result_t)(s.alloc(C.sizeof_weft_router_result_t))
	*res = C.weft_router_result_t{}
	res.struct_size = C.sizeof_weft_router_result_t
	res.indices = (*C.int32_t)(cZeros[int32](s, slots))
	res.weights = (*C.float)(cZeros[float32](s, slots))
	res.tokens_per_expert = (*C.int64_t)(cZeros[int64](s, cfg.Experts))
	res.selected_per_expert = (*C.int64_t)(cZeros[int64](s, cfg.Experts))
	if err := call(func() C.weft_status_t { return C.weft_router_forward(lt, c, res, nil) }); err != nil {
		return nil, err
	}
	return &RouterResult{
		Indices:           append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(res.indices)), slots)...),
		Weights:           append([]float32(nil), unsafe.Slice((*float32)(unsafe.Pointer(res.weights)), slots)...),
		TokensPerExpert:   append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(res.tokens_per_expert)), cfg.Experts)...),
		SelectedPerExpert: append([]int64(nil), unsafe.Slice((*int64)(unsafe.Pointer(res.selected_per_expert)), cfg.Experts)...),
		AuxLoss:           float32(res.aux_loss),
		ZLoss:             float32(res.z_loss),
	}, nil
}

// RouterBackward is weft_router_backward: the gradient [T, E] of sum(gradWeights*weights) +
// gradAux*aux_loss + gradZ*z_loss with respect to the logits, the selection indices (as Route
// returned them) held fixed.
func RouterBackward[T RouterInput](logits []T, cfg *RouterConfig, indices []int32, gradWeights []float32, gradAux, gradZ float32) ([]float32, error) {
	s := &staging{}
	defer s.free()
	c, err := cfg.toC(s)
	if err != nil {
		return nil, err
	}
	tokens, err := cfg.tokensOf(len(logits))
	if err != nil {
		return nil, err
	}
	if len(indices) != tokens*cfg.TopK || len(gradWeights) != tokens*cfg.TopK {
		return nil, newError(StatusInvalidArgument, "indices and gradWeights hold %d and %d values, expected [T, k] = %d", len(indices), len(gradWeights), tokens*cfg.TopK)
	}
	lt := hostTensor2(s, cArray(s, logits), DtypeOf[T](), tokens, cfg.Experts)
	gp := cZeros[float32](s, len(logits))
	gt := hostTensor2(s, gp, DtypeFloat32, tokens, cfg.Experts)
	ci, cg := (*C.int32_t)(cArray(s, indices)), (*C.float)(cArray(s, gradWeights))
	err = call(func() C.weft_status_t {
		return C.weft_router_backward(lt, c, ci, cg, C.float(gradAux), C.float(gradZ), gt, nil)
	})
	if err != nil {
		return nil, err
	}
	return append([]float32(nil), unsafe.Slice((*float32)(gp), len(logits))...), nil
}

// UpdateBias is weft_router_update_bias: bias[e] += rate * sign(mean - load[e]) with load =
// tokensPerExpert, in place.
func UpdateBias(bias []float32, tokensPerExpert []int64, rate float32) error {
	if len(tokensPerExpert) != len(bias) {
		return newError(StatusInvalidArgument, "tokensPerExpert has %d values, bias %d: expected one per expert each", len(tokensPerExpert), len(bias))
	}
	if err := checkInt(len(bias), "experts"); err != nil {
		return err
	}
	s := &staging{}
	defer s.free()
	cb, cl := cArray(s, bias), cArray(s, tokensPerExpert)
	err := call(func() C.weft_status_t {
		return C.weft_router_update_bias((*C.float)(cb), (*C.int64_t)(cl), C.int(len(bias)), C.float(rate))
	})
	if err == nil {
		copy(bias, unsafe.Slice((*float32)(cb), len(bias)))
	}
	return err
}

// MoeLayoutResult is weft_moe_layout's output.
type MoeLayoutResult struct {
	TokensPerRank   []int64 // tokens that go to each rank (once per rank)
	TokensPerExpert []int64 // kept slots per expert
	TokenInRank     []uint8 // [T * nranks]: 1 where token t goes to rank r
}

// MoeLayout is weft_moe_layout of indices [T, topk] over nranks ranks; expertRank nil =
// contiguous blocks (torch.chunk's rule).
func MoeLayout(indices []int32, topk, experts, nranks int, expertRank []int32) (*MoeLayoutResult, error) {
	if topk <= 0 || len(indices)%topk != 0 {
		return nil, newError(StatusInvalidArgument, "indices hold %d values, expected [T, topk = %d]", len(indices), topk)
	}
	if expertRank != nil && len(expertRank) != experts {
		return nil, newError(StatusInvalidArgument, "expertRank has %d values, expected experts = %d", len(expertRank), experts)
	}
	for _, v := range []int{topk, experts, nranks} {
		if err := checkInt(v, "topk, experts or nranks"); err != nil {
			return nil, err
		}
	}
	if experts < 0 || nranks < 0 {
		return nil, newError(StatusInvalidArgument, "experts = %d and nranks = %d must not be negative", experts, nranks)
	}
	tokens := len(indices) / topk
	s := &staging{}
	defer s.free()
	ci := (*C.int32_t)(cArray(s, indices))
	var cer *C.int32_t
	if expertRank != nil {
		cer = (*C.int32_t)(cArray(s, expertRank))
	}
	pr, pe, pt := cZeros[int64](s, nranks), cZeros[int64](s, experts), cZeros[uint8](s, tokens*nranks)
	err := call(func() C.weft_status_t {
		return C.weft_moe_layout(ci, C.size_t(tokens), C.int(topk), C.int(experts), C.int(nranks), cer,
			(*C.int64_t)(pr), (*C.int64_t)(pe), (*C.uint8_t)(pt))
	})
	if err != nil {
		return nil, err
	}
	return &MoeLayoutResult{
		TokensPerRank:   append([]int64(nil), unsafe.Slice((*int64)(pr), nranks)...),
		TokensPerExpert: append([]int64(nil), unsafe.Slice((*int64)(pe), experts)...),
		TokenInRank:     append([]uint8(nil), unsafe.Slice((*uint8)(pt), tokens*nranks)...),
	}, nil
}

// MoeConfig is weft_moe_config_t for host memory. Dtype must be set: DtypeFloat32,
// DtypeBFloat16 or DtypeFloat16.
type MoeConfig struct {
	Experts, Hidden int
	Dtype           Dtype
	ExpertRank      []int32 // nil = contiguous blocks; else one rank per expert
	ExpertAlignment int     // pad each local expert's rows to a multiple of it (0 or 1: none)
	FP8Dispatch     bool    // tokens travel as FP8 E4M3 with one scale per token
}

// Moe is a weft_moe_t: dispatch and combine over a communicator, collective (every rank makes
// the same calls). Close frees it.
type Moe struct {
	h      C.weft_moe_t
	hidden int
	dtype  Dtype
}

// NewMoe is weft_moe_create, collective (every rank the same config).
func NewMoe(c *Comm, cfg *MoeConfig) (*Moe, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, newError(StatusInvalidArgument, "MoeConfig is nil")
	}
	if cfg.ExpertRank != nil && len(cfg.ExpertRank) != cfg.Experts {
		return nil, newError(StatusInvalidArgument, "MoeConfig.ExpertRank has %d values, expected Experts = %d", len(cfg.ExpertRank), cfg.Experts)
	}
	if err := checkInt(cfg.Experts, "MoeConfig.Experts"); err != nil {
		return nil, err
	}
	if cfg.Hidden < 0 || cfg.ExpertAlignment < 0 {
		return nil, newError(StatusInvalidArgument, "MoeConfig.Hidden = %d and ExpertAlignment = %d must not be negative", cfg.Hidden, cfg.ExpertAlignment)
	}
	s := &staging{}
	defer s.free()
	mc := (*C.weft_moe_config_t)(s.alloc(C.sizeof_weft_moe_config_t))
	*mc = C.weft_moe_config_t{}
	mc.struct_size = C.sizeof_weft_moe_config_t
	mc.experts, mc.hidden, mc.dtype = C.int(cfg.Experts), C.size_t(cfg.Hidden), C.weft_dtype_t(cfg.Dtype)
	if cfg.ExpertRank != nil {
		mc.expert_rank = (*C.int32_t)(cArray(s, cfg.ExpertRank))
	}
	mc.expert_alignment = C.size_t(cfg.ExpertAlignment)
	mc.fp8_dispatch = cBool(cfg.FP8Dispatch)
	var h C.weft_moe_t
	if err := call(func() C.weft_status_t { return C.weft_moe_create(c.h, mc, &h) }); err != nil {
		return nil, err
	}
	return &Moe{h: h, hidden: cfg.Hidden, dtype: cfg.Dtype}, nil
}

// Close is weft_moe_destroy (a second Close does nothing).
func (m *Moe) Close() error {
	if m == nil || m.h == nil {
		return nil
	}
	h := m.h
	m.h = nil
	return call(func() C.weft_status_t { return C.weft_moe_destroy(h) })
}

func (m *Moe) open(dtype Dtype, what string) error {
	if m == nil || m.h == nil {
		return newError(StatusInvalidArgument, "the Moe is closed")
	}
	if dtype != m.dtype {
		return newError(StatusInvalidArgument, "%s has dtype %d, the Moe's is %d", what, dtype, m.dtype)
	}
	return nil
}

// MoeHandle is a weft_moe_handle_t: what one dispatch delivered on this rank, kept for combine
// and the backward passes. Rows are grouped by local expert (expert-major; within an expert by
// source rank, token, slot), padded per ExpertAlignment. The slices are copies; the received
// tokens are read with MoeReceivedTokens. Close frees it.
type MoeHandle struct {
	h              C.weft_moe_handle_t
	tokensData     unsafe.Pointer // C memory owned by the handle: [Rows, hidden] of dtype
	dtype          Dtype
	hidden         int
	Tokens, TopK   int     // T and k of the dispatch (this rank's)
	Rows           int     // rows received, padding included
	LocalExperts   []int32 // the experts this rank holds, in index order
	Counts         []int64 // rows per local expert (before padding)
	Offsets        []int64 // first row of each local expert, then Rows
	RowExpert      []int32 // per row its global expert (-1 on padding)
	RowWeight      []float32
	RowSourceRank  []int32
	RowSourceToken []int64
}

func copyC[T Element](p unsafe.Pointer, n int) []T {
	if p == nil || n <= 0 {
		return []T{}
	}
	return append([]T(nil), unsafe.Slice((*T)(p), n)...)
}

// MoeDispatch is weft_moe_dispatch, collective: x [T, H], indices and weights [T, topk] (T may
// be 0 and differ between ranks).
func MoeDispatch[T Element](m *Moe, x []T, indices []int32, weights []float32, topk int) (*MoeHandle, error) {
	if err := m.open(DtypeOf[T](), "x"); err != nil {
		return nil, err
	}
	if topk <= 0 || len(indices)%topk != 0 || checkInt(topk, "topk") != nil {
		return nil, newError(StatusInvalidArgument, "dispatch: indices hold %d values, expected [T, topk = %d]", len(indices), topk)
	}
	tokens := len(indices) / topk
	if len(weights) != len(indices) || len(x) != tokens*m.hidden {
		return nil, newError(StatusInvalidArgument, "dispatch: x holds %d values and weights %d, expected [T, H] = %d and [T, topk] = %d",
			len(x), len(weights), tokens*m.hidden, len(indices))
	}
	s := &staging{}
	defer s.free()
	xt := hostTensor2(s, cArray(s, x), m.dtype, tokens, m.hidden)
	ci, cw := (*C.int32_t)(cArray(s, indices)), (*C.float)(cArray(s, weights))
	var h C.weft_moe_handle_t
	err := call(func() C.weft_status_t {
		return C.weft_moe_dispatch(m.h, xt, ci, cw, C.size_t(tokens), C.int(topk), nil, &h)
	})
	if err != nil {
		return nil, err
	}
	rv := (*C.weft_moe_received_t)(s.alloc(C.sizeof_weft_moe_received_t))
	*rv = C.weft_moe_received_t{}
	rv.struct_size = C.sizeof_weft_moe_received_t
	if err := call(func() C.weft_status_t { return C.weft_moe_handle_received(h, rv) }); err != nil {
		_ = call(func() C.weft_status_t { return C.weft_moe_handle_destroy(h) })
		return nil, err
	}
	rows, l := int(rv.rows), int(rv.local_experts)
	return &MoeHandle{
		h: h, tokensData: unsafe.Add(rv.tokens.data, int(rv.tokens.byte_offset)), dtype: m.dtype, hidden: m.hidden,
		Tokens: tokens, TopK: topk, Rows: rows,
		LocalExperts:   copyC[int32](unsafe.Pointer(rv.experts), l),
		Counts:         copyC[int64](unsafe.Pointer(rv.counts), l),
		Offsets:        copyC[int64](unsafe.Pointer(rv.offsets), l+1),
		RowExpert:      copyC[int32](unsafe.Pointer(rv.row_expert), rows),
		RowWeight:      copyC[float32](unsafe.Pointer(rv.row_weight), rows),
		RowSourceRank:  copyC[int32](unsafe.Pointer(rv.row_source_rank), rows),
		RowSourceToken: copyC[int64](unsafe.Pointer(rv.row_source_token), rows),
	}, nil
}

// MoeReceivedTokens is a copy of the received rows [Rows, H] (padding rows are zeros).
func MoeReceivedTokens[T Element](h *MoeHandle) ([]T, error) {
	if h == nil || h.h == nil {
		return nil, newError(StatusInvalidArgument, "the MoeHandle is closed")
	}
	if DtypeOf[T]() != h.dtype {
		return nil, newError(StatusInvalidArgument, "received tokens have dtype %d, asked for %d", h.dtype, DtypeOf[T]())
	}
	return copyC[T](h.tokensData, h.Rows*h.hidden), nil
}

// Close is weft_moe_handle_destroy (a second Close does nothing).
func (h *MoeHandle) Close() error {
	if h == nil || h.h == nil {
		return nil
	}
	hh := h.h
	h.h, h.tokensData = nil, nil
	return call(func() C.weft_status_t { return C.weft_moe_handle_destroy(hh) })
}

func (h *MoeHandle) String() string {
	return fmt.Sprintf("weft.MoeHandle(%d tokens sent, %d rows received)", h.Tokens, h.Rows)
}

func (m *Moe) checkHandle(h *MoeHandle) error {
	if h == nil || h.h == nil {
		return newError(StatusInvalidArgument, "the MoeHandle is closed")
	}
	return nil
}

// MoeCombine is weft_moe_combine, collective: expertOut [Rows, H] in the received layout; out
// [T, H] becomes per token the sum over its kept slots (weighted by the routing weights, or
// not: the backward of dispatch).
func MoeCombine[T Element](m *Moe, h *MoeHandle, expertOut []T, weighted bool, out []T) error {
	if err := m.open(DtypeOf[T](), "expertOut"); err != nil {
		return err
	}
	if err := m.checkHandle(h); err != nil {
		return err
	}
	if len(expertOut) != h.Rows*m.hidden || len(out) != h.Tokens*m.hidden {
		return newError(StatusInvalidArgument, "combine: expertOut holds %d values and out %d, expected [rows, H] = %d and [T, H] = %d",
			len(expertOut), len(out), h.Rows*m.hidden, h.Tokens*m.hidden)
	}
	s := &staging{}
	defer s.free()
	et := hostTensor2(s, cArray(s, expertOut), m.dtype, h.Rows, m.hidden)
	op := cZeros[T](s, len(out))
	ot := hostTensor2(s, op, m.dtype, h.Tokens, m.hidden)
	err := call(func() C.weft_status_t { return C.weft_moe_combine(m.h, h.h, et, cBool(weighted), ot, nil) })
	if err == nil {
		copy(out, unsafe.Slice((*T)(op), len(out)))
	}
	return err
}

// MoeCombineBackward is weft_moe_combine_backward, collective: from gradOut [T, H] writes
// gradExpertOut [Rows, H] and gradWeights [T, topk].
func MoeCombineBackward[T Element](m *Moe, h *MoeHandle, gradOut, gradExpertOut []T, gradWeights []float32) error {
	if err := m.open(DtypeOf[T](), "gradOut"); err != nil {
		return err
	}
	if err := m.checkHandle(h); err != nil {
		return err
	}
	if len(gradOut) != h.Tokens*m.hidden || len(gradExpertOut) != h.Rows*m.hidden || len(gradWeights) != h.Tokens*h.TopK {
		return newError(StatusInvalidArgument,
			"combine backward: gradOut, gradExpertOut, gradWeights hold %d, %d, %d values, expected [T, H] = %d, [rows, H] = %d, [T, topk] = %d",
			len(gradOut), len(gradExpertOut), len(gradWeights), h.Tokens*m.hidden, h.Rows*m.hidden, h.Tokens*h.TopK)
	}
	s := &staging{}
	defer s.free()
	gt := hostTensor2(s, cArray(s, gradOut), m.dtype, h.Tokens, m.hidden)
	ep := cZeros[T](s, len(gradExpertOut))
	et := hostTensor2(s, ep, m.dtype, h.Rows, m.hidden)
	wp := cZeros[float32](s, len(gradWeights))
	err := call(func() C.weft_status_t {
		return C.weft_moe_combine_backward(m.h, h.h, gt, et, (*C.float)(wp), nil)
	})
	if err == nil {
		copy(gradExpertOut, unsafe.Slice((*T)(ep), len(gradExpertOut)))
		copy(gradWeights, unsafe.Slice((*float32)(wp), len(gradWeights)))
	}
	return err
}
