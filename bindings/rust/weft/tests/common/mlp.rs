//! The small model of the training tests: a two-layer MLP (tanh between the layers) with a
//! mean-squared-error loss, forward and backward written out by hand in f32, and a plain
//! optimizer (torch.optim's AdamW and SGD with momentum, per element) written independently of
//! weft's. Single-process training with these is the reference every parallel run must equal.
#![allow(dead_code)]

/// Layer sizes: odd, so no parameter divides by 2 or 3 ranks.
pub const IN: usize = 5;
pub const HIDDEN: usize = 7;
pub const OUT: usize = 3;
/// Divides by 1, 2, 3 and 4 data-parallel ranks.
pub const BATCH: usize = 12;

/// W1, b1, W2, b2 (row-major, W as (out, in)).
pub const SHAPES: [&[usize]; 4] = [&[HIDDEN, IN], &[HIDDEN], &[OUT, HIDDEN], &[OUT]];
pub const NAMES: [&str; 4] = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"];

pub type Params = Vec<Vec<f32>>;

fn uniform(s: &mut u32) -> f32 {
    *s = s.wrapping_mul(1664525).wrapping_add(1013904223);
    ((*s >> 9) as i32 - (1 << 22)) as f32 / (1 << 22) as f32
}

pub fn count(p: usize) -> usize {
    SHAPES[p].iter().product()
}

pub fn init_params(seed: u32) -> Params {
    let mut s = seed;
    (0..4)
        .map(|p| {
            let fan_in = if p < 2 { IN } else { HIDDEN } as f32;
            (0..count(p)).map(|_| uniform(&mut s) / fan_in.sqrt()).collect()
        })
        .collect()
}

/// The batch of step `step`: BATCH rows of inputs (IN) and targets (OUT).
pub fn batch(step: usize) -> (Vec<f32>, Vec<f32>) {
    let mut s = 1000 + step as u32 * 7919;
    let x: Vec<f32> = (0..BATCH * IN).map(|_| uniform(&mut s)).collect();
    let mut y = vec![0f32; BATCH * OUT];
    for r in 0..BATCH {
        for j in 0..OUT {
            y[r * OUT + j] = 0.3 * (0..IN).map(|k| ((j + 1) as f32 * x[r * IN + k]).sin()).sum::<f32>();
        }
    }
    (x, y)
}

/// Activations of rows [row0, row0 + rows) of a batch.
pub struct Acts {
    pub row0: usize,
    pub rows: usize,
    pub x: Vec<f32>,
    pub h: Vec<f32>,
    pub out: Vec<f32>,
}

pub fn forward(p: &[Vec<f32>], x: &[f32], row0: usize, rows: usize) -> Acts {
    let x = x[row0 * IN..(row0 + rows) * IN].to_vec();
    let mut h = vec![0f32; rows * HIDDEN];
    let mut out = vec![0f32; rows * OUT];
    for r in 0..rows {
        for o in 0..HIDDEN {
            let mut z = p[1][o];
            for i in 0..IN {
                z += p[0][o * IN + i] * x[r * IN + i];
            }
            h[r * HIDDEN + o] = z.tanh();
        }
        for o in 0..OUT {
            let mut z = p[3][o];
            for i in 0..HIDDEN {
                z += p[2][o * HIDDEN + i] * h[r * HIDDEN + i];
            }
            out[r * OUT + o] = z;
        }
    }
    Acts { row0, rows, x, h, out }
}

/// Backward of loss = sum over the rows of 0.5 * |out - y|^2 / divisor. Hands each gradient to
/// `emit(param index, gradient)` as soon as it is final, in backward's order: W2, b2, W1, b1.
pub fn backward(p: &[Vec<f32>], a: &Acts, y: &[f32], divisor: f32, mut emit: impl FnMut(usize, &[f32])) {
    let rows = a.rows;
    let mut d = vec![0f32; rows * OUT];
    for r in 0..rows {
        for j in 0..OUT {
            d[r * OUT + j] = (a.out[r * OUT + j] - y[(a.row0 + r) * OUT + j]) / divisor;
        }
    }
    let (mut gw2, mut gb2) = (vec![0f32; OUT * HIDDEN], vec![0f32; OUT]);
    for r in 0..rows {
        for o in 0..OUT {
            gb2[o] += d[r * OUT + o];
            for i in 0..HIDDEN {
                gw2[o * HIDDEN + i] += d[r * OUT + o] * a.h[r * HIDDEN + i];
            }
        }
    }
    emit(2, &gw2);
    emit(3, &gb2);
    let mut dh = vec![0f32; rows * HIDDEN];
    for r in 0..rows {
        for i in 0..HIDDEN {
            let mut s = 0f32;
            for o in 0..OUT {
                s += p[2][o * HIDDEN + i] * d[r * OUT + o];
            }
            let act = a.h[r * HIDDEN + i];
            dh[r * HIDDEN + i] = s * (1.0 - act * act);
        }
    }
    let (mut gw1, mut gb1) = (vec![0f32; HIDDEN * IN], vec![0f32; HIDDEN]);
    for r in 0..rows {
        for o in 0..HIDDEN {
            gb1[o] += dh[r * HIDDEN + o];
            for i in 0..IN {
                gw1[o * IN + i] += dh[r * HIDDEN + o] * a.x[r * IN + i];
            }
        }
    }
    emit(0, &gw1);
    emit(1, &gb1);
}

/// torch.optim.AdamW (adamw = true) or SGD with momentum and L2 weight decay, per element in f32.
#[derive(Clone)]
pub struct RefOpt {
    pub adamw: bool,
    pub lr: f32,
    pub momentum: f32,
    pub beta1: f32,
    pub beta2: f32,
    pub eps: f32,
    pub weight_decay: f32,
    t: i32,
    m: Params,
    v: Params,
}

impl RefOpt {
    pub fn adamw(lr: f32) -> RefOpt {
        RefOpt {
            adamw: true,
            lr,
            momentum: 0.0,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
            t: 0,
            m: Vec::new(),
            v: Vec::new(),
        }
    }

    pub fn sgd(lr: f32, momentum: f32) -> RefOpt {
        RefOpt { adamw: false, momentum, ..RefOpt::adamw(lr) }
    }

    pub fn step(&mut self, p: &mut Params, g: &Params) {
        self.t += 1;
        if self.m.is_empty() {
            self.m = p.iter().map(|x| vec![0f32; x.len()]).collect();
            self.v = self.m.clone();
        }
        let bc1 = 1.0 - (self.beta1 as f64).powi(self.t);
        let bc2 = 1.0 - (self.beta2 as f64).powi(self.t);
        for i in 0..p.len() {
            for k in 0..p[i].len() {
                let (w, m, v) = (&mut p[i][k], &mut self.m[i][k], &mut self.v[i][k]);
                let mut gr = g[i][k];
                if !self.adamw {
                    gr += self.weight_decay * *w;
                    *m = if self.t == 1 { gr } else { self.momentum * *m + gr };
                    *w -= self.lr * *m;
                    continue;
                }
                *w *= (1.0 - self.lr as f64 * self.weight_decay as f64) as f32;
                *m += (gr - *m) * (1.0 - self.beta1);
                *v = *v * self.beta2 + gr * gr * (1.0 - self.beta2);
                let denom = v.sqrt() / (bc2.sqrt() as f32) + self.eps;
                *w -= (self.lr as f64 / bc1) as f32 * (*m / denom);
            }
        }
    }
}

/// One process training on the whole batch for `steps` steps.
pub fn reference(steps: usize, mut opt: RefOpt) -> Params {
    let mut p = init_params(7);
    for step in 0..steps {
        let (x, y) = batch(step);
        let a = forward(&p, &x, 0, BATCH);
        let mut g: Params = (0..4).map(|q| vec![0f32; count(q)]).collect();
        backward(&p, &a, &y, BATCH as f32, |q, v| g[q].copy_from_slice(v));
        opt.step(&mut p, &g);
    }
    p
}

/// max |a - b| / max |b| (0 when both are all zero).
pub fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let diff = a.iter().zip(b).map(|(x, y)| (*x as f64 - *y as f64).abs()).fold(0.0, f64::max);
    let scale = b.iter().map(|y| (*y as f64).abs()).fold(0.0, f64::max);
    if scale == 0.0 {
        diff
    } else {
        diff / scale
    }
}
