package weft

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Single-process tests of the pipeline family (weft/pipeline.h): every generator passes the
// validator, with placement, compute actions and transfers counted here from the header's
// rules; torch's CSV (a hand-written file, and round trips with files); simulation against the
// closed forms (GPipe and 1F1B makespan (m+p-1)(f+b), bubble (p-1)/(m+p-1), peak activations);
// tuning against a brute force simulated here; refusals naming the fault; the executor on one
// rank against the one-process model; a callback's error or panic coming back from Run.
// WEFT_TEST_INJECT=1: every check corrupts its value and must fail (pipeline_model_test.go).

func genSched(t *testing.T, kind ScheduleKind, p, m, v int, reduce bool) *Schedule {
	t.Helper()
	s, err := GenerateSchedule(kind, &ScheduleConfig{Ranks: p, Microbatches: m, StagesPerRank: v, ReduceGrad: reduce})
	if err != nil {
		t.Fatalf("%v p=%d m=%d v=%d: %v", kind, p, m, v, err)
	}
	return s
}

// placementOf is the header's rule: which rank holds stage s.
func placementOf(kind ScheduleKind, p, s int) int {
	if (kind == ScheduleZBV || kind == ScheduleDualPipeV) && s >= p {
		return 2*p - 1 - s
	}
	return s % p
}

type genCase struct {
	kind ScheduleKind
	v    int
	ms   []int
}

func genCases(p int) []genCase {
	all := []int{1, 2, p, 2*p + 1}
	return []genCase{{ScheduleGPipe, 1, all}, {ScheduleOneFOneB, 1, all}, {ScheduleInterleaved1F1B, 2, []int{1, p, 2 * p}},
		{ScheduleZBH1, 1, all}, {ScheduleZBH2, 1, all}, {ScheduleZBV, 2, all}, {ScheduleDualPipeV, 2, []int{2 * p, 2*p + 3}}}
}

func TestPipelineGenerators(t *testing.T) {
	ck := newChecks(t, "generators")
	for p := 1; p <= 4; p++ {
		for _, gc := range genCases(p) {
			for _, m := range gc.ms {
				name := fmt.Sprintf("%v p=%d m=%d", gc.kind, p, m)
				s := genSched(t, gc.kind, p, m, gc.v, true)
				must(t, s.Validate())
				info, err := s.Info()
				must(t, err)
				S := p * gc.v
				ck.equal(name+": info", info, ScheduleInfo{gc.kind, p, S, m, gc.v}, func(g any) any {
					i := g.(ScheduleInfo)
					i.Stages++
					return i
				})
				forwards, backs := map[stageMB]int{}, map[stageMB][3]int{}
				sendsF, misplaced, reduces := 0, 0, 0
				for r := 0; r < p; r++ {
					acts, err := s.Actions(r)
					must(t, err)
					for _, a := range acts {
						key := stageMB{a.Stage, a.Microbatch}
						if a.Kind.IsCompute() && placementOf(gc.kind, p, a.Stage) != r {
							misplaced++
						}
						b := backs[key]
						switch a.Kind {
						case ActionF:
							forwards[key]++
						case ActionB, ActionI, ActionW:
							b[int(a.Kind)-int(ActionB)]++
							backs[key] = b
						case ActionSendF:
							sendsF++
						case ActionReduceGrad:
							reduces++
						}
					}
				}
				for st := 0; st < S; st++ {
					r, err := s.StageRank(st)
					must(t, err)
					ck.count(fmt.Sprintf("%s: stage_rank(%d)", name, st), r, placementOf(gc.kind, p, st))
				}
				ck.count(name+": compute actions on the wrong rank", misplaced, 0)
				ck.count(name+": forwards", len(forwards), S*m)
				once, complete := true, true
				for _, n := range forwards {
					once = once && n == 1
				}
				for _, b := range backs {
					complete = complete && (b == [3]int{1, 0, 0} || b == [3]int{0, 1, 1})
				}
				ck.holds(name+": every forward once", once)
				ck.count(name+": backwards", len(backs), S*m)
				ck.holds(name+": every backward as B or I+W", complete)
				crossings := 0
				for st := 0; st+1 < S; st++ {
					if placementOf(gc.kind, p, st) != placementOf(gc.kind, p, st+1) {
						crossings++
					}
				}
				ck.count(name+": SEND_F actions", sendsF, crossings*m)
				ck.count(name+": REDUCE_GRAD actions", reduces, S)
				must(t, s.Close())
			}
		}
	}
	ck.finish()
}

func TestPipelineCSV(t *testing.T) {
	ck := newChecks(t, "csv")
	text := "0F0,0F1,0B0,0B1\r\n1F0,1F1,1B0,1B1\r\n"
	s, err := ScheduleFromCSV(text)
	must(t, err)
	defer s.Close()
	must(t, s.Validate())
	info, err := s.Info()
	must(t, err)
	ck.equal("parsed info", info, ScheduleInfo{ScheduleCustom, 2, 2, 2, 1}, func(g any) any {
		i := g.(ScheduleInfo)
		i.Microbatches++
		return i
	})
	back, err := s.ToCSV(CSVComputeOnly)
	must(t, err)
	ck.text("compute-only CSV printed back", back, text)
	a := func(k ActionKind, st, m int) Action { return Action{k, st, m} }
	want0 := []Action{a(ActionF, 0, 0), a(ActionSendF, 0, 0), a(ActionF, 0, 1), a(ActionSendF, 0, 1),
		a(ActionRecvB, 0, 0), a(ActionB, 0, 0), a(ActionRecvB, 0, 1), a(ActionB, 0, 1)}
	want1 := []Action{a(ActionRecvF, 1, 0), a(ActionF, 1, 0), a(ActionRecvF, 1, 1), a(ActionF, 1, 1),
		a(ActionB, 1, 0), a(ActionSendB, 1, 0), a(ActionB, 1, 1), a(ActionSendB, 1, 1)}
	got0, _ := s.Actions(0)
	got1, _ := s.Actions(1)
	ck.actions("rank 0 with the transfers inserted", got0, want0)
	ck.actions("rank 1 with the transfers inserted", got1, want1)
	loose, err := ScheduleFromCSV("0F0,,0F1,None,0B0,0B1\n1F0,1F1,1B0,1B1\n")
	must(t, err)
	gotLoose, _ := loose.Actions(0)
	ck.actions("idle steps skipped", gotLoose, want0)
	must(t, loose.Close())

	dir := t.TempDir()
	for _, gc := range genCases(3) {
		m := gc.ms[len(gc.ms)-1]
		name := fmt.Sprintf("%v p=3 m=%d", gc.kind, m)
		s := genSched(t, gc.kind, 3, m, gc.v, true)
		full, err := s.ToCSV(CSVComputeComms)
		must(t, err)
		re, err := ScheduleFromCSV(full)
		must(t, err)
		path := filepath.Join(dir, gc.kind.String()+".weftsched")
		must(t, s.Save(path))
		loaded, err := LoadSchedule(path)
		must(t, err)
		for r := 0; r < 3; r++ {
			want, _ := s.Actions(r)
			g1, _ := re.Actions(r)
			g2, _ := loaded.Actions(r)
			ck.actions(fmt.Sprintf("%s: rank %d after CSV", name, r), g1, want)
			ck.actions(fmt.Sprintf("%s: rank %d after save/load", name, r), g2, want)
		}
		only, err := s.ToCSV(CSVComputeOnly)
		must(t, err)
		reb, err := ScheduleFromCSV(only)
		must(t, err)
		ck.holds(name+": the compute-only form validates with the transfers inserted", reb.Validate() == nil)
		for r := 0; r < 3; r++ {
			want, _ := s.Actions(r)
			got, _ := reb.Actions(r)
			ck.actions(fmt.Sprintf("%s: rank %d compute-only", name, r), computeOnly(got), computeOnly(want))
		}
		for _, h := range []*Schedule{s, re, loaded, reb} {
			must(t, h.Close())
		}
	}
	ck.finish()
}

// computeOnly keeps F, B, I and W (torch's compute-only form).
func computeOnly(l []Action) []Action {
	var out []Action
	for _, a := range l {
		if a.Kind == ActionF || a.Kind == ActionB || a.Kind == ActionI || a.Kind == ActionW {
			out = append(out, a)
		}
	}
	return out
}

func TestPipelineSimulation(t *testing.T) {
	ck := newChecks(t, "simulate")
	dir := t.TempDir()
	f, b := 1.0, 2.0
	for _, p := range []int{1, 2, 4} {
		for _, m := range []int{1, 3, 8} {
			for _, kind := range []ScheduleKind{ScheduleGPipe, ScheduleOneFOneB} {
				name := fmt.Sprintf("%v p=%d m=%d", kind, p, m)
				s := genSched(t, kind, p, m, 0, false)
				costs := UniformCosts(p, f, b)
				tl, err := s.Simulate(&costs)
				must(t, err)
				info, err := tl.Info()
				must(t, err)
				ck.count(name+": ranks", info.Ranks, p)
				ck.close(name+": makespan", tl.Makespan(), float64(m+p-1)*(f+b), 1e-12)
				ck.close(name+": bubble", tl.BubbleFraction(), float64(p-1)/float64(m+p-1), 1e-12)
				for r := 0; r < p; r++ {
					rt, err := tl.Rank(r)
					must(t, err)
					acts, _ := s.Actions(r)
					ck.count(fmt.Sprintf("%s: rank %d times", name, r), len(rt.Start), len(acts))
					ck.close(fmt.Sprintf("%s: rank %d busy", name, r), rt.Stats.Busy, float64(m)*(f+b), 1e-12)
					peak := m
					if kind == ScheduleOneFOneB && p-r < m {
						peak = p - r
					}
					ck.count(fmt.Sprintf("%s: rank %d peak activations", name, r), rt.Stats.PeakActivations, peak)
				}
				if p == 4 && m == 8 {
					svg, trace := filepath.Join(dir, "t.svg"), filepath.Join(dir, "t.json")
					must(t, tl.Write(TimelineSVG, svg))
					must(t, tl.Write(TimelineChromeTrace, trace))
					sv, _ := os.ReadFile(svg)
					tr, _ := os.ReadFile(trace)
					ck.holds(name+": SVG", strings.Contains(string(sv), "<svg") && strings.HasSuffix(strings.TrimSpace(string(sv)), "</svg>"))
					ck.holds(name+": trace JSON", strings.HasPrefix(strings.TrimSpace(string(tr)), "{") || strings.HasPrefix(strings.TrimSpace(string(tr)), "["))
				}
				must(t, tl.Close())
				must(t, s.Close())
			}
		}
	}
	s := genSched(t, ScheduleGPipe, 2, 2, 0, false)
	defer s.Close()
	bad := UniformCosts(2, 1, 1)
	bad.Backward = []float64{1}
	_, err := s.Simulate(&bad)
	ck.contains("short cost array named", fmt.Sprint(err), "Backward")
	ck.finish()
}

// bruteForce simulates candidate (kind, m, v) of c the way pipeline.h states the tuning model.
func bruteForce(c *TuneConfig, kind ScheduleKind, m, v int) (float64, float64, bool) {
	p, layers := c.Ranks, len(c.LayerForward)
	S := p * v
	s, err := GenerateSchedule(kind, &ScheduleConfig{Ranks: p, Microbatches: m, StagesPerRank: v})
	if err != nil || layers < S {
		return 0, 0, false
	}
	defer s.Close()
	mbs := float64(c.GlobalBatch / m)
	costs := Costs{Overhead: c.MicrobatchOverhead}
	for st := 0; st < S; st++ {
		lo, hi := st*layers/S, (st+1)*layers/S
		fw, bw := 0.0, 0.0
		for l := lo; l < hi; l++ {
			fw += c.LayerForward[l]
			bw += c.LayerBackward[l]
		}
		costs.Forward = append(costs.Forward, fw*mbs)
		costs.Backward = append(costs.Backward, bw*mbs)
		costs.ActivationBytes = append(costs.ActivationBytes, float64(hi-lo)*c.ActivationBytesPerSample*mbs)
		costs.BoundaryBytes = append(costs.BoundaryBytes, c.BoundaryBytesPerSample*mbs)
	}
	tl, err := s.Simulate(&costs)
	if err != nil {
		return 0, 0, false
	}
	defer tl.Close()
	peak := 0.0
	for r := 0; r < p; r++ {
		rt, _ := tl.Rank(r)
		if rt.Stats.PeakActivationBytes > peak {
			peak = rt.Stats.PeakActivationBytes
		}
	}
	return tl.Makespan(), peak + c.StaticBytes, true
}

func TestPipelineTune(t *testing.T) {
	ck := newChecks(t, "tune")
	kinds := []ScheduleKind{ScheduleGPipe, ScheduleOneFOneB, ScheduleInterleaved1F1B}
	cfg := DefaultTuneConfig()
	cfg.Ranks, cfg.GlobalBatch, cfg.MicrobatchOverhead = 2, 8, 0.5
	cfg.LayerForward, cfg.LayerBackward = []float64{1, 2, 1, 3}, []float64{2, 4, 2, 6}
	cfg.ActivationBytesPerSample, cfg.MemoryCap, cfg.Kinds, cfg.MaxStagesPerRank = 100, 1500, kinds, 2
	cands, best, err := Tune(&cfg)
	must(t, err)
	var want, got []string
	for _, k := range kinds[:2] {
		for _, m := range []int{1, 2, 4, 8} {
			if _, _, ok := bruteForce(&cfg, k, m, 1); ok {
				want = append(want, fmt.Sprintf("%v/%d", k, m))
			}
		}
	}
	for _, c := range cands {
		if c.Kind != ScheduleInterleaved1F1B {
			got = append(got, fmt.Sprintf("%v/%d", c.Kind, c.Microbatches))
		}
	}
	sort.Strings(want)
	sort.Strings(got)
	ck.text("GPipe and 1F1B candidates", strings.Join(got, " "), strings.Join(want, " "))
	fits, misses := false, false
	for _, c := range cands {
		name := c.String()
		ck.holds(name+": v in range", c.StagesPerRank >= 1 && c.StagesPerRank <= 2)
		ck.count(name+": micro-batch size", c.MicrobatchSize, 8/c.Microbatches)
		time, peak, ok := bruteForce(&cfg, c.Kind, c.Microbatches, c.StagesPerRank)
		if !ok {
			t.Fatalf("%s: not a valid candidate here", name)
		}
		ck.close(name+": step time", c.StepTime, time, 1e-9)
		ck.close(name+": peak bytes", c.PeakBytes, peak, 1e-9)
		ck.equal(name+": fits", c.Fits, peak <= cfg.MemoryCap, func(g any) any { return !g.(bool) })
		fits, misses = fits || c.Fits, misses || !c.Fits
	}
	ck.holds("some candidate fits and some does not", fits && misses)
	sorted := true
	for i := 1; i < len(cands); i++ {
		a, b := cands[i-1], cands[i]
		if a.Fits != b.Fits {
			sorted = sorted && a.Fits
		} else {
			sorted = sorted && a.StepTime <= b.StepTime
		}
	}
	ck.holds("sorted: fitting first, then by step time", sorted)
	wantBest := -1
	for i, c := range cands {
		if c.Fits && (wantBest < 0 || c.StepTime < cands[wantBest].StepTime) {
			wantBest = i
		}
	}
	if best < 0 || wantBest < 0 {
		t.Fatalf("best %d, brute force %d", best, wantBest)
	}
	ck.close("best step time", cands[best].StepTime, cands[wantBest].StepTime, 1e-12)
	short := cfg
	short.LayerBackward = []float64{1}
	_, _, err = Tune(&short)
	ck.holds("mismatched layer arrays refused", err != nil)
	ck.finish()
}

func TestPipelineRefusals(t *testing.T) {
	ck := newChecks(t, "refusals")
	_, err := GenerateSchedule(ScheduleDualPipeV, &ScheduleConfig{Ranks: 2, Microbatches: 3})
	ck.holds("DualPipeV m < 2p refused as an invalid argument", isStatus(err, StatusInvalidArgument))
	ck.contains("DualPipeV m < 2p message", fmt.Sprint(err), "2p")
	a := func(k ActionKind, st, m int) Action { return Action{k, st, m} }
	skip, err := NewSchedule([][]Action{{a(ActionF, 0, 0), a(ActionB, 0, 0)}, {a(ActionF, 1, 0)}})
	must(t, err)
	ck.contains("skipped backward names the rule", fmt.Sprint(skip.Validate()), "complete")
	must(t, skip.Close())
	lock, err := NewSchedule([][]Action{{a(ActionF, 0, 0), a(ActionRecvB, 0, 0), a(ActionB, 0, 0), a(ActionSendF, 0, 0)},
		{a(ActionRecvF, 1, 0), a(ActionF, 1, 0), a(ActionB, 1, 0), a(ActionSendB, 1, 0)}})
	must(t, err)
	ck.contains("deadlock names the rule", strings.ToLower(fmt.Sprint(lock.Validate())), "deadlock")
	must(t, lock.Close())
	_, err = NewSchedule([][]Action{{a(ActionKind(77), 0, 0)}})
	ck.holds("unknown kind refused", isStatus(err, StatusInvalidArgument))
	s := genSched(t, ScheduleGPipe, 2, 2, 0, false)
	_, err = s.Actions(2)
	ck.holds("rank out of range refused", err != nil)
	_, err = s.StageRank(5)
	ck.contains("stage out of range named", fmt.Sprint(err), "stage = 5")
	must(t, s.Close())
	_, err = s.Info()
	ck.holds("a closed schedule refused", err != nil)
	_, err = ScheduleFromCSV("0F0,0X1\r\n")
	ck.contains("bad CSV cell named", fmt.Sprint(err), "0X1")
	_, err = LoadSchedule("/nonexistent/weft.sched")
	ck.holds("missing file refused", err != nil)
	ck.finish()
}

func isStatus(err error, s Status) bool {
	e, ok := err.(*Error)
	return ok && e.Status == s
}

func TestPipelineOneRank(t *testing.T) {
	ck := newChecks(t, "one-rank executor")
	c := solo(t)
	defer c.Close()
	stages, m := 2, 3
	var list []Action
	for i := 0; i < m; i++ {
		list = append(list, Action{ActionF, 0, i}, Action{ActionF, 1, i}, Action{ActionI, 1, i}, Action{ActionB, 0, i}, Action{ActionW, 1, i})
	}
	list = append(list, Action{ActionReduceGrad, 0, -1}, Action{ActionReduceGrad, 1, -1})
	s, err := NewSchedule([][]Action{list})
	must(t, err)
	defer s.Close()
	must(t, s.Validate())
	st := newFrameworkState(stages)
	p, err := NewPipeline(c, s, &PipelineConfig{Callbacks: st.callbacks(), Boundaries: []Boundary{HostBoundary[float32](modelWidth)}, Record: true})
	must(t, err)
	tl, err := p.Run()
	must(t, err)
	info, err := tl.Info()
	must(t, err)
	ck.count("timeline ranks", info.Ranks, 1)
	rt, err := tl.Rank(0)
	must(t, err)
	ck.count("recorded actions", len(rt.Start), len(list))
	ck.holds("makespan positive", info.Makespan > 0)
	must(t, tl.Close())
	must(t, p.Close())
	want := modelReference(stages, m)
	for s := 0; s < stages; s++ {
		ck.close(fmt.Sprintf("grad a[%d]", s), float64(st.gradA[s]), float64(want.gradA[s]), 1e-5)
		ck.close(fmt.Sprintf("grad c[%d]", s), float64(st.gradC[s]), float64(want.gradC[s]), 1e-5)
		ck.equal(fmt.Sprintf("REDUCE_GRAD(%d) after all backwards", s), st.reduceCalls[s], []int{m}, func(g any) any { return append(g.([]int), 0) })
	}
	for i := 0; i < m; i++ {
		ck.close(fmt.Sprintf("loss %d", i), st.losses[i], want.losses[i], 1e-5)
		ck.allClose(fmt.Sprintf("stage 1 input %d", i), st.seenInputs[stageMB{1, i}], want.inputs[stageMB{1, i}], 1e-6)
	}
	ck.count("callback calls", st.calls, len(list))
	ck.finish()
}

func TestPipelineCallbackFailures(t *testing.T) {
	ck := newChecks(t, "callback failures")
	s := genSched(t, ScheduleGPipe, 1, 2, 0, false)
	defer s.Close()
	for _, panics := range []bool{false, true} {
		text := "the model refused micro-batch 1"
		if panics {
			text = "deliberate panic in micro-batch 1"
		}
		cbs := Callbacks{
			Forward: func(c *StageCall) error {
				if c.Microbatch == 1 {
					if panics {
						panic(text)
					}
					return fmt.Errorf("%s", text)
				}
				return nil
			},
			Backward: func(*StageCall) error { return nil },
		}
		c := solo(t) // a failed step leaves its communicator unusable: a fresh one each time
		p, err := NewPipeline(c, s, &PipelineConfig{Callbacks: cbs})
		must(t, err)
		_, err = p.Run()
		ck.contains(fmt.Sprintf("panic=%v: the callback's text", panics), fmt.Sprint(err), text)
		ck.contains(fmt.Sprintf("panic=%v: the action", panics), fmt.Sprint(err), "0F1")
		must(t, p.Close())
		c.Close()
	}
	c := solo(t)
	defer c.Close()
	_, err := NewPipeline(c, s, &PipelineConfig{})
	ck.contains("missing forward named", fmt.Sprint(err), "Forward")
	_, err = NewPipeline(c, s, &PipelineConfig{Callbacks: Callbacks{Forward: func(*StageCall) error { return nil }}})
	ck.contains("missing backward named", fmt.Sprint(err), "backward")
	ck.finish()
}
