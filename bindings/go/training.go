package weft

/*
#include <stdlib.h>
#include <weft/weft.h>
*/
import "C"

import (
	"strings"
	"unsafe"
)

// Training parallelism (weft/training.h): the pieces its families share (WireFormat, HostTensor,
// HostBuffer) and the communication of tensor, sequence and context parallelism (RegionApply,
// RingShift). The gradient bucketer is in bucketer.go, ZeRO in zero.go.
//
// cgo rules: a HostTensor is Go memory handed to weft for one call, so it is copied through C
// memory (in before the call, out when it completes: for the ...Async forms at Request.Wait).
// Memory weft keeps between calls (a Bucketer's gradients) is C memory: a HostMemory.

// WireFormat is how gradients travel between ranks (weft_wire_format_t); training.h states the
// error a compressed wire adds.
type WireFormat int

const (
	WireNative  WireFormat = C.WEFT_WIRE_NATIVE   // in their own dtype
	WireBF16    WireFormat = C.WEFT_WIRE_BF16     // bfloat16, summed in float32 (float32 gradients only)
	WireFP8E4M3 WireFormat = C.WEFT_WIRE_FP8_E4M3 // FP8 E4M3 with a float32 scale per WireFP8Block elements
)

// WireFP8Block is the number of elements per scale of the FP8 wire.
const WireFP8Block = C.WEFT_WIRE_FP8_BLOCK

// HostTensor is a contiguous row-major host tensor in Go memory, for calls that read or write
// it only while they run (ZeRO parameters and gradients, region and ring operands). Make it with
// Tensor.
type HostTensor struct {
	dtype Dtype
	shape []int
	n     int
	base  unsafe.Pointer // the slice's first element (identity only; never given to C)
	in    func(s *staging) unsafe.Pointer
	inOut func(s *staging) unsafe.Pointer
	err   error
}

// Tensor describes data as a tensor of shape (row-major; no shape: 1-d of len(data)). A shape
// whose product is not len(data) is reported by the call that uses the tensor.
func Tensor[T Element](data []T, shape ...int) HostTensor {
	if len(shape) == 0 {
		shape = []int{len(data)}
	}
	t := HostTensor{dtype: DtypeOf[T](), shape: append([]int(nil), shape...), n: len(data), base: ptr(data),
		in:    func(s *staging) unsafe.Pointer { return stageIn(s, data) },
		inOut: func(s *staging) unsafe.Pointer { return stageInOut(s, data) }}
	for _, x := range shape {
		if x < 0 {
			t.err = newError(StatusInvalidArgument, "tensor shape %v has a negative extent", shape)
		}
	}
	if t.err == nil && product(shape) != len(data) {
		t.err = newError(StatusInvalidArgument, "tensor shape %v has %d elements but the slice %d", shape, product(shape), len(data))
	}
	return t
}

// Dtype is the element type's weft dtype.
func (t HostTensor) Dtype() Dtype { return t.dtype }

// Shape is the tensor's shape.
func (t HostTensor) Shape() []int { return append([]int(nil), t.shape...) }

// stageTensor fills a weft_tensor_t and its shape in C memory (strides NULL: contiguous).
func stageTensor(s *staging, data unsafe.Pointer, dtype Dtype, shape []int) (*C.weft_tensor_t, error) {
	if len(shape) > C.WEFT_TENSOR_MAX_DIMS {
		return nil, newError(StatusInvalidArgument, "shape %v has %d dims; weft takes at most %d", shape, len(shape), C.WEFT_TENSOR_MAX_DIMS)
	}
	var z C.weft_tensor_t
	t := (*C.weft_tensor_t)(s.alloc(unsafe.Sizeof(z)))
	*t = z
	if len(shape) > 0 {
		arr := unsafe.Slice((*C.int64_t)(s.alloc(uintptr(len(shape))*8)), len(shape))
		for i, x := range shape {
			arr[i] = C.int64_t(x)
		}
		t.shape = &arr[0]
	}
	t.data = data
	t.device_type = C.WEFT_DEVICE_CPU
	t.ndim = C.int(len(shape))
	t.dtype = C.weft_dtype_t(dtype)
	return t, nil
}

// stage copies t into C memory (out: copied back when the staging completes) and describes it.
func (t HostTensor) stage(s *staging, out bool) (*C.weft_tensor_t, error) {
	if t.err != nil {
		return nil, t.err
	}
	if t.in == nil {
		return nil, newError(StatusInvalidArgument, "an empty HostTensor (make it with weft.Tensor)")
	}
	p := t.in(s)
	if out {
		p = t.inOut(s)
	}
	return stageTensor(s, p, t.dtype, t.shape)
}

// cStrings copies names into C memory (nil for none), checking there is one per item.
func cStrings(s *staging, names []string, count int, what string) (**C.char, error) {
	if names == nil {
		return nil, nil
	}
	if len(names) != count {
		return nil, newError(StatusInvalidArgument, "%d %s names for %d %ss", len(names), what, count, what)
	}
	if count == 0 {
		return nil, nil
	}
	arr := unsafe.Slice((**C.char)(s.alloc(uintptr(count)*unsafe.Sizeof((*C.char)(nil)))), count)
	for i, n := range names {
		if strings.IndexByte(n, 0) >= 0 {
			return nil, newError(StatusInvalidArgument, "%s name %q contains a NUL byte", what, n)
		}
		cs := C.CString(n)
		s.mem = append(s.mem, unsafe.Pointer(cs))
		arr[i] = cs
	}
	return &arr[0], nil
}

func cString(s *staging, v, what string) (*C.char, error) {
	if strings.IndexByte(v, 0) >= 0 {
		return nil, newError(StatusInvalidArgument, "%s %q contains a NUL byte", what, v)
	}
	cs := C.CString(v)
	s.mem = append(s.mem, unsafe.Pointer(cs))
	return cs, nil
}

// startStaged starts an operation whose memory is staged in s; s is freed if it is refused.
func startStaged(s *staging, f func(req *C.weft_request_t) C.weft_status_t) (*Request, error) {
	var h C.weft_request_t
	if err := call(func() C.weft_status_t { return f(&h) }); err != nil {
		s.free()
		return nil, err
	}
	return &Request{h: h, st: s}, nil
}

// Region is one of Megatron's region operations (weft_region_t); each has a forward and a
// backward:
//
//	RegionCopy              forward identity               backward all-reduce (sum)
//	RegionReduce            forward all-reduce (sum)       backward identity
//	RegionScatter           forward keep this rank's chunk backward all-gather
//	RegionGather            forward all-gather             backward keep this rank's chunk
//	RegionSeqGather         forward all-gather             backward reduce-scatter (sum)
//	RegionSeqReduceScatter  forward reduce-scatter (sum)   backward all-gather
//
// Chunks are along tensor dim splitDim and follow torch.chunk's rule over the mesh dim's size
// (chunk = ceil(n / size); the last ones may be short or empty).
type Region int

const (
	RegionCopy             Region = C.WEFT_REGION_COPY
	RegionReduce           Region = C.WEFT_REGION_REDUCE
	RegionScatter          Region = C.WEFT_REGION_SCATTER
	RegionGather           Region = C.WEFT_REGION_GATHER
	RegionSeqGather        Region = C.WEFT_REGION_SEQ_GATHER
	RegionSeqReduceScatter Region = C.WEFT_REGION_SEQ_REDUCE_SCATTER
)

// regionStage checks the arguments and stages in and out in C memory (one staged copy when they
// are the same slice, so weft sees in == out: the identity and all-reduce cases accept it).
func regionStage(m *Mesh, dim string, splitDim int, in, out HostTensor) (*staging, *C.char, *C.weft_tensor_t, *C.weft_tensor_t, error) {
	if err := m.open(); err != nil {
		return nil, nil, nil, nil, err
	}
	if err := checkInt(splitDim, "splitDim"); err != nil {
		return nil, nil, nil, nil, err
	}
	s := &staging{}
	cdim, err := cString(s, dim, "mesh dim name")
	var cin, cout *C.weft_tensor_t
	if err == nil {
		if in.base != nil && in.base == out.base && in.n == out.n && in.dtype == out.dtype {
			if cin, err = out.stage(s, true); err == nil {
				cout, err = stageTensor(s, cin.data, out.dtype, out.shape)
			}
		} else if cin, err = in.stage(s, false); err == nil {
			cout, err = out.stage(s, true)
		}
	}
	if err != nil {
		s.free()
		return nil, nil, nil, nil, err
	}
	return s, cdim, cin, cout, nil
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// RegionApply calls weft_region_apply: runs region's forward (backward false) or backward over
// this rank's group along mesh dim dim, reading in and writing out (weft.Tensor(slice,
// shape...)). Their shapes must be what the operation makes: the whole extent or this rank's
// chunk along tensor dim splitDim, the other dims equal (splitDim is ignored by the identity
// and all-reduce cases, which also accept the same slice as in and out). Collective over the
// dim's group; members of m only.
func RegionApply(m *Mesh, dim string, region Region, backward bool, splitDim int, in, out HostTensor) error {
	s, cdim, cin, cout, err := regionStage(m, dim, splitDim, in, out)
	if err != nil {
		return err
	}
	defer s.free()
	if err := call(func() C.weft_status_t {
		return C.weft_region_apply(m.h, cdim, C.weft_region_t(region), cBool(backward), C.int(splitDim), cin, cout, nil, nil)
	}); err != nil {
		return err
	}
	for _, b := range s.back {
		b()
	}
	return nil
}

// RegionApplyAsync starts RegionApply and returns its *Request; out's slice holds the result
// once Wait returns.
func RegionApplyAsync(m *Mesh, dim string, region Region, backward bool, splitDim int, in, out HostTensor) (*Request, error) {
	s, cdim, cin, cout, err := regionStage(m, dim, splitDim, in, out)
	if err != nil {
		return nil, err
	}
	return startStaged(s, func(r *C.weft_request_t) C.weft_status_t {
		return C.weft_region_apply(m.h, cdim, C.weft_region_t(region), cBool(backward), C.int(splitDim), cin, cout, nil, r)
	})
}

func ringStage[T Element](m *Mesh, dim string, shift int, send, recv []T) (*staging, *C.char, *C.weft_tensor_t, *C.weft_tensor_t, error) {
	if err := m.open(); err != nil {
		return nil, nil, nil, nil, err
	}
	if err := checkInt(shift, "shift"); err != nil {
		return nil, nil, nil, nil, err
	}
	s := &staging{}
	cdim, err := cString(s, dim, "mesh dim name")
	var cs, cr *C.weft_tensor_t
	if err == nil {
		cs, err = stageTensor(s, stageIn(s, send), DtypeOf[T](), []int{len(send)})
	}
	if err == nil {
		cr, err = stageTensor(s, stageOut(s, recv), DtypeOf[T](), []int{len(recv)})
	}
	if err != nil {
		s.free()
		return nil, nil, nil, nil, err
	}
	return s, cdim, cs, cr, nil
}

// RingShift calls weft_ring_shift: one step of a ring over mesh dim dim (context parallelism's
// key/value rotation): sends send to the rank shift places further along the dim (wrapping) and
// receives recv from the rank shift places before, as one point-to-point batch. recv must be as
// long as what that rank sends.
func RingShift[T Element](m *Mesh, dim string, shift int, send, recv []T) error {
	s, cdim, cs, cr, err := ringStage(m, dim, shift, send, recv)
	if err != nil {
		return err
	}
	defer s.free()
	if err := call(func() C.weft_status_t { return C.weft_ring_shift(m.h, cdim, C.int(shift), cs, cr, nil, nil) }); err != nil {
		return err
	}
	for _, b := range s.back {
		b()
	}
	return nil
}

// RingShiftAsync starts RingShift (ring attention's overlap: compute on the current block while
// the next one travels); recv holds the result once Wait returns.
func RingShiftAsync[T Element](m *Mesh, dim string, shift int, send, recv []T) (*Request, error) {
	s, cdim, cs, cr, err := ringStage(m, dim, shift, send, recv)
	if err != nil {
		return nil, err
	}
	return startStaged(s, func(r *C.weft_request_t) C.weft_status_t {
		return C.weft_ring_shift(m.h, cdim, C.int(shift), cs, cr, nil, r)
	})
}
