package weft

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
)

// TestMoeMultiRank re-runs this test binary under `weftrun -n 3` with WEFT_GO_MOE_CHILD=1; each
// rank then dispatches its tokens (5 experts over 3 ranks: blocks of 2, 2, 1; top-2 with some
// slots dropped; a different T per rank, one case with T = 0 on rank 1; then an explicit
// placement with each local expert's rows padded to a multiple of 4), applies a per-row
// expert function written here to the received rows and combines; everything is compared
// bitwise (float32) with the same computation done here in one process from moe.h's rules: the
// received rows (expert-major, then source rank, token, slot), counts and offsets, the weighted
// and unweighted combine, and MoeCombineBackward's gradients. Then an expert index >= E on rank
// 1 must be refused (InvalidArgument naming the token there, an error on every rank).
// WEFT_TEST_INJECT=1: every check corrupts its value and must fail.
func TestMoeMultiRank(t *testing.T) {
	if os.Getenv("WEFT_GO_MOE_CHILD") != "" {
		moeChild(t)
		return
	}
	runUnderWeftrun(t, 3, "TestMoeMultiRank", "WEFT_GO_MOE_CHILD")
}

const (
	moeRanks   = 3
	moeExperts = 5
	moeHidden  = 4
	moeTopK    = 2
)

type moeInputs struct {
	x       []float32
	indices []int32
	weights []float32
}

func moeInputsOf(rank, tokens int) moeInputs {
	in := moeInputs{x: make([]float32, tokens*moeHidden)}
	for i := range in.x {
		in.x[i] = float32(rank*100+i)*0.125 - 3
	}
	for t := 0; t < tokens; t++ {
		a := (rank*3 + t*2) % moeExperts
		b := int32((a + 1 + (t+rank)%(moeExperts-1)) % moeExperts)
		wb := 0.25 + 0.03125*float32(rank)
		if (t+rank)%4 == 3 { // every fourth token drops its second slot
			b, wb = MoeDropped, 0
		}
		in.indices = append(in.indices, int32(a), b)
		in.weights = append(in.weights, 0.75-0.0625*float32(t), wb)
	}
	return in
}

func moeExpertFn(e int32, row []float32) []float32 {
	out := make([]float32, len(row))
	for h, v := range row {
		out[h] = v*(float32(e)+1) - 0.5*float32(h)
	}
	return out
}

func moeGradOut(rank, tokens int) []float32 {
	g := make([]float32, tokens*moeHidden)
	for i := range g {
		g[i] = 1 - float32(rank*7+i)*0.0625
	}
	return g
}

// moePlacement: where the experts sit (nil: torch.chunk's rule, c = ceil(5 / 3) = 2: rank 0
// holds 0-1, rank 1 holds 2-3, rank 2 holds 4) and the row alignment.
type moePlacement struct {
	expertRank []int32
	alignment  int
}

func (p moePlacement) rankOf(e int32) int {
	if p.expertRank != nil {
		return int(p.expertRank[e])
	}
	return int(e) / 2
}

type moeRow struct {
	Expert, SourceRank int32
	SourceToken        int64
	Weight             float32
	Data               []float32
}

func moeChild(t *testing.T) {
	c, err := InitFromEnv(nil)
	must(t, err)
	defer c.Close()
	ck := newChecks(t, fmt.Sprintf("moe multirank rank %d", c.Rank()))
	m, err := NewMoe(c, &MoeConfig{Experts: moeExperts, Hidden: moeHidden, Dtype: DtypeFloat32})
	must(t, err)
	blocks := moePlacement{}
	moeCase(t, c, m, blocks, "T = 5, 2, 4", []int{5, 2, 4}, ck)
	moeCase(t, c, m, blocks, "T = 3, 0, 6", []int{3, 0, 6}, ck)
	moeBadInput(c, m, ck)
	must(t, m.Close())
	// Explicit placement (rank 0 holds experts 2 and 4, rank 1 experts 1 and 3, rank 2 expert 0)
	// and each local expert's rows padded to a multiple of 4.
	placed := moePlacement{expertRank: []int32{2, 1, 0, 1, 0}, alignment: 4}
	m, err = NewMoe(c, &MoeConfig{Experts: moeExperts, Hidden: moeHidden, Dtype: DtypeFloat32,
		ExpertRank: placed.expertRank, ExpertAlignment: placed.alignment})
	must(t, err)
	moeCase(t, c, m, placed, "placed, aligned to 4, T = 5, 2, 4", []int{5, 2, 4}, ck)
	must(t, m.Close())
	must(t, c.Barrier())
	ck.finish()
}

func f32bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

func flipFirstBit(g any) any {
	v := append([]uint32(nil), g.([]uint32)...)
	if len(v) == 0 {
		return append(v, 0)
	}
	v[0] ^= 1
	return v
}

func moeCase(t *testing.T, c *Comm, m *Moe, place moePlacement, name string, tokens []int, ck *checks) {
	rank := c.Rank()
	all := make([]moeInputs, moeRanks)
	for r := range all {
		all[r] = moeInputsOf(r, tokens[r])
	}
	me := all[rank]
	h, err := MoeDispatch(m, me.x, me.indices, me.weights, moeTopK)
	if err != nil {
		t.Fatalf("%s: dispatch: %v", name, err)
	}
	defer h.Close()

	// Per local expert its rows by source rank, token, slot; then padding (no expert, weight 0,
	// zeros; its source is not specified, so it is masked in what was received).
	local := []int32{}
	for e := int32(0); e < moeExperts; e++ {
		if place.rankOf(e) == rank {
			local = append(local, e)
		}
	}
	wantRows, counts, offsets := []moeRow{}, []int64{}, []int64{0}
	for _, e := range local {
		n := len(wantRows)
		for r, in := range all {
			for tk := 0; tk < tokens[r]; tk++ {
				for j := 0; j < moeTopK; j++ {
					if in.indices[tk*moeTopK+j] == e {
						wantRows = append(wantRows, moeRow{e, int32(r), int64(tk), in.weights[tk*moeTopK+j],
							in.x[tk*moeHidden : (tk+1)*moeHidden]})
					}
				}
			}
		}
		counts = append(counts, int64(len(wantRows)-n))
		for place.alignment > 1 && len(wantRows)%place.alignment != 0 {
			wantRows = append(wantRows, moeRow{-1, -1, -1, 0, make([]float32, moeHidden)})
		}
		offsets = append(offsets, int64(len(wantRows)))
	}
	data, err := MoeReceivedTokens[float32](h)
	must(t, err)
	gotRows := []moeRow{}
	for i := 0; i < h.Rows; i++ {
		row := moeRow{h.RowExpert[i], h.RowSourceRank[i], h.RowSourceToken[i], h.RowWeight[i],
			data[i*moeHidden : (i+1)*moeHidden]}
		if row.Expert < 0 {
			row.SourceRank, row.SourceToken = -1, -1
		}
		gotRows = append(gotRows, row)
	}
	ck.equal(name+": local experts", h.LocalExperts, local, func(g any) any { return append(g.([]int32), 9) })
	ck.equal(name+": counts", h.Counts, counts, func(g any) any { return append(g.([]int64), 1) })
	ck.equal(name+": offsets", h.Offsets, offsets, func(g any) any { return append(g.([]int64), 1) })
	ck.equal(name+": received rows", gotRows, wantRows, func(g any) any {
		return append(g.([]moeRow), moeRow{Data: make([]float32, moeHidden)})
	})

	// Padding rows' outputs are huge: combine must ignore them.
	expertOut := []float32{}
	for _, r := range gotRows {
		if r.Expert < 0 {
			expertOut = append(expertOut, 1e30, 1e30, 1e30, 1e30)
			continue
		}
		expertOut = append(expertOut, moeExpertFn(r.Expert, r.Data)...)
	}
	out, plain := make([]float32, tokens[rank]*moeHidden), make([]float32, tokens[rank]*moeHidden)
	must(t, MoeCombine(m, h, expertOut, true, out))
	must(t, MoeCombine(m, h, expertOut, false, plain))
	gout := moeGradOut(rank, tokens[rank])
	gexp, gw := make([]float32, len(expertOut)), make([]float32, tokens[rank]*moeTopK)
	must(t, MoeCombineBackward(m, h, gout, gexp, gw))

	wOut, wPlain, wGw := make([]float32, len(out)), make([]float32, len(out)), make([]float32, len(gw))
	for tk := 0; tk < tokens[rank]; tk++ {
		x := me.x[tk*moeHidden : (tk+1)*moeHidden]
		for j := 0; j < moeTopK; j++ {
			e := me.indices[tk*moeTopK+j]
			if e == MoeDropped {
				continue
			}
			y, w := moeExpertFn(e, x), me.weights[tk*moeTopK+j]
			var dot float32
			for k := 0; k < moeHidden; k++ {
				wOut[tk*moeHidden+k] += float32(w * y[k]) // float32(...) keeps Go from fusing
				wPlain[tk*moeHidden+k] += y[k]
				dot += float32(gout[tk*moeHidden+k] * y[k])
			}
			wGw[tk*moeTopK+j] = dot
		}
	}
	wGexp := []float32{}
	for _, r := range gotRows {
		if r.Expert < 0 {
			wGexp = append(wGexp, make([]float32, moeHidden)...)
			continue
		}
		g := moeGradOut(int(r.SourceRank), tokens[r.SourceRank])
		for k := 0; k < moeHidden; k++ {
			wGexp = append(wGexp, r.Weight*g[int(r.SourceToken)*moeHidden+k])
		}
	}
	ck.equal(name+": weighted combine (bits)", f32bits(out), f32bits(wOut), flipFirstBit)
	ck.equal(name+": unweighted combine (bits)", f32bits(plain), f32bits(wPlain), flipFirstBit)
	ck.equal(name+": grad expert out (bits)", f32bits(gexp), f32bits(wGexp), flipFirstBit)
	ck.equal(name+": grad weights (bits)", f32bits(gw), f32bits(wGw), flipFirstBit)
}

func moeBadInput(c *Comm, m *Moe, ck *checks) {
	rank := c.Rank()
	in := moeInputsOf(rank, 3)
	if rank == 1 {
		in.indices[2*moeTopK] = moeExperts // token 2, slot 0: one past the last expert
	}
	h, err := MoeDispatch(m, in.x, in.indices, in.weights, moeTopK)
	if err == nil {
		h.Close()
		ck.holds(fmt.Sprintf("bad index: dispatch on rank %d must fail", rank), false)
		return
	}
	if rank == 1 {
		ck.holds("bad index: InvalidArgument", errors.Is(err, ErrInvalidArgument))
		ck.contains("bad index: message names the token", err.Error(), "token 2")
	} else {
		ck.holds(fmt.Sprintf("bad index: rank %d told of the failure (%v)", rank, err), err.Error() != "")
	}
}
