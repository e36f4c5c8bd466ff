package weft_test

// Examples as `go doc` and pkg.go.dev show them; those with an Output comment run under
// `go test` on a one-rank communicator the example makes itself (a real job has N ranks).

import (
	"errors"
	"fmt"

	weft "github.com/weft-dev/weft/bindings/go"
)

// oneRank makes a communicator of one rank: the process creates the job's id itself
// (weft_get_unique_id starts the rendezvous store here) and joins as rank 0 of 1.
func oneRank() *weft.Comm {
	id, err := weft.NewUniqueID()
	if err != nil {
		panic(err)
	}
	c, err := weft.Init(id, 0, 1, nil)
	if err != nil {
		panic(err)
	}
	return c
}

// A job's ranks share a UniqueID: one process makes it and sends its bytes to the others by
// its own means (a file, MPI, a socket); each then calls Init with its rank.
func ExampleInit() {
	id, err := weft.NewUniqueID()
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := weft.Init(id, 0, 1, &weft.Config{Name: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Printf("rank %d of %d\n", c.Rank(), c.Size())
	// Output: rank 0 of 1
}

// Under a launcher (weftrun -n 4 ./prog, torchrun, mpirun, Slurm) every rank takes its rank,
// size and rendezvous address from the environment.
func ExampleInitFromEnv() {
	c, err := weft.InitFromEnv(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	x := []float32{float32(c.Rank()), 1}
	if err := weft.AllreduceInPlace(c, x, weft.OpSum); err != nil {
		fmt.Println(err)
		return
	}
	// x[0] is 0+1+...+(size-1), x[1] the number of ranks.
	fmt.Println(x)
}

func ExampleAllreduce() {
	c := oneRank()
	defer c.Close()
	send := []float64{1.5, -2, 3}
	recv := make([]float64, len(send))
	if err := weft.Allreduce(c, send, recv, weft.OpMax); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(recv)
	// Output: [1.5 -2 3]
}

// An asynchronous collective works on C staging memory; the result lands in the Go slice when
// Wait returns.
func ExampleAllreduceAsync() {
	c := oneRank()
	defer c.Close()
	send := []int32{1, 2, 3}
	recv := make([]int32, 3)
	req, err := weft.AllreduceAsync(c, send, recv, weft.OpSum)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := req.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(recv)
	// Output: [1 2 3]
}

// Errors carry the library's status and message; errors.Is compares the status.
func ExampleError() {
	c := oneRank()
	defer c.Close()
	err := weft.Broadcast(c, []float32{1}, 5) // root 5 does not exist in a one-rank job
	var werr *weft.Error
	fmt.Println(errors.Is(err, weft.ErrInvalidArgument), errors.As(err, &werr) && werr.Message != "")
	// Output: true true
}

// The loaded library's ABI version must be the one this package was built for.
func ExampleVersion() {
	_, abi, err := weft.Version()
	fmt.Println(err == nil && abi == weft.ABIVersion)
	// Output: true
}

// Schedules are data: generate one, then read each rank's actions in torch's notation.
func ExampleGenerateSchedule() {
	s, err := weft.GenerateSchedule(weft.ScheduleOneFOneB, &weft.ScheduleConfig{Ranks: 2, Microbatches: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	for rank := 0; rank < 2; rank++ {
		actions, err := s.Actions(rank)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("rank %d: %s\n", rank, weft.FormatActions(actions))
	}
	// 1F1B with p = 2, m = 2: rank 0 runs p-1 = 1 warm-up forward, then alternates; the last
	// stage (rank 1) alternates from the start.
	// Output:
	// rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1
	// rank 1: 1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1
}
