package weft

import (
	"fmt"
	"os"
	"testing"
)

// TestPipelineMultiRank re-runs this test binary under `weftrun -n 3` with
// WEFT_GO_PIPELINE_CHILD=1; each rank then, for every generator (p = 3, m = 6, REDUCE_GRAD on;
// 3 stages, or 6 for the interleaved and V-shaped ones), runs two steps of the model in
// pipeline_model_test.go with Go callbacks and compares with the one-process computation: the
// input each stage's forward saw, the losses, and the gradients of the stages this rank holds
// (two steps' worth), <= 1e-5 relative; REDUCE_GRAD once per step after all of its stage's
// backwards; the recorded timeline with a time per action of every rank.
// WEFT_TEST_INJECT=1: every check corrupts its value and must fail.
func TestPipelineMultiRank(t *testing.T) {
	if os.Getenv("WEFT_GO_PIPELINE_CHILD") != "" {
		pipelineChild(t)
		return
	}
	runUnderWeftrun(t, 3, "TestPipelineMultiRank", "WEFT_GO_PIPELINE_CHILD")
}

const (
	pipeRanks = 3
	pipeMB    = 6
	pipeSteps = 2
)

func pipelineChild(t *testing.T) {
	c, err := InitFromEnv(nil)
	must(t, err)
	defer c.Close()
	if c.Size() != pipeRanks {
		t.Fatalf("%d ranks, expected %d", c.Size(), pipeRanks)
	}
	ck := newChecks(t, fmt.Sprintf("pipeline multirank rank %d", c.Rank()))
	for _, kind := range ScheduleGenerators {
		pipelineKind(t, c, kind, ck)
	}
	must(t, c.Barrier())
	ck.finish()
}

func pipelineKind(t *testing.T, c *Comm, kind ScheduleKind, ck *checks) {
	v := 0
	if kind == ScheduleInterleaved1F1B {
		v = 2
	}
	s := genSched(t, kind, pipeRanks, pipeMB, v, true)
	defer s.Close()
	info, err := s.Info()
	must(t, err)
	S := info.Stages
	st := newFrameworkState(S)
	var bounds []Boundary
	for i := 0; i+1 < S; i++ {
		bounds = append(bounds, HostBoundary[float32](modelWidth))
	}
	p, err := NewPipeline(c, s, &PipelineConfig{Callbacks: st.callbacks(), Boundaries: bounds, Record: true})
	if err != nil {
		t.Fatalf("%v: NewPipeline: %v", kind, err)
	}
	for step := 0; step < pipeSteps; step++ {
		tl, err := p.Run()
		if err != nil {
			t.Fatalf("%v step %d: Run: %v", kind, step, err)
		}
		ti, err := tl.Info()
		must(t, err)
		ck.count(fmt.Sprintf("%v step %d: timeline ranks", kind, step), ti.Ranks, pipeRanks)
		for r := 0; r < pipeRanks; r++ {
			acts, _ := s.Actions(r)
			rt, err := tl.Rank(r)
			must(t, err)
			ck.count(fmt.Sprintf("%v step %d: rank %d recorded times", kind, step, r), len(rt.Start), len(acts))
		}
		ck.holds(fmt.Sprintf("%v step %d: makespan positive", kind, step), ti.Makespan > 0)
		must(t, tl.Close())
	}
	must(t, p.Close())

	want := modelReference(S, pipeMB)
	last := false
	for stage := 0; stage < S; stage++ {
		r, err := s.StageRank(stage)
		must(t, err)
		name := fmt.Sprintf("%v stage %d", kind, stage)
		if r != c.Rank() {
			ck.holds(name+": untouched here", st.gradA[stage] == 0 && len(st.reduceCalls[stage]) == 0)
			continue
		}
		last = last || stage == S-1
		ck.close(name+": grad a", float64(st.gradA[stage]), pipeSteps*float64(want.gradA[stage]), 1e-5)
		ck.close(name+": grad c", float64(st.gradC[stage]), pipeSteps*float64(want.gradC[stage]), 1e-5)
		ck.equal(name+": REDUCE_GRAD after the backwards", st.reduceCalls[stage], []int{pipeMB, 2 * pipeMB},
			func(g any) any { return append(g.([]int), 0) })
		for i := 0; i < pipeMB; i++ {
			ck.allClose(fmt.Sprintf("%s: input of micro-batch %d", name, i), st.seenInputs[stageMB{stage, i}], want.inputs[stageMB{stage, i}], 1e-5)
		}
	}
	if last {
		for i := 0; i < pipeMB; i++ {
			got, ok := st.losses[i]
			ck.holds(fmt.Sprintf("%v: loss %d computed", kind, i), ok)
			ck.close(fmt.Sprintf("%v: loss of micro-batch %d", kind, i), got, want.losses[i], 1e-5)
		}
	}
}
