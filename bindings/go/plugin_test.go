package weft

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
)

// weft/plugin.h through the Go binding, with the C plugin plugins/c_reduce
// ($WEFT_TEST_C_REDUCE_PLUGIN, else build/plugins/libweft_c_reduce.so next to build/lib; the tests
// say so and pass when it is not built): its manifest's entries; calls by name of every argument
// type (I64, PTR + SIZE over staged Go slices, TENSOR, STRING, FN through a Go Closure) and of a
// reduction operator, against references written here; a type mismatch (weft's message names
// the argument and both types), a bad path, a closure that fails. TestPluginOpsMultiRank: on 3
// ranks under weftrun, a Go operator (RegisterOp) and the plugin's absmax in Allreduce, against
// the reduction of every rank's inputs done here.
// WEFT_TEST_INJECT=1: every check corrupts its value and must fail (pipeline_model_test.go).
// Never load plugins/go_schedule's library here: two Go runtimes cannot share a process.

func cReducePlugin(t *testing.T) string {
	path := os.Getenv("WEFT_TEST_C_REDUCE_PLUGIN")
	if path == "" {
		_, here, _, _ := runtime.Caller(0)
		path = filepath.Join(filepath.Dir(here), "../../build/plugins/libweft_c_reduce.so")
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("the C plugin is not built at %s (set WEFT_TEST_C_REDUCE_PLUGIN)", path)
	}
	return path
}

func mustCall(t *testing.T, p *Plugin, name string, args ...Value) Value {
	t.Helper()
	v, err := p.Call(name, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func TestPluginCalls(t *testing.T) {
	path := cReducePlugin(t)
	c := newChecks(t, "TestPluginCalls")
	p, err := LoadPlugin(path)
	check(t, "LoadPlugin", err)
	defer p.Close()
	c.holds("name and version", p.Name != "" && p.Version != "")
	c.count("abi major", p.ABIMajor, 1)
	e, err := p.Entry("dot_f64")
	check(t, "Entry", err)
	c.equal("dot_f64 signature", []ValueType{e.Ret, e.Args[0], e.Args[1], e.Args[2]},
		[]ValueType{TypeF64, TypePtr, TypePtr, TypeSize}, func(g any) any { return g.([]ValueType)[:3] })
	absmax, err := p.Entry("absmax")
	check(t, "Entry absmax", err)
	op, isOp := absmax.Op()
	c.holds("absmax is an operator", isOp && int(op) >= PluginIDBase && absmax.Kind == KindReduceOp)
	names := map[string]bool{}
	for _, en := range p.Entries {
		names[en.Name] = true
	}
	found := 0
	for _, n := range []string{"add_i64", "dot_f64", "apply_twice", "tensor_sum", "strlen_u64", "absmax", "logsumexp", "sum_f32"} {
		if names[n] {
			found++
		}
	}
	c.count("entries listed", found, 8)

	r := mustCall(t, p, "add_i64", I64Value(1<<40), I64Value(-7))
	c.equal("add_i64", r.I, int64(1<<40-7), func(g any) any { return g.(int64) + 1 })
	x, y := make([]float64, 41), make([]float64, 41)
	want, bound := 0.0, 0.0
	for i := range x {
		x[i], y[i] = math.Sin(float64(i)*0.37), 1+float64(i)/8
		want += x[i] * y[i]
		bound += math.Abs(x[i] * y[i])
	}
	r = mustCall(t, p, "dot_f64", SliceValue(x), SliceValue(y), SizeValue(len(x)))
	c.close("dot_f64", r.F, want, 41*bound*(math.Nextafter(1, 2)-1)) // n eps sum|x y| (relative to max(1, |want|))
	data := make([]float32, 15)
	sum := 0.0
	for i := range data {
		data[i] = float32(i)*0.25 - 1
		sum += float64(data[i])
	}
	r = mustCall(t, p, "tensor_sum", TensorValue(data, []int64{3, 5}))
	c.close("tensor_sum", r.F, sum, 15*float64(math.Nextafter32(1, 2)-1))
	r = mustCall(t, p, "strlen_u64", StringValue("plugins from go"))
	c.equal("strlen_u64", r.Uint(), uint64(15), func(g any) any { return g.(uint64) + 1 })

	var calls int32
	f, err := NewClosure(TypeF64, []ValueType{TypeF64}, func(a []Value) (Value, error) {
		atomic.AddInt32(&calls, 1)
		return F64Value(2*a[0].F + 1), nil
	})
	check(t, "NewClosure", err)
	defer f.Close()
	r = mustCall(t, p, "apply_twice", FnValue(f.Function()), F64Value(3))
	c.close("apply_twice", r.F, 2*(2*3+1)+1, 0)
	c.count("closure calls", int(atomic.LoadInt32(&calls)), 2)

	a := []int64{-4000, -2999, -1998, -997, 4, 1005, 2006, 3007, 4008}
	b := []int64{3500, 2723, 1946, 1169, 392, -385, -1162, -1939, -2716}
	dst := make([]int64, len(a))
	r = mustCall(t, p, "absmax", SliceValue(dst), SliceValue(a), SliceValue(b), SizeValue(len(a)),
		I32Value(int32(DtypeInt64)))
	c.count("absmax status", int(r.I), 0)
	wantAbs := make([]int64, len(a))
	for i := range a {
		wantAbs[i] = int64(math.Max(math.Abs(float64(a[i])), math.Abs(float64(b[i]))))
	}
	c.equal("absmax values", dst, wantAbs, func(g any) any { s := append([]int64(nil), g.([]int64)...); s[0]++; return s })

	_, err = p.Call("add_i64", F64Value(1.5), I64Value(2))
	c.holds("mismatch is InvalidArgument", err != nil && err.(*Error).Status == StatusInvalidArgument)
	if err != nil {
		c.contains("mismatch message", err.Error(), "expected I64, got F64")
		c.contains("mismatch names the entry", err.Error(), "add_i64")
	}
	_, err = LoadPlugin("/no/such/plugin.so")
	c.holds("bad path fails", err != nil)
	if err != nil {
		c.contains("bad path message", err.Error(), "/no/such/plugin.so")
	}
	bad, err := NewClosure(TypeF64, []ValueType{TypeF64}, func([]Value) (Value, error) {
		panic("refused by the test")
	})
	check(t, "NewClosure bad", err)
	defer bad.Close()
	_, _ = p.Call("apply_twice", FnValue(bad.Function()), F64Value(1))
	n, _, err := bad.Failures()
	check(t, "Failures", err)
	c.holds("failing closure counted", n >= 1)
	c.contains("failing closure message", bad.LastError(), "refused by the test")

	// The new config fields reach weft: an operator's id is no cost model or router selector.
	sched, err := GenerateSchedule(ScheduleOneFOneB, &ScheduleConfig{Ranks: 2, Microbatches: 4})
	check(t, "GenerateSchedule", err)
	defer sched.Close()
	_, err = sched.Simulate(&Costs{Forward: []float64{1, 1}, CostModel: absmax.ID, MicrobatchSize: 2})
	c.holds("cost model refused", err != nil)
	if err != nil {
		c.contains("cost_model reaches weft", err.Error(), fmt.Sprintf("no cost model with id %d", absmax.ID))
	}
	_, err = Route(make([]float32, 12), &RouterConfig{Experts: 4, TopK: 1, Selector: absmax.ID})
	c.holds("selector refused", err != nil)
	if err != nil {
		c.contains("selector reaches weft", err.Error(), fmt.Sprintf("no router selector with id %d", absmax.ID))
	}
	c.finish()
}

func TestPluginOpsMultiRank(t *testing.T) {
	if os.Getenv("WEFT_GO_PLUGIN_CHILD") != "" {
		pluginOpsChild(t)
		return
	}
	cReducePlugin(t) // skips when the plugin is not built
	runUnderWeftrun(t, 3, "TestPluginOpsMultiRank", "WEFT_GO_PLUGIN_CHILD")
}

func pluginInputs(rank, n, seed int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = (float64((i*7919+rank*104729+seed*13)%2001) - 1000) / 97
	}
	return v
}

func pluginOpsChild(t *testing.T) {
	comm, err := InitFromEnv(nil)
	check(t, "InitFromEnv", err)
	defer comm.Close()
	c := newChecks(t, "TestPluginOpsMultiRank child")
	// Every rank registers in the same order, so the ids agree.
	goAbsmax, err := RegisterOp("go_absmax", func(dst, a, b []float64) error {
		for i := range dst {
			dst[i] = math.Max(math.Abs(a[i]), math.Abs(b[i]))
		}
		return nil
	})
	check(t, "RegisterOp", err)
	defer goAbsmax.Close()
	p, err := LoadPlugin(cReducePlugin(t))
	check(t, "LoadPlugin", err)
	defer p.Close()
	e, err := p.Entry("absmax")
	check(t, "Entry", err)
	plugAbsmax, _ := e.Op()
	for _, n := range []int{1, 10, 100003} {
		all := make([][]float64, comm.Size())
		for r := range all {
			all[r] = pluginInputs(r, n, n)
		}
		want := make([]float64, n)
		for i := range want {
			for r := range all {
				want[i] = math.Max(want[i], math.Abs(all[r][i]))
			}
		}
		for _, tc := range []struct {
			what string
			op   Op
		}{{"go absmax", goAbsmax.Op()}, {"plugin absmax", plugAbsmax}} {
			x := append([]float64(nil), all[comm.Rank()]...)
			check(t, tc.what, AllreduceInPlace(comm, x, tc.op))
			c.equal(tc.what, x, want, func(g any) any { s := append([]float64(nil), g.([]float64)...); s[n/2]++; return s })
		}
	}
	c.holds("go op had no failures", goAbsmax.LastError() == "")
	check(t, "Barrier", comm.Barrier())
	c.finish()
}
