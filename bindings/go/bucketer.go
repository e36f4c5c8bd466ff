package weft

/*
#include <stdlib.h>
#include <weft/weft.h>
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// The gradient bucketer (weft/training.h): data-parallel gradient reduction in buckets that
// start while backward goes on, as DDP does. weft keeps the gradients' addresses between calls,
// so they live in C memory: each gradient is a HostMemory (any element type), written by the
// caller through its Slice().

// HostBuffer is C memory weft may keep using between calls: any *HostMemory[T].
type HostBuffer interface {
	Len() int
	hostPtr() unsafe.Pointer
	hostDtype() Dtype
}

func (m *HostMemory[T]) hostPtr() unsafe.Pointer { return m.p }
func (m *HostMemory[T]) hostDtype() Dtype        { return DtypeOf[T]() }

// Gradient is one gradient registered with a Bucketer: its memory and shape (nil: 1-d of
// Mem.Len() elements).
type Gradient struct {
	Mem   HostBuffer
	Shape []int
}

// BucketReduction is what a bucket's reduction leaves where (weft_bucket_reduction_t).
type BucketReduction int

const (
	// BucketAllreduce: every rank gets the whole reduced gradient, written into the gradients.
	BucketAllreduce BucketReduction = C.WEFT_BUCKET_ALLREDUCE
	// BucketReduceScatter: each rank gets one chunk of each bucket (BucketShard), ZeRO-style.
	BucketReduceScatter BucketReduction = C.WEFT_BUCKET_REDUCE_SCATTER
)

// BucketerConfig holds bucketer options (weft_bucketer_config_t). Start from
// DefaultBucketerConfig() (WEFT_BUCKETER_CONFIG_INIT); a nil config means the defaults.
type BucketerConfig struct {
	// A bucket is closed when the next gradient would make it larger (0 = 25 MiB); a new one
	// also starts where the dtype changes.
	BucketBytes int
	// Each gradient's bucket (0, 1, ... without gaps) instead of BucketBytes; nil: by size.
	BucketOf []int
	// OpSum or OpAvg (the mean over the communicator's ranks; the default).
	Op        Op
	Wire      WireFormat
	Reduction BucketReduction
	// One name per gradient for error messages (nil: "grad[i]").
	Names []string
	// Compressed wires only: keep what the encoding lost and add it to the next step's gradients.
	ErrorFeedback bool
}

// DefaultBucketerConfig is WEFT_BUCKETER_CONFIG_INIT: 25 MiB buckets, OpAvg, the native wire,
// all-reduce.
func DefaultBucketerConfig() BucketerConfig {
	return BucketerConfig{Op: OpAvg, Wire: WireNative, Reduction: BucketAllreduce}
}

// BucketerStats is weft_bucketer_stats_t.
type BucketerStats struct {
	Steps        uint64        // Finish calls so far
	WireBytes    uint64        // last step: bytes this rank's reductions moved (all-reduce of n counts 2n)
	Exposed      time.Duration // last step: time Finish waited for communication
	LaunchedLate uint64        // last step: buckets ready before an earlier bucket
}

// Bucketer is a gradient bucketer (weft_bucketer_t). Close it when done (not collective); it is
// not closed by the garbage collector. Used by one goroutine at a time.
//
// One step: write each gradient (its HostMemory's Slice()), MarkReady it as backward produces it
// (buckets start reducing as they fill), then Finish. A marked gradient must not be written
// until Finish returns: weft may still read it.
type Bucketer struct {
	h     C.weft_bucketer_t
	grads []Gradient
}

// NewBucketer calls weft_bucketer_create, collective over c: registers grads (floating point,
// in the order backward produces them). Every rank must register the same shapes and dtypes.
// The memory must stay allocated until Close.
func NewBucketer(c *Comm, grads []Gradient, cfg *BucketerConfig) (*Bucketer, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if cfg == nil {
		d := DefaultBucketerConfig()
		cfg = &d
	}
	s := &staging{}
	defer s.free()
	n := len(grads)
	views := (*C.weft_tensor_t)(nil)
	if n > 0 {
		var z C.weft_tensor_t
		arr := unsafe.Slice((*C.weft_tensor_t)(s.alloc(uintptr(n)*unsafe.Sizeof(z))), n)
		for i, g := range grads {
			if g.Mem == nil {
				return nil, newError(StatusInvalidArgument, "gradient %d has no memory", i)
			}
			shape := g.Shape
			if shape == nil {
				shape = []int{g.Mem.Len()}
			}
			if product(shape) != g.Mem.Len() {
				return nil, newError(StatusInvalidArgument, "gradient %d: shape %v has %d elements but its memory %d", i, shape, product(shape), g.Mem.Len())
			}
			t, err := stageTensor(s, g.Mem.hostPtr(), g.Mem.hostDtype(), shape)
			if err != nil {
				return nil, err
			}
			arr[i] = *t
		}
		views = &arr[0]
	}
	var cc C.weft_bucketer_config_t
	cc.struct_size = C.size_t(unsafe.Sizeof(cc))
	cc.bucket_bytes = C.size_t(cfg.BucketBytes)
	cc.op = C.weft_op_t(cfg.Op)
	cc.wire = C.weft_wire_format_t(cfg.Wire)
	cc.reduction = C.weft_bucket_reduction_t(cfg.Reduction)
	cc.error_feedback = cBool(cfg.ErrorFeedback)
	if cfg.BucketBytes < 0 {
		return nil, newError(StatusInvalidArgument, "BucketBytes = %d; expected >= 0", cfg.BucketBytes)
	}
	if cfg.BucketOf != nil {
		if len(cfg.BucketOf) != n {
			return nil, newError(StatusInvalidArgument, "BucketOf has %d entries for %d gradients", len(cfg.BucketOf), n)
		}
		if n > 0 {
			cc.bucket_of = stageCounts(s, cfg.BucketOf)
		}
	}
	names, err := cStrings(s, cfg.Names, n, "gradient")
	if err != nil {
		return nil, err
	}
	cc.names = names
	var h C.weft_bucketer_t
	if err := call(func() C.weft_status_t { return C.weft_bucketer_create(c.h, views, C.size_t(n), &cc, &h) }); err != nil {
		return nil, err
	}
	return &Bucketer{h: h, grads: append([]Gradient(nil), grads...)}, nil
}

func (b *Bucketer) open() error {
	if b == nil || b.h == nil {
		return newError(StatusInvalidArgument, "the bucketer is closed")
	}
	return nil
}

func (b *Bucketer) grad(i int) (Gradient, error) {
	if err := b.open(); err != nil {
		return Gradient{}, err
	}
	if i < 0 || i >= len(b.grads) {
		return Gradient{}, newError(StatusInvalidArgument, "gradient %d: the bucketer has %d", i, len(b.grads))
	}
	return b.grads[i], nil
}

// Len is the number of registered gradients.
func (b *Bucketer) Len() int { return len(b.grads) }

// NumBuckets calls weft_bucketer_num_buckets.
func (b *Bucketer) NumBuckets() (int, error) {
	if err := b.open(); err != nil {
		return 0, err
	}
	var n C.size_t
	err := call(func() C.weft_status_t { return C.weft_bucketer_num_buckets(b.h, &n) })
	return int(n), err
}

// BucketOf calls weft_bucketer_bucket_of: gradient i's bucket and the element offset where it
// starts in that bucket.
func (b *Bucketer) BucketOf(i int) (bucket, offset int, err error) {
	if _, err := b.grad(i); err != nil {
		return 0, 0, err
	}
	var bk, off C.size_t
	err = call(func() C.weft_status_t { return C.weft_bucketer_bucket_of(b.h, C.size_t(i), &bk, &off) })
	return int(bk), int(off), err
}

// MarkReady calls weft_bucketer_mark_ready: gradient i holds its final value for this step.
// Buckets it completes start reducing (in bucket order) before the call returns. Marking a
// gradient twice in a step is an error naming it.
func (b *Bucketer) MarkReady(i int) error {
	g, err := b.grad(i)
	if err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_bucketer_mark_ready(b.h, C.size_t(i), g.Mem.hostPtr(), nil) })
}

// Finish calls weft_bucketer_finish: waits for every bucket's reduction and writes the results
// (all-reduce: into the gradients; reduce-scatter: into BucketShard's chunks), then resets for
// the next step. A gradient never marked is an error naming it (the step stays open).
func (b *Bucketer) Finish() error {
	if err := b.open(); err != nil {
		return err
	}
	return call(func() C.weft_status_t { return C.weft_bucketer_finish(b.h, nil) })
}

// BucketShard calls weft_bucketer_shard (reduce-scatter mode, after Finish): this rank's
// reduced chunk of bucket (a view of weft's memory, valid until the next Finish or Close) and
// the element offset in the bucket where it starts; T must be the bucket's element type.
func BucketShard[T Element](b *Bucketer, bucket int) (offset int, shard []T, err error) {
	if err := b.open(); err != nil {
		return 0, nil, err
	}
	var t C.weft_tensor_t
	var off C.size_t
	if err := call(func() C.weft_status_t { return C.weft_bucketer_shard(b.h, C.size_t(bucket), &t, &off) }); err != nil {
		return 0, nil, err
	}
	if Dtype(t.dtype) != DtypeOf[T]() {
		return 0, nil, newError(StatusInvalidArgument, "bucket %d holds dtype %d, not %d", bucket, int(t.dtype), int(DtypeOf[T]()))
	}
	n := 0
	if t.ndim >= 1 && t.shape != nil {
		n = int(*t.shape)
	}
	if n == 0 || t.data == nil {
		return int(off), nil, nil
	}
	return int(off), cslice[T](unsafe.Add(t.data, int(t.byte_offset)), n), nil
}

// Stats calls weft_bucketer_stats.
func (b *Bucketer) Stats() (BucketerStats, error) {
	if err := b.open(); err != nil {
		return BucketerStats{}, err
	}
	var st C.weft_bucketer_stats_t
	st.struct_size = C.size_t(unsafe.Sizeof(st))
	if err := call(func() C.weft_status_t { return C.weft_bucketer_stats(b.h, &st) }); err != nil {
		return BucketerStats{}, err
	}
	return BucketerStats{Steps: uint64(st.steps), WireBytes: uint64(st.wire_bytes),
		Exposed: time.Duration(st.exposed_ns), LaunchedLate: uint64(st.launched_late)}, nil
}

// Close calls weft_bucketer_destroy (the gradients' memory stays the caller's). Closing twice,
// or a nil *Bucketer, is a no-op.
func (b *Bucketer) Close() error {
	if b == nil || b.h == nil {
		return nil
	}
	h := b.h
	b.h = nil
	return call(func() C.weft_status_t { return C.weft_bucketer_destroy(h) })
}

func (b *Bucketer) String() string {
	if b == nil || b.h == nil {
		return "weft.Bucketer(closed)"
	}
	return fmt.Sprintf("weft.Bucketer(%d gradients)", len(b.grads))
}
