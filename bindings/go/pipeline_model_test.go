package weft

import (
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The pipeline tests' shared pieces: checks with their injection proof, and the small model.
//
// Checks: under WEFT_TEST_INJECT=1 every check corrupts the value it was given (a number moved
// far off, a text or list changed, a condition negated) and must then fail; a corruption that
// passes fails the test at finish. Without the variable a failed check fails the test at once.
//
// The model: stage s maps a vector x of modelWidth floats to tanh(a_s * x + c_s), the last
// stage's output meets a target in a squared-error loss. modelReference runs every micro-batch
// through all stages in one process; frameworkState.call is the same computation cut into the
// stage callbacks a Pipeline calls, keeping what the backward needs between calls.

type checks struct {
	t                *testing.T
	inject           bool
	injected, caught int
	what             string
}

func newChecks(t *testing.T, what string) *checks {
	v := os.Getenv("WEFT_TEST_INJECT")
	return &checks{t: t, inject: v != "" && v != "0", what: what}
}

func (c *checks) outcome(ok bool, describe func() string) {
	c.t.Helper()
	if c.inject {
		c.injected++
		if !ok {
			c.caught++
		}
	} else if !ok {
		c.t.Fatalf("%s: %s", c.what, describe())
	}
}

func (c *checks) close(what string, got, want, tol float64) {
	c.t.Helper()
	if c.inject {
		got += 1 + math.Abs(got)
	}
	ok := math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
	c.outcome(ok, func() string {
		return fmt.Sprintf("%s: got %v, expected %v (tolerance %v relative)", what, got, want, tol)
	})
}

func (c *checks) allClose(what string, got, want []float32, tol float64) {
	c.t.Helper()
	g := make([]float64, len(got))
	for i, x := range got {
		g[i] = float64(x)
	}
	if c.inject {
		if len(g) > 0 {
			g[0] += 1 + math.Abs(g[0])
		} else {
			g = append(g, 0)
		}
	}
	bad := ""
	if len(g) != len(want) {
		bad = fmt.Sprintf("%d values, expected %d", len(g), len(want))
	} else {
		for i := range g {
			w := float64(want[i])
			if math.Abs(g[i]-w) > tol*math.Max(1, math.Abs(w)) {
				bad = fmt.Sprintf("element %d: got %v, expected %v", i, g[i], w)
				break
			}
		}
	}
	c.outcome(bad == "", func() string { return what + ": " + bad })
}

// equal compares with reflect.DeepEqual; corrupt changes got under injection.
func (c *checks) equal(what string, got, want any, corrupt func(any) any) {
	c.t.Helper()
	if c.inject {
		got = corrupt(got)
	}
	c.outcome(reflect.DeepEqual(got, want), func() string { return fmt.Sprintf("%s: got %v, expected %v", what, got, want) })
}

func (c *checks) count(what string, got, want int) {
	c.t.Helper()
	c.equal(what, got, want, func(g any) any { return g.(int) + 1 })
}

func (c *checks) text(what, got, want string) {
	c.t.Helper()
	c.equal(what, got, want, func(g any) any { return g.(string) + "x" })
}

func (c *checks) actions(what string, got, want []Action) {
	c.t.Helper()
	c.text(what, FormatActions(got), FormatActions(want))
}

func (c *checks) holds(what string, cond bool) {
	c.t.Helper()
	if c.inject {
		cond = !cond
	}
	c.outcome(cond, func() string { return what })
}

func (c *checks) contains(what, text, part string) {
	c.t.Helper()
	if c.inject {
		text = strings.ReplaceAll(text, part, "")
	}
	c.outcome(strings.Contains(text, part), func() string { return fmt.Sprintf("%s: %q does not contain %q", what, text, part) })
}

func (c *checks) finish() {
	c.t.Helper()
	if c.inject {
		c.t.Logf("%s: injection: %d cases, %d caught", c.what, c.injected, c.caught)
		if c.injected == 0 || c.caught != c.injected {
			c.t.Fatalf("%s: WEFT_TEST_INJECT: %d of %d corrupted results passed", c.what, c.injected-c.caught, c.injected)
		}
	}
}

// ------------------------------------------------------------------ the model

const modelWidth = 4

func modelParams(s int) (float32, float32) { return 0.6 + 0.15*float32(s%5), 0.05*float32(s) - 0.1 }

func modelData(i int) []float32 {
	x := make([]float32, modelWidth)
	for k := range x {
		x[k] = float32((i*3+k*5)%7)/7 - 0.4
	}
	return x
}

func modelTarget(i int) []float32 {
	t := make([]float32, modelWidth)
	for k := range t {
		t[k] = float32((i+2*k)%5)/10 - 0.2
	}
	return t
}

func modelForward(s int, x []float32) []float32 {
	a, c := modelParams(s)
	y := make([]float32, len(x))
	for k, v := range x {
		y[k] = float32(math.Tanh(float64(a*v + c)))
	}
	return y
}

func modelPreGrad(y, g []float32) []float32 {
	out := make([]float32, len(y))
	for k := range y {
		out[k] = g[k] * (1 - y[k]*y[k])
	}
	return out
}

func modelLoss(i int, y []float32) (float64, []float32) {
	t := modelTarget(i)
	g := make([]float32, len(y))
	l := 0.0
	for k := range y {
		g[k] = y[k] - t[k]
		l += 0.5 * float64(g[k]) * float64(g[k])
	}
	return l, g
}

type stageMB struct{ s, i int }

type modelRef struct {
	losses       []float64
	inputs       map[stageMB][]float32
	gradA, gradC []float32
}

func modelReference(stages, m int) modelRef {
	r := modelRef{inputs: map[stageMB][]float32{}, gradA: make([]float32, stages), gradC: make([]float32, stages)}
	for i := 0; i < m; i++ {
		xs := [][]float32{modelData(i)}
		for s := 0; s < stages; s++ {
			r.inputs[stageMB{s, i}] = xs[s]
			xs = append(xs, modelForward(s, xs[s]))
		}
		l, g := modelLoss(i, xs[stages])
		r.losses = append(r.losses, l)
		for s := stages - 1; s >= 0; s-- {
			gp := modelPreGrad(xs[s+1], g)
			a, _ := modelParams(s)
			g = make([]float32, len(gp))
			for k := range gp {
				r.gradA[s] += gp[k] * xs[s][k]
				r.gradC[s] += gp[k]
				g[k] = a * gp[k]
			}
		}
	}
	return r
}

// frameworkState is a framework's memory between callbacks, and what the test reads afterwards.
type frameworkState struct {
	stages          int
	inputs, outputs map[stageMB][]float32
	pending         map[stageMB][]float32 // the pre-activation gradient an I keeps for its W
	seenInputs      map[stageMB][]float32
	losses          map[int]float64
	gradA, gradC    []float32
	backwardsDone   []int
	reduceCalls     [][]int // per stage: finished backwards at each REDUCE_GRAD
	calls           int
}

func newFrameworkState(stages int) *frameworkState {
	return &frameworkState{stages: stages, inputs: map[stageMB][]float32{}, outputs: map[stageMB][]float32{},
		pending: map[stageMB][]float32{}, seenInputs: map[stageMB][]float32{}, losses: map[int]float64{},
		gradA: make([]float32, stages), gradC: make([]float32, stages), backwardsDone: make([]int, stages),
		reduceCalls: make([][]int, stages)}
}

func (f *frameworkState) forward(c *StageCall) error {
	s, i := c.Stage, c.Microbatch
	in, err := StageData[float32](c.Input)
	if err != nil {
		return err
	}
	var x []float32
	switch {
	case in != nil:
		x = append([]float32(nil), in...)
	case s == 0:
		x = modelData(i)
	default:
		return fmt.Errorf("F(%d, %d): no input on a stage after the first", s, i)
	}
	y := modelForward(s, x)
	out, err := StageData[float32](c.Output)
	switch {
	case err != nil:
		return err
	case out != nil && len(out) != len(y):
		return fmt.Errorf("F(%d, %d): output of %d elements, expected %d", s, i, len(out), len(y))
	case out != nil:
		copy(out, y)
	case s+1 == f.stages:
		f.losses[i], _ = modelLoss(i, y)
	default:
		return fmt.Errorf("F(%d, %d): no output on a stage before the last", s, i)
	}
	f.seenInputs[stageMB{s, i}] = x
	f.inputs[stageMB{s, i}], f.outputs[stageMB{s, i}] = x, y
	return nil
}

// backwardInput handles B and I: the pre-activation gradient, the input gradient written out.
func (f *frameworkState) backwardInput(c *StageCall) ([]float32, error) {
	s, i := c.Stage, c.Microbatch
	y, ok := f.outputs[stageMB{s, i}]
	if !ok {
		return nil, fmt.Errorf("backward of (%d, %d) before its forward", s, i)
	}
	delete(f.outputs, stageMB{s, i})
	in, err := StageData[float32](c.Input)
	if err != nil {
		return nil, err
	}
	g := append([]float32(nil), in...)
	if in == nil {
		if s+1 != f.stages {
			return nil, fmt.Errorf("backward (%d, %d): no output gradient before the last stage", s, i)
		}
		_, g = modelLoss(i, y)
	}
	gp := modelPreGrad(y, g)
	out, err := StageData[float32](c.Output)
	if err != nil {
		return nil, err
	}
	if out == nil && s != 0 {
		return nil, fmt.Errorf("backward (%d, %d): no input gradient buffer after stage 0", s, i)
	}
	a, _ := modelParams(s)
	for k := range out {
		out[k] = a * gp[k]
	}
	return gp, nil
}

func (f *frameworkState) backwardWeight(s, i int, gp []float32) error {
	x, ok := f.inputs[stageMB{s, i}]
	if !ok {
		return fmt.Errorf("weight gradient of (%d, %d) without its input", s, i)
	}
	delete(f.inputs, stageMB{s, i})
	for k := range gp {
		f.gradA[s] += gp[k] * x[k]
		f.gradC[s] += gp[k]
	}
	f.backwardsDone[s]++
	return nil
}

func (f *frameworkState) call(c *StageCall) error {
	f.calls++
	s, i := c.Stage, c.Microbatch
	if s < 0 || s >= f.stages {
		return fmt.Errorf("a call for stage %d of %d", s, f.stages)
	}
	switch c.Kind {
	case ActionF:
		return f.forward(c)
	case ActionB:
		gp, err := f.backwardInput(c)
		if err != nil {
			return err
		}
		return f.backwardWeight(s, i, gp)
	case ActionI:
		gp, err := f.backwardInput(c)
		f.pending[stageMB{s, i}] = gp
		return err
	case ActionW:
		if c.Input != nil || c.Output != nil {
			return fmt.Errorf("W(%d, %d) was given buffers", s, i)
		}
		gp, ok := f.pending[stageMB{s, i}]
		if !ok {
			return fmt.Errorf("W(%d, %d) before its I", s, i)
		}
		delete(f.pending, stageMB{s, i})
		return f.backwardWeight(s, i, gp)
	case ActionReduceGrad:
		f.reduceCalls[s] = append(f.reduceCalls[s], f.backwardsDone[s])
		return nil
	}
	return fmt.Errorf("a callback for a %v action", c.Kind)
}

func (f *frameworkState) callbacks() Callbacks {
	return Callbacks{Forward: f.call, Backward: f.call, BackwardInput: f.call, BackwardWeight: f.call, ReduceGrad: f.call}
}
