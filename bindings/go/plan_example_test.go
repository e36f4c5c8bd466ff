package weft_test

import (
	"fmt"

	weft "github.com/weft-dev/weft/bindings/go"
)

// The planner ranks the layouts of a model on a cluster. Here one dense layer of 1000
// parameters (1 ms forward, 3 ms backward per sample) on two ranks of one host with a slow
// link: data parallelism (4 samples each, then a 2 kB gradient all-reduce) beats splitting
// the layer over tensor parallelism (4 all-reduces of its output).
func ExampleNewLayoutPlan() {
	layer := weft.DefaultPlanLayer("fc")
	layer.Params, layer.ForwardSeconds, layer.BackwardSeconds = 1000, 1e-3, 3e-3
	layer.ActivationBytes, layer.OutputBytes = 100, 64
	cluster := weft.DefaultPlanCluster()
	cluster.RanksPerHost, cluster.MemoryPerRank, cluster.IntraBandwidth, cluster.IntraLatency = 2, 1e9, 1e6, 1e-5

	plan, err := weft.NewLayoutPlan(&weft.PlanConfig{Layers: []weft.PlanLayer{layer}, Cluster: &cluster, GlobalBatch: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer plan.Close()
	best, err := plan.Layout(0)
	if err != nil {
		fmt.Println(err)
		return
	}
	summary, _, err := plan.Scaling()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("best: dp=%d tp=%d pp=%d, step %.2f ms, %.0f bytes sent per rank\n", best.DP, best.TP, best.PP,
		best.StepSeconds*1e3, best.CommunicationBytes)
	fmt.Printf("speedup %.2f on %d ranks, serial fraction %.4f\n", summary.Speedup, summary.Ranks, summary.SerialFraction)
	// Output:
	// best: dp=2 tp=1 pp=1, step 18.02 ms, 2000 bytes sent per rank
	// speedup 1.78 on 2 ranks, serial fraction 0.1263
}
