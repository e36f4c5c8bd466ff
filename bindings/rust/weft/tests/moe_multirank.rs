//! Multi-rank test of weft/moe.h's dispatch and combine. Run by `cargo test`, it starts
//! `weftrun -n 3 <this test binary>` with WEFT_RUST_MOE_CHILD=1. Each rank then dispatches its
//! tokens (5 experts over 3 ranks, top-2 choices written here with some slots dropped, a
//! different T per rank): blocks of 2, 2, 1 with T = 5, 2, 4 and with T = 3, 0, 6; then an
//! explicit placement with each local expert's rows padded to a multiple of 4 (padding rows'
//! outputs set huge, so combine must ignore them). It applies a per-row expert function written
//! here to the received rows and combines; everything is compared bitwise (f32) with the same
//! computation done here in one process from moe.h's rules: the received rows (expert-major,
//! then source rank, token, slot; expert, source, weight, data; padding rows), counts and
//! offsets, the weighted and unweighted combine (float32 sum in slot order), and
//! combine_backward's gradients (weight * grad_out; the float32 dot product in element order).
//! The same with bfloat16 tokens (float32 sums rounded once to bfloat16).
//! Then an expert index >= E on rank 1 must be refused (InvalidArgument naming the token there,
//! an error on every rank).
//! WEFT_TEST_INJECT=1: every check corrupts its value and must fail (tests/common/inject.rs).
//!
//! weftrun: $WEFTRUN, else the repository's build/bin/weftrun.

#[path = "common/inject.rs"]
mod inject;
#[path = "common/launcher.rs"]
mod launcher;

use inject::Checks;
use weft::{Bf16, Comm, Moe, MoeConfig, Status};

const RANKS: usize = 3;
const EXPERTS: usize = 5;
const HIDDEN: usize = 4;
const TOPK: usize = 2;
const CHILD_FLAG: &str = "WEFT_RUST_MOE_CHILD";
const DROPPED: i32 = weft::sys::WEFT_MOE_DROPPED;

#[test]
fn moe_multirank() {
    if launcher::is_child(CHILD_FLAG) {
        child();
        return;
    }
    launcher::run_under_weftrun("moe_multirank", RANKS, CHILD_FLAG, 120);
}

fn ok<T>(what: &str, r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// One rank's inputs: tokens [T, H], indices and weights [T, k]; every rank can make any rank's.
struct Inputs {
    x: Vec<f32>,
    indices: Vec<i32>,
    weights: Vec<f32>,
}

fn inputs(rank: usize, tokens: usize) -> Inputs {
    let x = (0..tokens * HIDDEN).map(|i| (rank * 100 + i) as f32 * 0.125 - 3.0).collect();
    let mut indices = Vec::new();
    let mut weights = Vec::new();
    for t in 0..tokens {
        let a = (rank * 3 + t * 2) % EXPERTS;
        let b = (a + 1 + (t + rank) % (EXPERTS - 1)) % EXPERTS;
        // every fourth token drops its second slot
        let b = if (t + rank) % 4 == 3 { DROPPED } else { b as i32 };
        indices.extend([a as i32, b]);
        weights.extend([0.75 - 0.0625 * t as f32, if b == DROPPED { 0.0 } else { 0.25 + 0.03125 * rank as f32 }]);
    }
    Inputs { x, indices, weights }
}

/// The expert function applied to a received row of expert e (element-wise, f32).
fn expert_fn(e: i32, row: &[f32]) -> Vec<f32> {
    row.iter().enumerate().map(|(h, &v)| v * (e as f32 + 1.0) - 0.5 * h as f32).collect()
}

/// The gradient of the combined output used for combine_backward.
fn grad_out(rank: usize, tokens: usize) -> Vec<f32> {
    (0..tokens * HIDDEN).map(|i| 1.0 - (rank * 7 + i) as f32 * 0.0625).collect()
}

/// Where the experts sit and how their rows are padded (MoeConfig's expert_rank and
/// expert_alignment).
struct Placement {
    expert_rank: Option<Vec<i32>>,
    alignment: usize,
}

impl Placement {
    /// Torch.chunk's rule by default: c = ceil(5 / 3) = 2: rank 0 holds 0-1, rank 1 holds 2-3,
    /// rank 2 holds 4.
    fn rank_of(&self, e: i32) -> usize {
        self.expert_rank.as_ref().map_or(e as usize / 2, |v| v[e as usize] as usize)
    }
}

/// A padding row as compared here: no expert, weight 0, zeros (its source is not specified).
fn padding_row() -> Row {
    Row { expert: -1, source_rank: -1, source_token: -1, weight: 0.0, data: vec![0.0; HIDDEN] }
}

/// One received row as moe.h orders them.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    expert: i32,
    source_rank: i32,
    source_token: i64,
    weight: f32,
    data: Vec<f32>,
}

fn child() {
    let comm = ok("init", Comm::from_env());
    assert_eq!(comm.size(), RANKS);
    let mut ck = Checks::new(&format!("moe_multirank rank {}", comm.rank()));
    let blocks = Placement { expert_rank: None, alignment: 0 };
    let moe = ok("Moe::new", Moe::new(&comm, &MoeConfig { experts: EXPERTS, hidden: HIDDEN, ..Default::default() }));
    run_case(&comm, &moe, &blocks, "T = 5, 2, 4", &[5, 2, 4], &mut ck);
    run_case(&comm, &moe, &blocks, "T = 3, 0, 6", &[3, 0, 6], &mut ck);
    bad_input(&comm, &moe, &mut ck);
    ok("destroy", moe.destroy());
    // Explicit placement (rank 0 holds experts 2 and 4, rank 1 experts 1 and 3, rank 2 expert 0)
    // and each local expert's rows padded to a multiple of 4.
    let placed = Placement { expert_rank: Some(vec![2, 1, 0, 1, 0]), alignment: 4 };
    let config = MoeConfig {
        experts: EXPERTS,
        hidden: HIDDEN,
        expert_rank: placed.expert_rank.clone(),
        expert_alignment: placed.alignment,
        ..Default::default()
    };
    let moe = ok("Moe::new (placed, aligned)", Moe::new(&comm, &config));
    run_case(&comm, &moe, &placed, "placed, aligned to 4, T = 5, 2, 4", &[5, 2, 4], &mut ck);
    ok("destroy", moe.destroy());
    bf16_case(&comm, &mut ck);
    ok("final barrier", comm.barrier());
    ck.finish();
    if comm.rank() == 0 {
        eprintln!("moe_multirank: dispatch, combine and combine_backward matched one process bitwise on {RANKS} ranks");
    }
}

fn run_case(comm: &Comm, moe: &Moe<'_>, place: &Placement, name: &str, tokens: &[usize], ck: &mut Checks) {
    let rank = comm.rank();
    let all: Vec<Inputs> = (0..RANKS).map(|r| inputs(r, tokens[r])).collect();
    let me = &all[rank];
    let h = ok(&format!("{name}: dispatch"), moe.dispatch(&me.x, &me.indices, &me.weights, TOPK));

    // The rows this rank must hold: per local expert, by source rank, token, slot; then padding.
    let local: Vec<i32> = (0..EXPERTS as i32).filter(|&e| place.rank_of(e) == rank).collect();
    let mut want_rows = Vec::new();
    let mut want_counts = Vec::new();
    let mut want_offsets = vec![0i64];
    for &e in &local {
        let before = want_rows.len();
        for (r, inp) in all.iter().enumerate() {
            for t in 0..tokens[r] {
                for j in 0..TOPK {
                    if inp.indices[t * TOPK + j] == e {
                        want_rows.push(Row {
                            expert: e,
                            source_rank: r as i32,
                            source_token: t as i64,
                            weight: inp.weights[t * TOPK + j],
                            data: inp.x[t * HIDDEN..(t + 1) * HIDDEN].to_vec(),
                        });
                    }
                }
            }
        }
        want_counts.push((want_rows.len() - before) as i64);
        while place.alignment > 1 && want_rows.len() % place.alignment != 0 {
            want_rows.push(padding_row());
        }
        want_offsets.push(want_rows.len() as i64);
    }
    let data = ok("received", h.received::<f32>());
    let got_rows: Vec<Row> = (0..h.rows())
        .map(|i| Row {
            expert: h.row_expert()[i],
            source_rank: if h.row_expert()[i] < 0 { -1 } else { h.row_source_rank()[i] },
            source_token: if h.row_expert()[i] < 0 { -1 } else { h.row_source_token()[i] },
            weight: h.row_weight()[i],
            data: data[i * HIDDEN..(i + 1) * HIDDEN].to_vec(),
        })
        .collect();
    ck.equal(&format!("{name}: local experts"), h.local_experts().to_vec(), local.clone(), |mut g| {
        g.push(9);
        g
    });
    ck.equal(&format!("{name}: counts"), h.counts().to_vec(), want_counts, |mut g| {
        g.push(1);
        g
    });
    ck.equal(&format!("{name}: offsets"), h.offsets().to_vec(), want_offsets, |mut g| {
        g.push(1);
        g
    });
    ck.equal(&format!("{name}: received rows"), got_rows.clone(), want_rows.clone(), |mut g| {
        g.reverse();
        g.push(Row { expert: 0, source_rank: 0, source_token: 0, weight: 1.0, data: vec![0.0; HIDDEN] });
        g
    });
    let layout = ok("layout", weft::layout(&me.indices, TOPK, EXPERTS, RANKS, place.expert_rank.as_deref()));
    let kept = me.indices.iter().filter(|&&i| i != DROPPED).count() as i64;
    ck.equal(&format!("{name}: layout kept slots"), layout.tokens_per_expert.iter().sum::<i64>(), kept, |g| g + 1);

    // The experts: each received row through expert_fn (f32); padding rows get a huge value that
    // combine must ignore.
    let expert_out: Vec<f32> = got_rows
        .iter()
        .flat_map(|r| if r.expert < 0 { vec![1e30; HIDDEN] } else { expert_fn(r.expert, &r.data) })
        .collect();
    let mut out = vec![f32::NAN; tokens[rank] * HIDDEN];
    ok(&format!("{name}: combine"), moe.combine(&h, &expert_out, true, &mut out));
    let mut plain = vec![f32::NAN; tokens[rank] * HIDDEN];
    ok(&format!("{name}: unweighted combine"), moe.combine(&h, &expert_out, false, &mut plain));
    let go = grad_out(rank, tokens[rank]);
    let mut g_exp = vec![f32::NAN; expert_out.len()];
    let mut g_w = vec![f32::NAN; tokens[rank] * TOPK];
    ok(&format!("{name}: combine_backward"), moe.combine_backward(&h, &go, &mut g_exp, &mut g_w));

    // One process: per token, its slots in order, the expert applied to the token itself.
    let (mut w_out, mut w_plain, mut w_gw) =
        (vec![0f32; out.len()], vec![0f32; out.len()], vec![0f32; tokens[rank] * TOPK]);
    for t in 0..tokens[rank] {
        let x = &me.x[t * HIDDEN..(t + 1) * HIDDEN];
        for j in 0..TOPK {
            let e = me.indices[t * TOPK + j];
            if e == DROPPED {
                continue;
            }
            let y = expert_fn(e, x);
            let w = me.weights[t * TOPK + j];
            let mut dot = 0f32;
            for k in 0..HIDDEN {
                w_out[t * HIDDEN + k] += w * y[k];
                w_plain[t * HIDDEN + k] += y[k];
                dot += go[t * HIDDEN + k] * y[k];
            }
            w_gw[t * TOPK + j] = dot;
        }
    }
    // grad_expert_out per received row: its weight times grad_out of its token, on this rank's
    // view of every rank's grad_out.
    let w_gexp: Vec<f32> = got_rows
        .iter()
        .flat_map(|r| {
            if r.expert < 0 {
                return vec![0.0; HIDDEN];
            }
            let g = grad_out(r.source_rank as usize, tokens[r.source_rank as usize]);
            let t = r.source_token as usize;
            g[t * HIDDEN..(t + 1) * HIDDEN].iter().map(|&v| r.weight * v).collect::<Vec<f32>>()
        })
        .collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    let flip = |mut g: Vec<u32>| {
        match g.first_mut() {
            Some(b) => *b ^= 1,
            None => g.push(0),
        }
        g
    };
    ck.equal(&format!("{name}: weighted combine (bits)"), bits(&out), bits(&w_out), flip);
    ck.equal(&format!("{name}: unweighted combine (bits)"), bits(&plain), bits(&w_plain), flip);
    ck.equal(&format!("{name}: grad_expert_out (bits)"), bits(&g_exp), bits(&w_gexp), flip);
    ck.equal(&format!("{name}: grad_weights (bits)"), bits(&g_w), bits(&w_gw), flip);
    ok(&format!("{name}: handle destroy"), h.destroy());
}

fn bad_input(comm: &Comm, moe: &Moe<'_>, ck: &mut Checks) {
    let rank = comm.rank();
    let mut inp = inputs(rank, 3);
    if rank == 1 {
        inp.indices[2 * TOPK] = EXPERTS as i32; // token 2, slot 0: one past the last expert
    }
    match moe.dispatch(&inp.x, &inp.indices, &inp.weights, TOPK) {
        Ok(_) => ck.holds(&format!("bad index: dispatch on rank {rank} must fail"), false),
        Err(e) => {
            if rank == 1 {
                ck.equal("bad index: status", e.status(), Status::InvalidArgument, |_| Status::Internal);
                ck.contains("bad index: message names the token", e.message(), "token 2");
            } else {
                ck.holds(&format!("bad index: rank {rank} told of the failure ({e})"), !e.message().is_empty());
            }
        }
    }
}

/// bfloat16 tokens (blocks placement, T = 5, 2, 4): the rows arrive unchanged, and combine and
/// combine_backward accumulate in float32 and round once to bfloat16 (round to nearest even, as
/// Bf16::from_f32 does).
fn bf16_case(comm: &Comm, ck: &mut Checks) {
    let rank = comm.rank();
    let tokens = [5usize, 2, 4];
    let config = MoeConfig { experts: EXPERTS, hidden: HIDDEN, dtype: weft::Dtype::Bf16, ..Default::default() };
    let moe = ok("Moe::new (bf16)", Moe::new(comm, &config));
    let bf = |v: &[f32]| v.iter().map(|&x| Bf16::from_f32(x)).collect::<Vec<Bf16>>();
    let me = inputs(rank, tokens[rank]);
    let x = bf(&me.x);
    let h = ok("bf16: dispatch", moe.dispatch(&x, &me.indices, &me.weights, TOPK));
    let data: Vec<u16> = ok("bf16: received", h.received::<Bf16>()).iter().map(|v| v.to_bits()).collect();
    let mut want = Vec::new();
    for i in 0..h.rows() {
        let (r, t) = (h.row_source_rank()[i] as usize, h.row_source_token()[i] as usize);
        let src = bf(&inputs(r, tokens[r]).x);
        want.extend(src[t * HIDDEN..(t + 1) * HIDDEN].iter().map(|v| v.to_bits()));
    }
    ck.equal("bf16: received rows (bits)", data.clone(), want, |mut g| {
        g.push(0);
        g
    });
    let received: Vec<f32> = ok("bf16: received", h.received::<Bf16>()).iter().map(|v| v.to_f32()).collect();
    let expert_out: Vec<Bf16> = (0..h.rows())
        .flat_map(|i| bf(&expert_fn(h.row_expert()[i], &received[i * HIDDEN..(i + 1) * HIDDEN])))
        .collect();
    let mut out = vec![Bf16::from_f32(f32::NAN); tokens[rank] * HIDDEN];
    ok("bf16: combine", moe.combine(&h, &expert_out, true, &mut out));
    let go = bf(&grad_out(rank, tokens[rank]));
    let mut g_exp = vec![Bf16::from_f32(f32::NAN); expert_out.len()];
    let mut g_w = vec![f32::NAN; tokens[rank] * TOPK];
    ok("bf16: combine_backward", moe.combine_backward(&h, &go, &mut g_exp, &mut g_w));

    // One process: the expert applied to the bfloat16 token, its output rounded to bfloat16 as
    // the rank's expert_out was; sums in f32, rounded once.
    let mut w_out = vec![0f32; out.len()];
    let mut w_gw = vec![0f32; g_w.len()];
    for t in 0..tokens[rank] {
        let xt: Vec<f32> = x[t * HIDDEN..(t + 1) * HIDDEN].iter().map(|v| v.to_f32()).collect();
        for j in 0..TOPK {
            let e = me.indices[t * TOPK + j];
            if e == DROPPED {
                continue;
            }
            let y: Vec<f32> = bf(&expert_fn(e, &xt)).iter().map(|v| v.to_f32()).collect();
            let mut dot = 0f32;
            for k in 0..HIDDEN {
                w_out[t * HIDDEN + k] += me.weights[t * TOPK + j] * y[k];
                dot += go[t * HIDDEN + k].to_f32() * y[k];
            }
            w_gw[t * TOPK + j] = dot;
        }
    }
    let w_gexp: Vec<u16> = (0..h.rows())
        .flat_map(|i| {
            let (r, t) = (h.row_source_rank()[i] as usize, h.row_source_token()[i] as usize);
            let g = bf(&grad_out(r, tokens[r]));
            let w = h.row_weight()[i];
            g[t * HIDDEN..(t + 1) * HIDDEN].iter().map(|v| Bf16::from_f32(w * v.to_f32()).to_bits()).collect::<Vec<_>>()
        })
        .collect();
    let bits16 = |v: &[Bf16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
    let flip16 = |mut g: Vec<u16>| {
        match g.first_mut() {
            Some(b) => *b ^= 1,
            None => g.push(0),
        }
        g
    };
    ck.equal("bf16: weighted combine (bits)", bits16(&out), bits16(&bf(&w_out)), flip16);
    ck.equal("bf16: grad_expert_out (bits)", bits16(&g_exp), w_gexp, flip16);
    let w_gw_bits: Vec<u32> = w_gw.iter().map(|v| v.to_bits()).collect();
    ck.equal("bf16: grad_weights (bits)", g_w.iter().map(|v| v.to_bits()).collect::<Vec<u32>>(), w_gw_bits, |mut g| {
        g.push(0);
        g
    });
    ok("bf16: handle destroy", h.destroy());
    ok("bf16: destroy", moe.destroy());
}
