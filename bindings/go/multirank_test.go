package weft

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMultiRank re-runs this test binary under `weftrun -n 3` with WEFT_GO_MULTIRANK_CHILD=1
// (and GODEBUG=cgocheck=2) and checks the job's exit status; each rank then runs every
// collective (blocking, in place and asynchronous) and compares with the expected values.
// weftrun: $WEFTRUN, else the repository's build/bin/weftrun.
func TestMultiRank(t *testing.T) {
	if os.Getenv("WEFT_GO_MULTIRANK_CHILD") != "" {
		multiRankChild(t)
		return
	}
	runUnderWeftrun(t, 3, "TestMultiRank", "WEFT_GO_MULTIRANK_CHILD")
}

// runUnderWeftrun re-runs this test binary's test `name` under `weftrun -n ranks` with
// childEnv=1 set (the test then runs its per-rank body) and fails t when any rank fails.
// weftrun: $WEFTRUN, else the repository's build/bin/weftrun.
func runUnderWeftrun(t *testing.T, ranks int, name, childEnv string) {
	weftrun := os.Getenv("WEFTRUN")
	if weftrun == "" {
		_, file, _, _ := runtime.Caller(0)
		weftrun = filepath.Join(filepath.Dir(file), "..", "..", "build", "bin", "weftrun")
	}
	if _, err := os.Stat(weftrun); err != nil {
		t.Fatalf("weftrun not found at %s (build weft, or set WEFTRUN): %v", weftrun, err)
	}
	start := time.Now()
	n := strconv.Itoa(ranks)
	cmd := exec.Command(weftrun, "-n", n, "--timeout", "120", os.Args[0], "-test.run", "^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1", "WEFT_TIMEOUT=60")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	t.Logf("weftrun -n %d finished in %.1f s", ranks, time.Since(start).Seconds())
	if err != nil {
		t.Fatalf("a rank failed (see its output above): %v", err)
	}
}

type number interface {
	float32 | float64 | int8 | uint8 | int32 | uint32 | int64 | uint64
}

func vals[T number](n int, f func(i int) int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = T(f(i))
	}
	return out
}

func halfs[T Float16 | BFloat16](n int, f func(i int) int, conv func(float32) T) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = conv(float32(f(i)))
	}
	return out
}

// sweep runs allreduce (plain and in place), broadcast and allgather for one element type;
// mk builds a slice of n elements from small integers.
func sweep[T Element](t *testing.T, c *Comm, name string, mk func(n int, f func(int) int) []T) {
	t.Helper()
	r, n, count := c.Rank(), c.Size(), 5
	send := mk(count, func(i int) int { return (r + 1) * (i + 1) })
	recv := mk(count, func(int) int { return 0 })
	check(t, name+" allreduce", Allreduce(c, send, recv, OpSum))
	same(t, name+" allreduce", recv, mk(count, func(i int) int { return n * (n + 1) / 2 * (i + 1) }))
	buf := append([]T(nil), send...)
	check(t, name+" allreduce max", AllreduceInPlace(c, buf, OpMax))
	same(t, name+" allreduce max", buf, mk(count, func(i int) int { return n * (i + 1) }))
	b := mk(count, func(i int) int { return 0 })
	if r == 1 {
		b = mk(count, func(i int) int { return 7 + i })
	}
	check(t, name+" broadcast", Broadcast(c, b, 1))
	same(t, name+" broadcast", b, mk(count, func(i int) int { return 7 + i }))
	all := mk(count*n, func(int) int { return 0 })
	check(t, name+" allgather", Allgather(c, send, all))
	same(t, name+" allgather", all, mk(count*n, func(j int) int { return (j/count + 1) * (j%count + 1) }))
}

func check(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func same[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: got %v, want %v", what, got, want)
		}
	}
}

func multiRankChild(t *testing.T) {
	c, err := InitFromEnv(nil)
	check(t, "init", err)
	rank, size := c.Rank(), c.Size()
	if size != 3 || c.LocalRank() >= c.LocalSize() {
		t.Fatalf("rank %d size %d local %d/%d", rank, size, c.LocalRank(), c.LocalSize())
	}
	next, prev := (rank+1)%size, (rank+size-1)%size

	sweep(t, c, "float32", vals[float32])
	sweep(t, c, "float64", vals[float64])
	sweep(t, c, "int8", vals[int8])
	sweep(t, c, "uint8", vals[uint8])
	sweep(t, c, "int32", vals[int32])
	sweep(t, c, "uint32", vals[uint32])
	sweep(t, c, "int64", vals[int64])
	sweep(t, c, "uint64", vals[uint64])
	sweep(t, c, "float16", func(n int, f func(int) int) []Float16 { return halfs(n, f, Float16From) })
	sweep(t, c, "bfloat16", func(n int, f func(int) int) []BFloat16 { return halfs(n, f, BFloat16From) })

	// Integer ops.
	p := []int32{int32(rank) + 2, -int32(rank) - 1}
	check(t, "prod", AllreduceInPlace(c, p, OpProd))
	same(t, "prod", p, []int32{24, -6})
	a := []int32{int32(rank)*2 + 1}
	check(t, "avg", AllreduceInPlace(c, a, OpAvg))
	same(t, "avg", a, []int32{3})
	w := []uint8{200}
	check(t, "wrap", AllreduceInPlace(c, w, OpSum))
	same(t, "wrap", w, []uint8{600 % 256})

	// Large buffer.
	big := 300007
	bs, bq := make([]float32, big), make([]float32, big)
	for i := range bs {
		bs[i] = float32(i%1000 + rank)
	}
	check(t, "big", Allreduce(c, bs, bq, OpSum))
	for i, v := range bq {
		if v != float32(3*(i%1000)+3) {
			t.Fatalf("big[%d] = %v", i, v)
		}
	}

	// Reduce.
	contrib := vals[int64](4, func(i int) int { return rank*10 + i })
	var out []int64
	if rank == 2 {
		out = make([]int64, 4)
	}
	check(t, "reduce", Reduce(c, contrib, out, OpSum, 2))
	if rank == 2 {
		same(t, "reduce", out, vals[int64](4, func(i int) int { return 30 + 3*i }))
	}
	c2 := append([]int64(nil), contrib...)
	check(t, "reduce in place", ReduceInPlace(c, c2, OpMax, 0))
	if rank == 0 {
		same(t, "reduce in place", c2, vals[int64](4, func(i int) int { return 20 + i }))
	}

	// Allgather in place; allgatherv (rank i gives i+1 elements, one-element gaps).
	ag := []int32{-1, -1, -1, -1, -1, -1}
	ag[2*rank], ag[2*rank+1] = int32(rank), int32(100+rank)
	check(t, "allgather in place", AllgatherInPlace(c, ag))
	same(t, "allgather in place", ag, []int32{0, 100, 1, 101, 2, 102})
	counts, displs := []int{1, 2, 3}, []int{0, 2, 5}
	mine := vals[uint32](rank+1, func(int) int { return rank * 10 })
	agv := vals[uint32](8, func(int) int { return 99 })
	check(t, "allgatherv", Allgatherv(c, mine, agv, counts, displs))
	wantAgv := []uint32{0, 99, 10, 10, 99, 20, 20, 20}
	same(t, "allgatherv", agv, wantAgv)
	agv2 := vals[uint32](8, func(int) int { return 99 })
	copy(agv2[displs[rank]:], mine)
	check(t, "allgatherv in place", AllgathervInPlace(c, agv2, counts, displs))
	same(t, "allgatherv in place", agv2, wantAgv)

	// Reduce-scatter.
	rsSend := vals[float64](6, func(j int) int { return (j/2 + 1) * (rank + 1) })
	rs := make([]float64, 2)
	check(t, "reduce_scatter", ReduceScatter(c, rsSend, rs, OpSum))
	same(t, "reduce_scatter", rs, []float64{float64(6 * (rank + 1)), float64(6 * (rank + 1))})
	rsIP := append([]float64(nil), rsSend...)
	check(t, "reduce_scatter in place", ReduceScatterInPlace(c, rsIP, OpSum))
	same(t, "reduce_scatter in place", rsIP[2*rank:2*rank+2], rs)

	// All-to-all(v).
	a2a := vals[int8](3, func(j int) int { return 10*rank + j })
	a2aOut := make([]int8, 3)
	check(t, "alltoall", Alltoall(c, a2a, a2aOut))
	wantA2a := vals[int8](3, func(i int) int { return 10*i + rank })
	same(t, "alltoall", a2aOut, wantA2a)
	a2aIP := append([]int8(nil), a2a...)
	check(t, "alltoall in place", AlltoallInPlace(c, a2aIP))
	same(t, "alltoall in place", a2aIP, wantA2a)
	scounts, sdispls := []int{1, 2, 3}, []int{0, 1, 3}
	var sendV []uint64
	for j := 0; j < 3; j++ {
		for k := 0; k <= j; k++ {
			sendV = append(sendV, uint64(10*rank+j))
		}
	}
	rcounts := []int{rank + 1, rank + 1, rank + 1}
	rdispls := []int{0, rank + 1, 2 * (rank + 1)}
	recvV := make([]uint64, 3*(rank+1))
	check(t, "alltoallv", Alltoallv(c, sendV, scounts, sdispls, recvV, rcounts, rdispls))
	var wantV []uint64
	for i := 0; i < 3; i++ {
		for k := 0; k <= rank; k++ {
			wantV = append(wantV, uint64(10*i+rank))
		}
	}
	same(t, "alltoallv", recvV, wantV)
	ones, seq := []int{1, 1, 1}, []int{0, 1, 2}
	ipV := vals[uint64](3, func(j int) int { return 10*rank + j })
	check(t, "alltoallv in place", AlltoallvInPlace(c, ipV, ones, seq, ones, seq))
	same(t, "alltoallv in place", ipV, vals[uint64](3, func(i int) int { return 10*i + rank }))

	// Gather / scatter at root 1.
	gSend := []float32{float32(rank), -float32(rank)}
	var gOut []float32
	if rank == 1 {
		gOut = make([]float32, 6)
	}
	check(t, "gather", Gather(c, gSend, gOut, 1))
	wantG := []float32{0, 0, 1, -1, 2, -2}
	if rank == 1 {
		same(t, "gather", gOut, wantG)
	}
	gIP := gSend
	if rank == 1 {
		gIP = []float32{0, 0, 1, -1, 0, 0}
	}
	check(t, "gather in place", GatherInPlace(c, gIP, 1))
	if rank == 1 {
		same(t, "gather in place", gIP, wantG)
	}
	table := vals[int32](6, func(i int) int { return i })
	part := make([]int32, 2)
	var tableAt []int32
	if rank == 1 {
		tableAt = table
	}
	check(t, "scatter", Scatter(c, tableAt, part, 1))
	same(t, "scatter", part, []int32{int32(2 * rank), int32(2*rank + 1)})
	sIP := make([]int32, 2)
	if rank == 1 {
		sIP = append([]int32(nil), table...)
	}
	check(t, "scatter in place", ScatterInPlace(c, sIP, 1))
	if rank == 1 {
		sIP = sIP[2:4]
	}
	same(t, "scatter in place", sIP, part)

	// Point to point around the ring.
	msg, got := []int32{int32(rank), int32(rank), int32(rank)}, make([]int32, 3)
	if rank%2 == 0 {
		check(t, "send", Send(c, msg, next))
		check(t, "recv", Recv(c, got, prev))
	} else {
		check(t, "recv", Recv(c, got, prev))
		check(t, "send", Send(c, msg, next))
	}
	same(t, "ring", got, []int32{int32(prev), int32(prev), int32(prev)})
	check(t, "barrier", c.Barrier())

	// A two-way ring in one batch (and to the rank itself), then mixed with plain Send/Recv.
	toNext, toPrev := vals[float64](500, func(i int) int { return rank*1000 + i }), []uint32{uint32(rank), 7}
	fromPrev, fromNext, self := make([]float64, 500), make([]uint32, 2), make([]int8, 3)
	check(t, "p2p batch", P2PBatch(c, []P2POp{P2PSend(toNext, next), P2PSend(toPrev, prev),
		P2PRecv(fromPrev, prev), P2PRecv(fromNext, next), P2PSend([]int8{-1, 0, 1}, rank), P2PRecv(self, rank)}))
	same(t, "p2p batch from prev", fromPrev, vals[float64](500, func(i int) int { return prev*1000 + i }))
	same(t, "p2p batch from next", fromNext, []uint32{uint32(next), 7})
	same(t, "p2p batch self", self, []int8{-1, 0, 1})
	check(t, "p2p batch empty", P2PBatch(c, nil))
	batchReq, err := P2PBatchAsync(c, []P2POp{P2PSend(msg, next)})
	check(t, "p2p batch async", err)
	check(t, "recv after batch send", Recv(c, got, prev))
	check(t, "p2p batch async wait", batchReq.Wait())
	same(t, "batch send, plain recv", got, []int32{int32(prev), int32(prev), int32(prev)})
	sr, err := SendAsync(c, msg, next)
	check(t, "send async", err)
	got2 := make([]int32, 3)
	batchReq, err = P2PBatchAsync(c, []P2POp{P2PRecv(got2, prev)})
	check(t, "p2p batch async recv", err)
	check(t, "p2p batch async recv wait", batchReq.Wait())
	check(t, "send async wait", sr.Wait())
	same(t, "plain send, batch recv", got2, []int32{int32(prev), int32(prev), int32(prev)})
	if err := P2PBatch(c, []P2POp{P2PSend(msg, size)}); err == nil || !strings.Contains(err.Error(), "ops[0].peer") {
		t.Fatalf("bad peer in a batch: %v", err)
	}

	// Asynchronous: everything in flight at once (with GC running: staging must hold), waited
	// in reverse order.
	x := vals[float32](1000, func(int) int { return rank + 1 })
	xs := make([]float32, 1000)
	y := halfs(16, func(int) int { return rank }, Float16From)
	z := make([]uint8, 4)
	if rank == 0 {
		copy(z, []uint8{1, 2, 3, 4})
	}
	ring := make([]int64, 2)
	agA, rsA, a2aA := make([]int32, 6), make([]float64, 2), make([]int8, 3)
	agvA, vA := vals[uint32](8, func(int) int { return 99 }), make([]uint64, 3*(rank+1))
	var gA, redA []float32
	if rank == 1 {
		gA = make([]float32, 6)
	}
	partA := make([]int32, 2)
	redSend := []float32{float32(rank)}
	if rank == 2 {
		redA = make([]float32, 1)
	}
	var reqs []*Request
	start := func(r *Request, err error) {
		t.Helper()
		check(t, "start", err)
		reqs = append(reqs, r)
	}
	start(AllreduceAsync(c, x, xs, OpSum))
	start(AllreduceAsync(c, y, y, OpMax))
	start(BroadcastAsync(c, z, 0))
	start(RecvAsync(c, ring, prev))
	start(SendAsync(c, []int64{int64(rank * 7), int64(rank*7 + 1)}, next))
	start(c.BarrierAsync())
	start(AllgatherAsync(c, []int32{int32(rank), int32(100 + rank)}, agA))
	start(ReduceScatterAsync(c, rsSend, rsA, OpSum))
	start(AlltoallAsync(c, a2a, a2aA))
	start(AllgathervAsync(c, mine, agvA, counts, displs))
	start(AlltoallvAsync(c, sendV, scounts, sdispls, vA, rcounts, rdispls))
	start(GatherAsync(c, gSend, gA, 1))
	start(ScatterAsync(c, tableAt, partA, 1))
	start(ReduceAsync(c, redSend, redA, OpSum, 2))
	runtime.GC()
	if xs[0] != 0 {
		t.Fatal("results must appear only after Wait")
	}
	for {
		done, err := reqs[2].Test()
		check(t, "test", err)
		if done {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	for i := len(reqs) - 1; i >= 0; i-- {
		check(t, "wait", reqs[i].Wait())
	}
	same(t, "async allreduce", xs, vals[float32](1000, func(int) int { return 6 }))
	same(t, "async allreduce f16", y, halfs(16, func(int) int { return 2 }, Float16From))
	same(t, "async broadcast", z, []uint8{1, 2, 3, 4})
	same(t, "async ring", ring, []int64{int64(prev * 7), int64(prev*7 + 1)})
	same(t, "async allgather", agA, ag)
	same(t, "async reduce_scatter", rsA, rs)
	same(t, "async alltoall", a2aA, wantA2a)
	same(t, "async allgatherv", agvA, wantAgv)
	same(t, "async alltoallv", vA, wantV)
	if rank == 1 {
		same(t, "async gather", gA, wantG)
	}
	same(t, "async scatter", partA, part)
	if rank == 2 {
		same(t, "async reduce", redA, []float32{3})
	}

	// Split into even and odd ranks; a second split leaves rank 2 out.
	sub, err := c.Split(rank%2, -rank, nil)
	check(t, "split", err)
	wantSize := 1
	if rank%2 == 0 {
		wantSize = 2
	}
	if sub.Size() != wantSize || (rank == 0 && sub.Rank() != 1) {
		t.Fatalf("split: %v", sub)
	}
	s := []int32{int32(rank)}
	check(t, "sub allreduce", AllreduceInPlace(sub, s, OpSum))
	if (rank%2 == 0 && s[0] != 2) || (rank%2 == 1 && s[0] != 1) {
		t.Fatalf("sub allreduce: %v", s)
	}
	color := 0
	if rank == 2 {
		color = SplitNoColor
	}
	none, err := c.Split(color, 0, nil)
	check(t, "split nocolor", err)
	if (none == nil) != (rank == 2) {
		t.Fatalf("split nocolor: %v", none)
	}
	check(t, "close", none.Close())
	check(t, "close sub", sub.Close())

	// A receive nobody matches times out on rank 0 (short deadline, own communicator); the
	// world communicator stays usable.
	short, err := c.Split(0, rank, &Config{Timeout: 400 * time.Millisecond, Name: "short"})
	check(t, "split with config", err)
	if rank == 0 {
		err := Recv(short, make([]uint8, 4), 1)
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("expected a timeout, got %v", err)
		}
		t.Logf("expected timeout: %v", err)
	}
	check(t, "close short", short.Close())
	d, err := c.Dup()
	check(t, "dup", err)
	check(t, "dup barrier", d.Barrier())
	check(t, "close dup", d.Close())
	check(t, "final barrier", c.Barrier())
	check(t, "close world", c.Close())
	t.Logf("rank %d: all Go binding checks passed", rank)
}
