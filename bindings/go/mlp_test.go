package weft

import "math"

// The small model of the training tests: a two-layer MLP (tanh between the layers) with a
// mean-squared-error loss, forward and backward written out by hand in float32, and a plain
// optimizer (torch.optim's AdamW and SGD with momentum, per element) written independently of
// weft's. Single-process training with these is the reference every parallel run must equal.

const (
	mlpIn, mlpHidden, mlpOut = 5, 7, 3 // odd: no parameter divides by 2 or 3 ranks
	mlpBatch                 = 12      // divides by 1, 2, 3 and 4 ranks
)

// W1, b1, W2, b2 (row-major, W as (out, in)).
var (
	mlpShapes = [][]int{{mlpHidden, mlpIn}, {mlpHidden}, {mlpOut, mlpHidden}, {mlpOut}}
	mlpNames  = []string{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
)

type params [][]float32

func uniform(s *uint32) float32 {
	*s = *s*1664525 + 1013904223
	return float32(int32(*s>>9)-(1<<22)) / float32(1<<22)
}

func mlpCount(p int) int { return product(mlpShapes[p]) }

func mlpInit(seed uint32) params {
	s := seed
	out := make(params, 4)
	for p := range out {
		fanIn := float32(mlpIn)
		if p >= 2 {
			fanIn = mlpHidden
		}
		out[p] = make([]float32, mlpCount(p))
		for i := range out[p] {
			out[p][i] = uniform(&s) / float32(math.Sqrt(float64(fanIn)))
		}
	}
	return out
}

// mlpBatchOf is the batch of step step: mlpBatch rows of inputs and targets.
func mlpBatchOf(step int) (x, y []float32) {
	s := uint32(1000 + step*7919)
	x = make([]float32, mlpBatch*mlpIn)
	for i := range x {
		x[i] = uniform(&s)
	}
	y = make([]float32, mlpBatch*mlpOut)
	for r := 0; r < mlpBatch; r++ {
		for j := 0; j < mlpOut; j++ {
			var t float32
			for k := 0; k < mlpIn; k++ {
				t += float32(math.Sin(float64(float32(j+1) * x[r*mlpIn+k])))
			}
			y[r*mlpOut+j] = 0.3 * t
		}
	}
	return x, y
}

type acts struct {
	row0, rows int
	x, h, out  []float32
}

func mlpForward(p params, x []float32, row0, rows int) acts {
	a := acts{row0: row0, rows: rows, x: x[row0*mlpIn : (row0+rows)*mlpIn],
		h: make([]float32, rows*mlpHidden), out: make([]float32, rows*mlpOut)}
	for r := 0; r < rows; r++ {
		for o := 0; o < mlpHidden; o++ {
			z := p[1][o]
			for i := 0; i < mlpIn; i++ {
				z += p[0][o*mlpIn+i] * a.x[r*mlpIn+i]
			}
			a.h[r*mlpHidden+o] = float32(math.Tanh(float64(z)))
		}
		for o := 0; o < mlpOut; o++ {
			z := p[3][o]
			for i := 0; i < mlpHidden; i++ {
				z += p[2][o*mlpHidden+i] * a.h[r*mlpHidden+i]
			}
			a.out[r*mlpOut+o] = z
		}
	}
	return a
}

// mlpBackward: loss = sum over the rows of 0.5 * |out - y|^2 / divisor. Hands each gradient to
// emit(param index, gradient) as soon as it is final, in backward's order: W2, b2, W1, b1.
func mlpBackward(p params, a acts, y []float32, divisor float32, emit func(p int, g []float32)) {
	rows := a.rows
	d := make([]float32, rows*mlpOut)
	for r := 0; r < rows; r++ {
		for j := 0; j < mlpOut; j++ {
			d[r*mlpOut+j] = (a.out[r*mlpOut+j] - y[(a.row0+r)*mlpOut+j]) / divisor
		}
	}
	gw2, gb2 := make([]float32, mlpOut*mlpHidden), make([]float32, mlpOut)
	for r := 0; r < rows; r++ {
		for o := 0; o < mlpOut; o++ {
			gb2[o] += d[r*mlpOut+o]
			for i := 0; i < mlpHidden; i++ {
				gw2[o*mlpHidden+i] += d[r*mlpOut+o] * a.h[r*mlpHidden+i]
			}
		}
	}
	emit(2, gw2)
	emit(3, gb2)
	dh := make([]float32, rows*mlpHidden)
	for r := 0; r < rows; r++ {
		for i := 0; i < mlpHidden; i++ {
			var s float32
			for o := 0; o < mlpOut; o++ {
				s += p[2][o*mlpHidden+i] * d[r*mlpOut+o]
			}
			act := a.h[r*mlpHidden+i]
			dh[r*mlpHidden+i] = s * (1 - act*act)
		}
	}
	gw1, gb1 := make([]float32, mlpHidden*mlpIn), make([]float32, mlpHidden)
	for r := 0; r < rows; r++ {
		for o := 0; o < mlpHidden; o++ {
			gb1[o] += dh[r*mlpHidden+o]
			for i := 0; i < mlpIn; i++ {
				gw1[o*mlpIn+i] += dh[r*mlpHidden+o] * a.x[r*mlpIn+i]
			}
		}
	}
	emit(0, gw1)
	emit(1, gb1)
}

// refOpt is torch.optim.AdamW (adamw) or SGD with momentum and L2 weight decay, in float32.
type refOpt struct {
	adamw                                        bool
	lr, momentum, beta1, beta2, eps, weightDecay float32
	t                                            int
	m, v                                         params
}

func refAdamW(lr float32) *refOpt {
	return &refOpt{adamw: true, lr: lr, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01}
}

func refSGD(lr, momentum float32) *refOpt {
	o := refAdamW(lr)
	o.adamw, o.momentum = false, momentum
	return o
}

func (o *refOpt) step(p, g params) {
	o.t++
	if o.m == nil {
		o.m, o.v = make(params, len(p)), make(params, len(p))
		for i := range p {
			o.m[i], o.v[i] = make([]float32, len(p[i])), make([]float32, len(p[i]))
		}
	}
	bc1 := 1 - math.Pow(float64(o.beta1), float64(o.t))
	bc2 := 1 - math.Pow(float64(o.beta2), float64(o.t))
	for i := range p {
		for k := range p[i] {
			gr := g[i][k]
			if !o.adamw {
				gr += o.weightDecay * p[i][k]
				if o.t == 1 {
					o.m[i][k] = gr
				} else {
					o.m[i][k] = o.momentum*o.m[i][k] + gr
				}
				p[i][k] -= o.lr * o.m[i][k]
				continue
			}
			p[i][k] *= float32(1 - float64(o.lr)*float64(o.weightDecay))
			o.m[i][k] += (gr - o.m[i][k]) * (1 - o.beta1)
			o.v[i][k] = o.v[i][k]*o.beta2 + gr*gr*(1-o.beta2)
			denom := float32(math.Sqrt(float64(o.v[i][k])))/float32(math.Sqrt(bc2)) + o.eps
			p[i][k] -= float32(float64(o.lr)/bc1) * (o.m[i][k] / denom)
		}
	}
}

// mlpReference trains on the whole batch in one process for steps steps.
func mlpReference(steps int, opt *refOpt) params {
	p := mlpInit(7)
	for step := 0; step < steps; step++ {
		x, y := mlpBatchOf(step)
		a := mlpForward(p, x, 0, mlpBatch)
		g := make(params, 4)
		mlpBackward(p, a, y, mlpBatch, func(q int, v []float32) { g[q] = append([]float32(nil), v...) })
		opt.step(p, g)
	}
	return p
}

// relErr is max |a - b| / max |b| (the difference itself when b is all zero).
func relErr(a, b []float32) float64 {
	diff, scale := 0.0, 0.0
	for i := range b {
		diff = math.Max(diff, math.Abs(float64(a[i])-float64(b[i])))
		scale = math.Max(scale, math.Abs(float64(b[i])))
	}
	if scale == 0 {
		return diff
	}
	return diff / scale
}
