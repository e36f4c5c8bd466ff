package weft

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"testing"
)

// Single-process tests of weft/moe.h's router and layout through the Go binding, against
// references written here from moe.h's words (not from weft's code): top-k with ties to the
// lower index, the three scores, selection bias, group-limited routing, both dropping rules with
// C = ceil(T k / E * factor), the two losses; the backward against central finite differences
// of the reference (selection held fixed); UpdateBias against its formula; MoeLayout against
// brute-force counting; refusals of bad arguments.
// WEFT_TEST_INJECT=1: every check corrupts its value and must fail (pipeline_model_test.go).

func moeLogits(tokens, experts int, seed uint64) []float32 {
	s := seed*6364136223846793005 + 1442695040888963407
	out := make([]float32, tokens*experts)
	for i := range out {
		s = s*6364136223846793005 + 1442695040888963407
		out[i] = float32(float64(s>>40)/float64(1<<24)*4 - 2)
	}
	return out
}

func softmax64(x []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	out, sum := make([]float64, len(x)), 0.0
	for i, v := range x {
		out[i] = math.Exp(v - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

func logsumexp64(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// topK: the k best of score among allowed, best first, ties to the lower index.
func topK(score []float64, allowed []bool, k int) []int {
	var idx []int
	for e := range score {
		if allowed[e] {
			idx = append(idx, e)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] > score[idx[b]] })
	if len(idx) > k {
		idx = idx[:k]
	}
	return idx
}

func sigmoid64(v float64) float64 { return 1 / (1 + math.Exp(-v)) }

// probsAndScores: the aux loss's routing probability and the selection score before bias.
func probsAndScores(row []float64, score RouterScore) ([]float64, []float64) {
	switch score {
	case RouterTopkSoftmax:
		return softmax64(row), row
	case RouterSigmoid:
		s, sum := make([]float64, len(row)), 0.0
		for i, v := range row {
			s[i] = sigmoid64(v)
			sum += s[i]
		}
		p := make([]float64, len(row))
		for i := range s {
			p[i] = s[i] / sum
		}
		return p, s
	default:
		p := softmax64(row)
		return p, p
	}
}

func weightsOf(row []float64, sel []int, c *RouterConfig) []float64 {
	w := make([]float64, len(sel))
	switch c.Score {
	case RouterTopkSoftmax:
		for j, e := range sel {
			w[j] = row[e]
		}
		return softmax64(w)
	case RouterSigmoid:
		sum := 0.0
		for j, e := range sel {
			w[j] = sigmoid64(row[e])
			sum += w[j]
		}
		for j := range w {
			w[j] /= sum
		}
		return w
	default:
		p, sum := softmax64(row), 0.0
		for j, e := range sel {
			w[j] = p[e]
			sum += w[j]
		}
		if c.Normalize {
			for j := range w {
				w[j] /= sum
			}
		}
		return w
	}
}

type routerRef struct {
	indices        []int32
	weights        []float64
	kept, selected []int64
	aux, z         float64
}

func routerReference(lg []float32, c *RouterConfig) routerRef {
	E, k := c.Experts, c.TopK
	T := len(lg) / E
	r := routerRef{indices: make([]int32, T*k), weights: make([]float64, T*k), kept: make([]int64, E), selected: make([]int64, E)}
	probSum, z := make([]float64, E), 0.0
	for t := 0; t < T; t++ {
		row := make([]float64, E)
		for e := range row {
			row[e] = float64(lg[t*E+e])
		}
		p, s := probsAndScores(row, c.Score)
		sel := make([]float64, E)
		allowed := make([]bool, E)
		for e := range sel {
			sel[e] = s[e]
			if c.Bias != nil {
				sel[e] += float64(c.Bias[e])
			}
			allowed[e] = true
		}
		if c.Groups > 1 {
			g := E / c.Groups
			gs, all := make([]float64, c.Groups), make([]bool, c.Groups)
			for i := range gs {
				v := append([]float64(nil), sel[i*g:(i+1)*g]...)
				sort.Sort(sort.Reverse(sort.Float64Slice(v)))
				for j := 0; j < 2 && j < len(v); j++ {
					gs[i] += v[j]
				}
				all[i] = true
			}
			best := topK(gs, all, c.TopKGroups)
			for e := range allowed {
				allowed[e] = false
				for _, b := range best {
					allowed[e] = allowed[e] || e/g == b
				}
			}
		}
		chosen := topK(sel, allowed, k)
		w := weightsOf(row, chosen, c)
		for j := 0; j < k; j++ {
			r.indices[t*k+j], r.weights[t*k+j] = int32(chosen[j]), w[j]
			r.selected[chosen[j]]++
		}
		for e := range p {
			probSum[e] += p[e]
		}
		z += math.Pow(logsumexp64(row), 2)
	}
	for e := 0; e < E; e++ {
		r.aux += float64(r.selected[e]) / float64(T*k) * probSum[e] / float64(T)
	}
	r.aux *= float64(c.AuxLossCoeff) * float64(E)
	r.z = float64(c.ZLossCoeff) * z / float64(T)
	if c.Drop != DropNone {
		capacity := int(math.Ceil(float64(T*k) / float64(E) * c.CapacityFactor))
		for e := 0; e < E; e++ {
			var slots []int
			for i, x := range r.indices {
				if x == int32(e) {
					slots = append(slots, i)
				}
			}
			if c.Drop == DropByProbability {
				sort.SliceStable(slots, func(a, b int) bool { return r.weights[slots[a]] > r.weights[slots[b]] })
			}
			for n, i := range slots {
				if n >= capacity {
					r.indices[i], r.weights[i] = MoeDropped, 0
				}
			}
		}
	}
	for _, i := range r.indices {
		if i >= 0 {
			r.kept[i]++
		}
	}
	return r
}

type namedRouterConfig struct {
	name string
	cfg  RouterConfig
}

func routerConfigs() []namedRouterConfig {
	base := RouterConfig{Experts: 8, TopK: 2, CapacityFactor: 1}
	with := func(f func(c *RouterConfig)) RouterConfig { c := base; f(&c); return c }
	bias := make([]float32, 8)
	for e := range bias {
		bias[e] = 0.05*float32(e) - 0.2
	}
	return []namedRouterConfig{
		{"softmax top-2", base},
		{"softmax normalised + losses", with(func(c *RouterConfig) { c.Normalize, c.AuxLossCoeff, c.ZLossCoeff = true, 0.01, 0.001 })},
		{"top-k softmax k=3", with(func(c *RouterConfig) { c.Score, c.TopK, c.AuxLossCoeff = RouterTopkSoftmax, 3, 0.1 })},
		{"sigmoid + bias + groups", with(func(c *RouterConfig) {
			c.Score, c.Bias, c.Groups, c.TopKGroups, c.AuxLossCoeff = RouterSigmoid, bias, 4, 2, 0.02
		})},
		{"drop by position", with(func(c *RouterConfig) { c.Drop = DropByPosition })},
		{"drop by probability", with(func(c *RouterConfig) { c.Drop, c.CapacityFactor = DropByProbability, 0.75 })},
		{"top-1 softmax", with(func(c *RouterConfig) { c.TopK, c.ZLossCoeff = 1, 0.5 })},
	}
}

func TestMoeRouter(t *testing.T) {
	ck := newChecks(t, "moe router")
	for _, nc := range routerConfigs() {
		c := nc.cfg
		lg := moeLogits(13, c.Experts, uint64(len(nc.name)))
		got, err := Route(lg, &c)
		if err != nil {
			t.Fatalf("%s: Route: %v", nc.name, err)
		}
		want := routerReference(lg, &c)
		ck.equal(nc.name+": indices", got.Indices, want.indices, func(g any) any {
			v := append([]int32(nil), g.([]int32)...)
			v[0] = 1 + (v[0]+1)%2
			return v
		})
		wf := make([]float32, len(want.weights))
		for i, w := range want.weights {
			wf[i] = float32(w)
		}
		ck.allClose(nc.name+": weights", got.Weights, wf, 1e-5)
		bump := func(g any) any { v := append([]int64(nil), g.([]int64)...); v[0]++; return v }
		ck.equal(nc.name+": tokens per expert", got.TokensPerExpert, want.kept, bump)
		ck.equal(nc.name+": selected per expert", got.SelectedPerExpert, want.selected, bump)
		ck.close(nc.name+": aux loss", float64(got.AuxLoss), want.aux, 1e-5)
		ck.close(nc.name+": z loss", float64(got.ZLoss), want.z, 1e-5)
	}
	ck.finish()
}

// lossFixed is the loss RouterBackward differentiates, in float64, the selection fixed.
func lossFixed(lg []float64, c *RouterConfig, indices []int32, gw []float32, ga, gz float64) float64 {
	E, k := c.Experts, c.TopK
	T := len(lg) / E
	selected, probSum := make([]float64, E), make([]float64, E)
	for _, i := range indices {
		selected[i]++
	}
	l, z := 0.0, 0.0
	for t := 0; t < T; t++ {
		row := lg[t*E : (t+1)*E]
		sel := make([]int, k)
		for j := range sel {
			sel[j] = int(indices[t*k+j])
		}
		w := weightsOf(row, sel, c)
		for j := range w {
			l += float64(gw[t*k+j]) * w[j]
		}
		p, _ := probsAndScores(row, c.Score)
		for e := range p {
			probSum[e] += p[e]
		}
		z += math.Pow(logsumexp64(row), 2)
	}
	aux := 0.0
	for e := 0; e < E; e++ {
		aux += selected[e] / float64(T*k) * probSum[e] / float64(T)
	}
	return l + ga*float64(c.AuxLossCoeff)*float64(E)*aux + gz*float64(c.ZLossCoeff)*z/float64(T)
}

func TestMoeRouterBackward(t *testing.T) {
	ck := newChecks(t, "moe router backward")
	for _, nc := range routerConfigs() {
		c := nc.cfg
		if c.Drop != DropNone {
			continue
		}
		lg := moeLogits(5, c.Experts, 7+uint64(len(nc.name)))
		fwd, err := Route(lg, &c)
		must(t, err)
		gw := make([]float32, len(fwd.Indices))
		for i := range gw {
			gw[i] = 0.25*float32(i%5) - 0.5
		}
		got, err := RouterBackward(lg, &c, fwd.Indices, gw, 1.5, 0.75)
		if err != nil {
			t.Fatalf("%s: RouterBackward: %v", nc.name, err)
		}
		base := make([]float64, len(lg))
		for i, v := range lg {
			base[i] = float64(v)
		}
		const h = 1e-5
		want := make([]float32, len(lg))
		for i := range base {
			a, b := append([]float64(nil), base...), append([]float64(nil), base...)
			a[i] += h
			b[i] -= h
			want[i] = float32((lossFixed(a, &c, fwd.Indices, gw, 1.5, 0.75) - lossFixed(b, &c, fwd.Indices, gw, 1.5, 0.75)) / (2 * h))
		}
		ck.allClose(nc.name+": grad logits", got, want, 1e-4)
	}
	ck.finish()
}

func TestMoeUpdateBias(t *testing.T) {
	ck := newChecks(t, "moe update bias")
	bias := []float32{0.5, -0.25, 0, 1}
	// mean load 3: expert 0 under (+rate), 1 over (-rate), 2 at the mean (0), 3 under.
	must(t, UpdateBias(bias, []int64{1, 7, 3, 1}, 0.125))
	ck.allClose("bias", bias, []float32{0.625, -0.375, 0, 1.125}, 0)
	ck.finish()
}

func TestMoeLayout(t *testing.T) {
	ck := newChecks(t, "moe layout")
	const E, k, ranks, T = 7, 3, 3, 11
	s := uint64(12345)
	indices := make([]int32, T*k)
	for i := range indices {
		s = s*6364136223846793005 + 1442695040888963407
		indices[i] = int32((s >> 33) % E)
		if i%5 == 4 {
			indices[i] = MoeDropped
		}
	}
	for _, placement := range []struct {
		name string
		er   []int32
	}{{"blocks", nil}, {"explicit", []int32{2, 0, 1, 1, 0, 2, 0}}} {
		rankOf := func(e int32) int {
			if placement.er != nil {
				return int(placement.er[e])
			}
			return int(e) / 3 // torch.chunk's rule: c = ceil(7 / 3) = 3
		}
		perRank, perExpert, inRank := make([]int64, ranks), make([]int64, E), make([]uint8, T*ranks)
		for t := 0; t < T; t++ {
			for j := 0; j < k; j++ {
				if i := indices[t*k+j]; i >= 0 {
					perExpert[i]++
					inRank[t*ranks+rankOf(i)] = 1
				}
			}
			for r := 0; r < ranks; r++ {
				perRank[r] += int64(inRank[t*ranks+r])
			}
		}
		got, err := MoeLayout(indices, k, E, ranks, placement.er)
		if err != nil {
			t.Fatalf("%s: MoeLayout: %v", placement.name, err)
		}
		bump := func(g any) any { v := append([]int64(nil), g.([]int64)...); v[0]++; return v }
		ck.equal(placement.name+": tokens per rank", got.TokensPerRank, perRank, bump)
		ck.equal(placement.name+": tokens per expert", got.TokensPerExpert, perExpert, bump)
		ck.equal(placement.name+": token in rank", got.TokenInRank, inRank, func(g any) any {
			v := append([]uint8(nil), g.([]uint8)...)
			v[0] ^= 1
			return v
		})
	}
	ck.finish()
}

func TestMoeRefusals(t *testing.T) {
	ck := newChecks(t, "moe refusals")
	lg := moeLogits(4, 8, 1)
	_, err := Route(lg, &RouterConfig{Experts: 8, TopK: 9})
	ck.holds("k > E: InvalidArgument", errors.Is(err, ErrInvalidArgument))
	ck.contains("k > E: message", fmt.Sprint(err), "9")
	_, err = Route(lg, &RouterConfig{Experts: 8, TopK: 2, Groups: 3, TopKGroups: 1})
	ck.holds("groups not dividing E: InvalidArgument", errors.Is(err, ErrInvalidArgument))
	_, err = MoeLayout([]int32{0, 9, 1, 2}, 2, 8, 2, nil)
	ck.holds("layout index >= E: InvalidArgument", errors.Is(err, ErrInvalidArgument))
	ck.contains("layout index >= E: message", fmt.Sprint(err), "9")
	_, err = Route(lg[:5], &RouterConfig{Experts: 8, TopK: 2})
	ck.contains("logits shape: message", fmt.Sprint(err), "multiple of Experts")
	ck.finish()
}
