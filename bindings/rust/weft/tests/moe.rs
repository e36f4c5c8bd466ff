//! Single-process tests of weft/moe.h's router and layout through the safe binding, against
//! references written here from moe.h's words (not from weft's code): top-k selection with ties
//! to the lower index, the three scores, selection bias, group-limited routing, both dropping
//! rules with C = ceil(T k / E * factor), the two losses; the backward against central finite
//! differences of the reference (selection held fixed); update_bias against its formula; the
//! layout against brute-force counting. Plus the refusals of bad arguments.
//! WEFT_TEST_INJECT=1: every check corrupts its value and must fail (tests/common/inject.rs).

#[path = "common/inject.rs"]
mod inject;

use inject::Checks;
use weft::{DropPolicy, RouterConfig, RouterScore, Status};

const DROPPED: i32 = weft::sys::WEFT_MOE_DROPPED;

/// Deterministic pseudo-random logits in [-2, 2) (a 64-bit LCG; no dependency).
fn logits(tokens: usize, experts: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..tokens * experts)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f64 / (1u64 << 24) as f64 * 4.0 - 2.0) as f32
        })
        .collect()
}

fn softmax(x: &[f64]) -> Vec<f64> {
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = x.iter().map(|v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

fn logsumexp(x: &[f64]) -> f64 {
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    m + x.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
}

/// The k best of `score` among `allowed`, best first, ties to the lower index.
fn top_k(score: &[f64], allowed: &[bool], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..score.len()).filter(|&e| allowed[e]).collect();
    idx.sort_by(|&a, &b| score[b].partial_cmp(&score[a]).unwrap().then(a.cmp(&b)));
    idx.truncate(k);
    idx
}

/// The routing probability of moe.h's aux loss, and the score used for selection (before bias).
fn probs_and_scores(row: &[f64], score: RouterScore) -> (Vec<f64>, Vec<f64>) {
    match score {
        RouterScore::Softmax => (softmax(row), softmax(row)),
        RouterScore::TopkSoftmax => (softmax(row), row.to_vec()),
        RouterScore::Sigmoid => {
            let s: Vec<f64> = row.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
            let sum: f64 = s.iter().sum();
            (s.iter().map(|v| v / sum).collect(), s)
        }
    }
}

/// The weights of the chosen experts `sel` of one token (moe.h's per-score rules).
fn weights_of(row: &[f64], sel: &[usize], c: &RouterConfig) -> Vec<f64> {
    match c.score {
        RouterScore::Softmax => {
            let p = softmax(row);
            let w: Vec<f64> = sel.iter().map(|&e| p[e]).collect();
            if c.normalize {
                let s: f64 = w.iter().sum();
                w.iter().map(|v| v / s).collect()
            } else {
                w
            }
        }
        RouterScore::TopkSoftmax => softmax(&sel.iter().map(|&e| row[e]).collect::<Vec<_>>()),
        RouterScore::Sigmoid => {
            let s: Vec<f64> = sel.iter().map(|&e| 1.0 / (1.0 + (-row[e]).exp())).collect();
            let sum: f64 = s.iter().sum();
            s.iter().map(|v| v / sum).collect()
        }
    }
}

struct Reference {
    indices: Vec<i32>,
    weights: Vec<f64>,
    kept: Vec<i64>,
    selected: Vec<i64>,
    aux: f64,
    z: f64,
}

fn reference(lg: &[f32], c: &RouterConfig) -> Reference {
    let (e_n, k) = (c.experts, c.topk);
    let t_n = lg.len() / e_n;
    let mut indices = vec![0i32; t_n * k];
    let mut weights = vec![0f64; t_n * k];
    let mut selected = vec![0i64; e_n];
    let mut prob_sum = vec![0f64; e_n];
    let mut z = 0.0;
    for t in 0..t_n {
        let row: Vec<f64> = lg[t * e_n..(t + 1) * e_n].iter().map(|&v| v as f64).collect();
        let (p, s) = probs_and_scores(&row, c.score);
        let sel_score: Vec<f64> = (0..e_n).map(|e| s[e] + c.bias.as_ref().map_or(0.0, |b| b[e] as f64)).collect();
        let mut allowed = vec![true; e_n];
        if c.groups > 1 {
            let g_size = e_n / c.groups;
            let gscore: Vec<f64> = (0..c.groups)
                .map(|g| {
                    let mut v: Vec<f64> = sel_score[g * g_size..(g + 1) * g_size].to_vec();
                    v.sort_by(|a, b| b.partial_cmp(a).unwrap());
                    v.iter().take(2).sum()
                })
                .collect();
            let best = top_k(&gscore, &vec![true; c.groups], c.topk_groups);
            for (e, a) in allowed.iter_mut().enumerate() {
                *a = best.contains(&(e / g_size));
            }
        }
        let sel = top_k(&sel_score, &allowed, k);
        let w = weights_of(&row, &sel, c);
        for j in 0..k {
            indices[t * k + j] = sel[j] as i32;
            weights[t * k + j] = w[j];
            selected[sel[j]] += 1;
        }
        for e in 0..e_n {
            prob_sum[e] += p[e];
        }
        z += logsumexp(&row).powi(2);
    }
    let aux = c.aux_loss_coeff as f64
        * e_n as f64
        * (0..e_n).map(|e| selected[e] as f64 / (t_n * k) as f64 * prob_sum[e] / t_n as f64).sum::<f64>();
    let z = c.z_loss_coeff as f64 * z / t_n as f64;
    // Dropping: per expert its assignments (token, slot) in the rule's order; the first C stay.
    if c.drop != DropPolicy::None {
        let cap = ((t_n * k) as f64 / e_n as f64 * c.capacity_factor).ceil() as usize;
        for e in 0..e_n {
            let mut slots: Vec<usize> = (0..t_n * k).filter(|&i| indices[i] == e as i32).collect();
            if c.drop == DropPolicy::ByProbability {
                slots.sort_by(|&a, &b| weights[b].partial_cmp(&weights[a]).unwrap().then(a.cmp(&b)));
            }
            for &i in slots.iter().skip(cap) {
                indices[i] = DROPPED;
                weights[i] = 0.0;
            }
        }
    }
    let mut kept = vec![0i64; e_n];
    for &i in indices.iter().filter(|&&i| i >= 0) {
        kept[i as usize] += 1;
    }
    Reference { indices, weights, kept, selected, aux, z }
}

fn configs() -> Vec<(&'static str, RouterConfig)> {
    let base = RouterConfig { experts: 8, topk: 2, ..Default::default() };
    vec![
        ("softmax top-2", base.clone()),
        (
            "softmax normalised + losses",
            RouterConfig { normalize: true, aux_loss_coeff: 0.01, z_loss_coeff: 0.001, ..base.clone() },
        ),
        (
            "top-k softmax k=3",
            RouterConfig { score: RouterScore::TopkSoftmax, topk: 3, aux_loss_coeff: 0.1, ..base.clone() },
        ),
        (
            "sigmoid + bias + groups",
            RouterConfig {
                score: RouterScore::Sigmoid,
                bias: Some((0..8).map(|e| 0.05 * e as f32 - 0.2).collect()),
                groups: 4,
                topk_groups: 2,
                aux_loss_coeff: 0.02,
                ..base.clone()
            },
        ),
        ("drop by position", RouterConfig { drop: DropPolicy::ByPosition, capacity_factor: 1.0, ..base.clone() }),
        (
            "drop by probability",
            RouterConfig { drop: DropPolicy::ByProbability, capacity_factor: 0.75, ..base.clone() },
        ),
        ("top-1 softmax", RouterConfig { topk: 1, z_loss_coeff: 0.5, ..base }),
    ]
}

#[test]
fn router_matches_the_reference() {
    let mut ck = Checks::new("moe router");
    for (name, c) in configs() {
        let lg = logits(13, c.experts, name.len() as u64);
        let got = weft::route(&lg, &c).unwrap_or_else(|e| panic!("{name}: route: {e}"));
        let want = reference(&lg, &c);
        ck.equal(&format!("{name}: indices"), got.indices.clone(), want.indices.clone(), |mut g| {
            g[0] = if g[0] == 1 { 2 } else { 1 };
            g
        });
        let wf: Vec<f32> = want.weights.iter().map(|&w| w as f32).collect();
        ck.all_close(&format!("{name}: weights"), &got.weights, &wf, 1e-5);
        ck.equal(&format!("{name}: tokens_per_expert"), got.tokens_per_expert.clone(), want.kept, |mut g| {
            g[0] += 1;
            g
        });
        ck.equal(&format!("{name}: selected_per_expert"), got.selected_per_expert.clone(), want.selected, |mut g| {
            g[1] += 1;
            g
        });
        ck.close(&format!("{name}: aux loss"), got.aux_loss as f64, want.aux, 1e-5);
        ck.close(&format!("{name}: z loss"), got.z_loss as f64, want.z, 1e-5);
    }
    ck.finish();
}

/// The loss the backward differentiates, in f64, with the selection `indices` fixed.
fn loss_fixed(lg: &[f64], c: &RouterConfig, indices: &[i32], gw: &[f32], ga: f64, gz: f64) -> f64 {
    let (e_n, k) = (c.experts, c.topk);
    let t_n = lg.len() / e_n;
    let mut selected = vec![0f64; e_n];
    for &i in indices {
        selected[i as usize] += 1.0;
    }
    let (mut l, mut prob_sum, mut z) = (0.0, vec![0f64; e_n], 0.0);
    for t in 0..t_n {
        let row = &lg[t * e_n..(t + 1) * e_n];
        let sel: Vec<usize> = indices[t * k..(t + 1) * k].iter().map(|&i| i as usize).collect();
        let w = weights_of(row, &sel, c);
        l += (0..k).map(|j| gw[t * k + j] as f64 * w[j]).sum::<f64>();
        let (p, _) = probs_and_scores(row, c.score);
        for e in 0..e_n {
            prob_sum[e] += p[e];
        }
        z += logsumexp(row).powi(2);
    }
    let aux = c.aux_loss_coeff as f64
        * e_n as f64
        * (0..e_n).map(|e| selected[e] / (t_n * k) as f64 * prob_sum[e] / t_n as f64).sum::<f64>();
    l + ga * aux + gz * c.z_loss_coeff as f64 * z / t_n as f64
}

#[test]
fn router_backward_matches_finite_differences() {
    let mut ck = Checks::new("moe router backward");
    for (name, c) in configs().into_iter().filter(|(_, c)| c.drop == DropPolicy::None) {
        let lg = logits(5, c.experts, 7 + name.len() as u64);
        let fwd = weft::route(&lg, &c).unwrap_or_else(|e| panic!("{name}: route: {e}"));
        let gw: Vec<f32> = (0..fwd.indices.len()).map(|i| 0.25 * (i % 5) as f32 - 0.5).collect();
        let (ga, gz) = (1.5f32, 0.75f32);
        let got = weft::router_backward(&lg, &c, &fwd.indices, &gw, ga, gz)
            .unwrap_or_else(|e| panic!("{name}: router_backward: {e}"));
        let base: Vec<f64> = lg.iter().map(|&v| v as f64).collect();
        let h = 1e-5;
        let want: Vec<f32> = (0..base.len())
            .map(|i| {
                let (mut a, mut b) = (base.clone(), base.clone());
                a[i] += h;
                b[i] -= h;
                let d = loss_fixed(&a, &c, &fwd.indices, &gw, ga as f64, gz as f64)
                    - loss_fixed(&b, &c, &fwd.indices, &gw, ga as f64, gz as f64);
                (d / (2.0 * h)) as f32
            })
            .collect();
        ck.all_close(&format!("{name}: grad_logits"), &got, &want, 1e-4);
    }
    ck.finish();
}

#[test]
fn update_bias_follows_the_sign_rule() {
    let mut ck = Checks::new("moe update_bias");
    let mut bias = vec![0.5f32, -0.25, 0.0, 1.0];
    // mean load 3: expert 0 under (+rate), 1 over (-rate), 2 at the mean (0), 3 under.
    weft::update_bias(&mut bias, &[1, 7, 3, 1], 0.125).expect("update_bias");
    ck.all_close("bias", &bias, &[0.625, -0.375, 0.0, 1.125], 0.0);
    ck.finish();
}

#[test]
fn layout_counts_match_brute_force() {
    let mut ck = Checks::new("moe layout");
    let (e_n, k, ranks) = (7usize, 3usize, 3usize);
    let mut s = 12345u64;
    let indices: Vec<i32> = (0..11 * k)
        .map(|i| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if i % 5 == 4 {
                DROPPED
            } else {
                ((s >> 33) % e_n as u64) as i32
            }
        })
        .collect();
    let placements: [(&str, Option<Vec<i32>>); 2] = [("blocks", None), ("explicit", Some(vec![2, 0, 1, 1, 0, 2, 0]))];
    for (name, er) in placements {
        // torch.chunk's rule: c = ceil(7 / 3) = 3 -> ranks hold [0,3), [3,6), [6,7).
        let rank_of = |e: usize| er.as_ref().map_or(e / 3, |v| v[e] as usize);
        let (mut per_rank, mut per_expert, mut in_rank) = (vec![0i64; ranks], vec![0i64; e_n], vec![0u8; 11 * ranks]);
        for t in 0..11 {
            for j in 0..k {
                let i = indices[t * k + j];
                if i >= 0 {
                    per_expert[i as usize] += 1;
                    in_rank[t * ranks + rank_of(i as usize)] = 1;
                }
            }
            for r in 0..ranks {
                per_rank[r] += in_rank[t * ranks + r] as i64;
            }
        }
        let got =
            weft::layout(&indices, k, e_n, ranks, er.as_deref()).unwrap_or_else(|e| panic!("{name}: layout: {e}"));
        ck.equal(&format!("{name}: tokens_per_rank"), got.tokens_per_rank, per_rank, |mut g| {
            g[0] += 1;
            g
        });
        ck.equal(&format!("{name}: tokens_per_expert"), got.tokens_per_expert, per_expert, |mut g| {
            g[0] += 1;
            g
        });
        ck.equal(&format!("{name}: token_in_rank"), got.token_in_rank, in_rank, |mut g| {
            g[0] ^= 1;
            g
        });
    }
    ck.finish();
}

#[test]
fn bad_arguments_are_refused() {
    let mut ck = Checks::new("moe refusals");
    let lg = logits(4, 8, 1);
    let over = RouterConfig { experts: 8, topk: 9, ..Default::default() };
    let e = weft::route(&lg, &over).expect_err("k > E must be refused");
    ck.equal("k > E: status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    ck.contains("k > E: message", e.message(), "9");
    let groups = RouterConfig { experts: 8, topk: 2, groups: 3, topk_groups: 1, ..Default::default() };
    let e = weft::route(&lg, &groups).expect_err("groups not dividing E must be refused");
    ck.equal("groups: status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    let bad = [0, 9, 1, 2];
    let e = weft::layout(&bad, 2, 8, 2, None).expect_err("an index >= E must be refused");
    ck.equal("layout index: status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    ck.contains("layout index: message", e.message(), "9");
    let e = weft::route(&lg[..5], &RouterConfig { experts: 8, topk: 2, ..Default::default() })
        .expect_err("logits not [T, E]");
    ck.contains("logits shape: message", e.message(), "multiple of experts");
    ck.finish();
}
