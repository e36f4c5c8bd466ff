//! The small model of the pipeline tests and the framework side of the executor: stage s maps a
//! vector x of WIDTH floats to tanh(a_s * x + c_s) (two scalar parameters per stage), the last
//! stage's output meets a target in a squared-error loss. [`reference`] runs every micro-batch
//! through all stages in one process, written out by hand; [`FrameworkState`] + [`callbacks`]
//! are the same computation cut into the stage callbacks a Pipeline calls, keeping what the
//! backward needs between calls as a framework would.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use weft::{ActionKind, Callbacks, StageCall};

/// Elements of every stage boundary (shape [WIDTH], f32).
pub const WIDTH: usize = 4;

/// Stage s's parameters (a_s, c_s).
pub fn params(s: usize) -> (f32, f32) {
    (0.6 + 0.15 * (s % 5) as f32, 0.05 * s as f32 - 0.1)
}

/// Stage 0's input of micro-batch i.
pub fn data(i: usize) -> Vec<f32> {
    (0..WIDTH).map(|k| ((i * 3 + k * 5) % 7) as f32 / 7.0 - 0.4).collect()
}

/// The target of micro-batch i.
pub fn target(i: usize) -> Vec<f32> {
    (0..WIDTH).map(|k| ((i + 2 * k) % 5) as f32 / 10.0 - 0.2).collect()
}

pub fn forward(s: usize, x: &[f32]) -> Vec<f32> {
    let (a, c) = params(s);
    x.iter().map(|&v| (a * v + c).tanh()).collect()
}

/// The gradient w.r.t. the pre-activation, from the output y and the output gradient g.
pub fn pre_grad(y: &[f32], g: &[f32]) -> Vec<f32> {
    y.iter().zip(g).map(|(&y, &g)| g * (1.0 - y * y)).collect()
}

/// The last stage's loss 0.5 * sum (y - t)^2 and its gradient y - t.
pub fn loss(i: usize, y: &[f32]) -> (f64, Vec<f32>) {
    let t = target(i);
    let g: Vec<f32> = y.iter().zip(&t).map(|(&y, &t)| y - t).collect();
    (g.iter().map(|&d| 0.5 * (d as f64) * (d as f64)).sum(), g)
}

/// What the one-process computation gives: per-micro-batch loss, each stage's input per
/// micro-batch, and the gradients of (a_s, c_s) summed over the micro-batches.
pub struct Reference {
    pub losses: Vec<f64>,
    pub inputs: HashMap<(usize, usize), Vec<f32>>,
    pub grad_a: Vec<f32>,
    pub grad_c: Vec<f32>,
}

pub fn reference(stages: usize, microbatches: usize) -> Reference {
    let mut r =
        Reference { losses: Vec::new(), inputs: HashMap::new(), grad_a: vec![0.0; stages], grad_c: vec![0.0; stages] };
    for i in 0..microbatches {
        let mut xs = vec![data(i)];
        for s in 0..stages {
            r.inputs.insert((s, i), xs[s].clone());
            let y = forward(s, &xs[s]);
            xs.push(y);
        }
        let (l, mut g) = loss(i, &xs[stages]);
        r.losses.push(l);
        for s in (0..stages).rev() {
            let gp = pre_grad(&xs[s + 1], &g);
            r.grad_a[s] += gp.iter().zip(&xs[s]).map(|(g, x)| g * x).sum::<f32>();
            r.grad_c[s] += gp.iter().sum::<f32>();
            g = gp.iter().map(|&v| params(s).0 * v).collect();
        }
    }
    r
}

/// A framework's memory between callbacks, and what the test reads afterwards.
#[derive(Default)]
pub struct FrameworkState {
    pub stages: usize,
    pub microbatches: usize,
    /// x and y of (stage, micro-batch), from its forward until its backward is done.
    inputs: HashMap<(usize, usize), Vec<f32>>,
    outputs: HashMap<(usize, usize), Vec<f32>>,
    /// The pre-activation gradient an I keeps for its W.
    pending: HashMap<(usize, usize), Vec<f32>>,
    /// Each stage's input as its forward saw it (for the comparison with the reference).
    pub seen_inputs: HashMap<(usize, usize), Vec<f32>>,
    pub losses: HashMap<usize, f64>,
    pub grad_a: Vec<f32>,
    pub grad_c: Vec<f32>,
    /// Per stage: finished backwards (B, or W after I), and REDUCE_GRAD calls with the number of
    /// finished backwards at that moment.
    pub backwards_done: Vec<usize>,
    pub reduce_calls: Vec<Vec<usize>>,
    pub calls: usize,
}

impl FrameworkState {
    pub fn new(stages: usize, microbatches: usize) -> Rc<RefCell<FrameworkState>> {
        Rc::new(RefCell::new(FrameworkState {
            stages,
            microbatches,
            grad_a: vec![0.0; stages],
            grad_c: vec![0.0; stages],
            backwards_done: vec![0; stages],
            reduce_calls: vec![Vec::new(); stages],
            ..FrameworkState::default()
        }))
    }

    fn forward(&mut self, call: &mut StageCall<'_>) -> Result<(), String> {
        let (s, i) = (call.stage(), call.microbatch().ok_or("F without a micro-batch")?);
        let x = match call.input::<f32>()? {
            Some(x) => x.to_vec(),
            None if s == 0 => data(i),
            None => return Err(format!("F({s}, {i}): no input on a stage after the first")),
        };
        let y = forward(s, &x);
        match call.output::<f32>()? {
            Some(out) if out.len() == y.len() => out.copy_from_slice(&y),
            Some(out) => return Err(format!("F({s}, {i}): output of {} elements, expected {}", out.len(), y.len())),
            None if s + 1 == self.stages => {
                self.losses.insert(i, loss(i, &y).0);
            }
            None => return Err(format!("F({s}, {i}): no output on a stage before the last")),
        }
        self.seen_inputs.insert((s, i), x.clone());
        self.inputs.insert((s, i), x);
        self.outputs.insert((s, i), y);
        Ok(())
    }

    /// B or I: the pre-activation gradient, with the input gradient written to the output.
    fn backward_input(&mut self, call: &mut StageCall<'_>) -> Result<Vec<f32>, String> {
        let (s, i) = (call.stage(), call.microbatch().ok_or("backward without a micro-batch")?);
        let y = self.outputs.remove(&(s, i)).ok_or_else(|| format!("backward of ({s}, {i}) before its forward"))?;
        let g = match call.input::<f32>()? {
            Some(g) => g.to_vec(),
            None if s + 1 == self.stages => loss(i, &y).1,
            None => return Err(format!("backward ({s}, {i}): no output gradient on a stage before the last")),
        };
        let gp = pre_grad(&y, &g);
        let a = params(s).0;
        match call.output::<f32>()? {
            Some(out) => out.iter_mut().zip(&gp).for_each(|(o, &v)| *o = a * v),
            None if s == 0 => {}
            None => return Err(format!("backward ({s}, {i}): no input gradient buffer after stage 0")),
        }
        Ok(gp)
    }

    fn backward_weight(&mut self, s: usize, i: usize, gp: &[f32]) -> Result<(), String> {
        let x =
            self.inputs.remove(&(s, i)).ok_or_else(|| format!("weight gradient of ({s}, {i}) without its input"))?;
        self.grad_a[s] += gp.iter().zip(&x).map(|(g, x)| g * x).sum::<f32>();
        self.grad_c[s] += gp.iter().sum::<f32>();
        self.backwards_done[s] += 1;
        Ok(())
    }

    /// One callback of any kind.
    pub fn call(&mut self, call: &mut StageCall<'_>) -> Result<(), String> {
        self.calls += 1;
        let s = call.stage();
        if s >= self.stages {
            return Err(format!("a call for stage {s} of {}", self.stages));
        }
        match call.kind() {
            ActionKind::F => self.forward(call),
            ActionKind::B => {
                let gp = self.backward_input(call)?;
                self.backward_weight(s, call.microbatch().unwrap_or(0), &gp)
            }
            ActionKind::I => {
                let gp = self.backward_input(call)?;
                self.pending.insert((s, call.microbatch().unwrap_or(0)), gp);
                Ok(())
            }
            ActionKind::W => {
                let i = call.microbatch().ok_or("W without a micro-batch")?;
                if call.input_info().is_some() || call.output_info().is_some() {
                    return Err(format!("W({s}, {i}) was given buffers"));
                }
                let gp = self.pending.remove(&(s, i)).ok_or_else(|| format!("W({s}, {i}) before its I"))?;
                self.backward_weight(s, i, &gp)
            }
            ActionKind::ReduceGrad => {
                let done = self.backwards_done[s];
                self.reduce_calls[s].push(done);
                Ok(())
            }
            other => Err(format!("a callback for a {} action", other.name())),
        }
    }
}

/// The five callbacks, all calling [`FrameworkState::call`].
pub fn callbacks<'a>(state: &Rc<RefCell<FrameworkState>>) -> Callbacks<'a> {
    let f = |st: Rc<RefCell<FrameworkState>>| -> Option<weft::StageFn<'a>> {
        Some(Box::new(move |call: &mut StageCall<'_>| st.borrow_mut().call(call)))
    };
    Callbacks {
        forward: f(state.clone()),
        backward: f(state.clone()),
        backward_input: f(state.clone()),
        backward_weight: f(state.clone()),
        reduce_grad: f(state.clone()),
    }
}
