package weft

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// solo makes a one-rank communicator from a fresh unique id.
func solo(t *testing.T) *Comm {
	t.Helper()
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Init(id, 0, 1, &Config{Timeout: 20 * time.Second, Name: "solo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func TestVersion(t *testing.T) {
	code, abi, err := Version()
	if err != nil || abi != ABIVersion || code != VersionMajor*10000+VersionMinor*100+VersionPatch {
		t.Fatalf("Version() = %d, %d, %v", code, abi, err)
	}
}

func TestDtypes(t *testing.T) {
	check := func(d, want Dtype, size int) {
		t.Helper()
		if d != want {
			t.Errorf("dtype %d, want %d", d, want)
		}
		if n, err := DtypeSize(d); err != nil || n != size {
			t.Errorf("DtypeSize(%d) = %d, %v; want %d", d, n, err, size)
		}
	}
	check(DtypeOf[float64](), DtypeFloat64, 8)
	check(DtypeOf[float32](), DtypeFloat32, 4)
	check(DtypeOf[Float16](), DtypeFloat16, 2)
	check(DtypeOf[BFloat16](), DtypeBFloat16, 2)
	check(DtypeOf[int8](), DtypeInt8, 1)
	check(DtypeOf[uint8](), DtypeUint8, 1)
	check(DtypeOf[int32](), DtypeInt32, 4)
	check(DtypeOf[uint32](), DtypeUint32, 4)
	check(DtypeOf[int64](), DtypeInt64, 8)
	check(DtypeOf[uint64](), DtypeUint64, 8)
	type meters float64
	check(DtypeOf[meters](), DtypeFloat64, 8)
	if _, err := DtypeSize(Dtype(NumDtypes)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("DtypeSize(NumDtypes): %v", err)
	}
}

func TestFloat16(t *testing.T) {
	for b := 0; b <= 0xffff; b++ {
		h := Float16(b)
		back := Float16From(h.Float32())
		if h.IsNaN() {
			if !back.IsNaN() {
				t.Fatalf("%#04x: NaN lost", b)
			}
		} else if back != h {
			t.Fatalf("%#04x round trip gave %#04x", b, uint16(back))
		}
	}
	cases := []struct {
		f    float32
		want Float16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65519, 0x7bff}, {65520, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00}, {1 + 1.0/2048, 0x3c00}, {1 + 3.0/2048, 0x3c02},
		{float32(math.Ldexp(1, -24)), 1}, {float32(math.Ldexp(1, -25)), 0},
		{float32(math.Ldexp(3, -25)), 2}, {float32(math.Ldexp(1, -14)), 0x400}, {1e-30, 0},
	}
	for _, c := range cases {
		if got := Float16From(c.f); got != c.want {
			t.Errorf("Float16From(%g) = %#04x, want %#04x", c.f, uint16(got), uint16(c.want))
		}
	}
	if !Float16From(float32(math.NaN())).IsNaN() {
		t.Error("NaN")
	}
}

func TestBFloat16(t *testing.T) {
	for b := 0; b <= 0xffff; b++ {
		h := BFloat16(b)
		if !h.IsNaN() && BFloat16From(h.Float32()) != h {
			t.Fatalf("%#04x round trip", b)
		}
	}
	if BFloat16From(1+1.0/256) != 0x3f80 || BFloat16From(1+3.0/256) != 0x3f82 || BFloat16From(3).Float32() != 3 {
		t.Error("rounding")
	}
	if BFloat16From(math.MaxFloat32) != 0x7f80 || !BFloat16From(float32(math.NaN())).IsNaN() {
		t.Error("overflow / NaN")
	}
}

func TestErrors(t *testing.T) {
	id, err := NewUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Init(id, 3, 2, nil)
	var we *Error
	if !errors.As(err, &we) || we.Status != StatusInvalidArgument {
		t.Fatalf("Init(rank 3 of 2): %v", err)
	}
	if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrTimeout) {
		t.Errorf("errors.Is: %v", err)
	}
	if !strings.Contains(we.Message, "weft_comm_init") || !strings.Contains(err.Error(), "WEFT_ERR_INVALID_ARGUMENT") {
		t.Errorf("message: %q", err.Error())
	}
	if !strings.HasPrefix(StatusTimeout.String(), "WEFT_ERR_TIMEOUT") || !strings.Contains(Status(1234).String(), "UNKNOWN") {
		t.Error("status strings")
	}
	if _, err := Init(id, 0, 1, &Config{Name: "a\x00b"}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NUL in name: %v", err)
	}
	if _, err := Init(id, 0, 1, &Config{Timeout: -time.Second}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative timeout: %v", err)
	}
}

func TestOneRank(t *testing.T) {
	c := solo(t)
	if c.Rank() != 0 || c.Size() != 1 || c.LocalRank() != 0 || c.LocalSize() != 1 {
		t.Fatalf("%v local %d/%d", c, c.LocalRank(), c.LocalSize())
	}
	send := []float64{1.5, -2, 3.25}
	recv := make([]float64, 3)
	must(t, Allreduce(c, send, recv, OpSum))
	eq(t, recv, send)
	h := []Float16{Float16From(1.5), Float16From(-0.25)}
	must(t, AllreduceInPlace(c, h, OpMax))
	eq(t, h, []Float16{Float16From(1.5), Float16From(-0.25)})
	ints := []int64{7, -9}
	must(t, Broadcast(c, ints, 0))
	must(t, ReduceInPlace(c, ints, OpProd, 0))
	eq(t, ints, []int64{7, -9})
	out := make([]uint8, 2)
	must(t, Allgather(c, []uint8{4, 5}, out))
	eq(t, out, []uint8{4, 5})
	must(t, Alltoall(c, []uint8{9, 8}, out))
	eq(t, out, []uint8{9, 8})
	bf := make([]BFloat16, 2)
	must(t, ReduceScatter(c, []BFloat16{BFloat16From(1), BFloat16From(2)}, bf, OpSum))
	eq(t, bf, []BFloat16{BFloat16From(1), BFloat16From(2)})
	must(t, c.Barrier())
	must(t, Allreduce[uint32](c, nil, nil, OpSum))
	must(t, AllgatherInPlace[int8](c, nil))
}

func TestLengthChecks(t *testing.T) {
	c := solo(t)
	two := make([]float32, 2)
	for name, err := range map[string]error{
		"allreduce": Allreduce(c, make([]float32, 3), two, OpSum),
		"broadcast": Broadcast(c, two, 1),
		"allgather": Allgather(c, make([]float32, 3), two),
		"reduce":    Reduce(c, two, nil, OpSum, 0),
		"gather":    Gather(c, two, nil, 0),
		"scatter":   Scatter(c, nil, two, 0),
		"send":      Send(c, []uint8{1}, 1),
		"allgv#":    Allgatherv(c, two, two, []int{2, 0}, []int{0}),
		"allgv>":    Allgatherv(c, two, two, []int{2}, []int{1}),
		"allgv-":    Allgatherv(c, two, two, []int{-1}, []int{0}),
		"allgv!=":   Allgatherv(c, two[:1], two, []int{2}, []int{0}),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := AllreduceAsync(c, make([]float32, 3), two, OpSum); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("async: %v", err)
	}
}

func TestAsyncOneRank(t *testing.T) {
	c := solo(t)
	send := []uint32{1, 2, 3}
	recv := make([]uint32, 3)
	r1, err := AllreduceAsync(c, send, recv, OpSum)
	must(t, err)
	buf := []int32{5, 5, 5, 5}
	r2, err := AllreduceAsync(c, buf, buf, OpMin)
	must(t, err)
	send[0] = 100 // the operation works on its own copy
	for {
		done, err := r1.Test()
		must(t, err)
		if done {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	must(t, r1.Wait()) // again: same result
	must(t, r2.Wait())
	eq(t, recv, []uint32{1, 2, 3})
	eq(t, buf, []int32{5, 5, 5, 5})
	rb, err := c.BarrierAsync()
	must(t, err)
	must(t, WaitAll(rb, nil))
}

func TestSplitDupAbortClose(t *testing.T) {
	c := solo(t)
	none, err := c.Split(SplitNoColor, 0, nil)
	if none != nil || err != nil {
		t.Fatalf("nocolor: %v %v", none, err)
	}
	sub, err := c.Split(3, 0, nil)
	must(t, err)
	if sub.Size() != 1 {
		t.Fatal(sub)
	}
	dup, err := c.Dup()
	must(t, err)
	must(t, dup.Barrier())
	done := make(chan error)
	go func() { done <- dup.Abort() }()
	must(t, <-done)
	if err := dup.Barrier(); !errors.Is(err, ErrAborted) {
		t.Fatalf("after abort: %v", err)
	}
	must(t, dup.Close())
	must(t, dup.Close()) // twice is fine
	if err := dup.Barrier(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("closed: %v", err)
	}
	must(t, sub.Close())
	must(t, c.Barrier())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func eq[T comparable](t *testing.T, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
