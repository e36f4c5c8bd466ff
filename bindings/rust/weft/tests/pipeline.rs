//! Single-process tests of the pipeline family (weft/pipeline.h) through the safe binding:
//!  - every generator's schedules pass the validator, with the placement, the compute actions
//!    and the transfers counted here from the header's rules;
//!  - torch's CSV: a hand-written file parses into the expected actions and prints back the
//!    same; every generated schedule survives a CSV and a file round trip;
//!  - simulation equals the closed forms (GPipe and 1F1B makespan (m+p-1)(f+b), bubble
//!    (p-1)/(m+p-1), peak activations m and min(p-r, m));
//!  - tuning agrees with a brute force over the same candidates, simulated here;
//!  - broken schedules and bad arguments are refused with messages naming the fault;
//!  - the executor on one rank (two stages in memory) equals the one-process computation, and a
//!    closure's Err or panic comes back from run() with its text.
//!
//! WEFT_TEST_INJECT=1: every check corrupts its value and must fail (tests/common/inject.rs).

#[path = "common/inject.rs"]
mod inject;
#[path = "common/pipeline_model.rs"]
mod model;

use std::collections::HashMap;

use inject::Checks;
use weft::{
    tune, Action, ActionKind, Boundary, Callbacks, Comm, Config, Costs, CsvFormat, Pipeline, PipelineConfig, Schedule,
    ScheduleConfig, ScheduleKind, Status, TimelineFormat, TuneConfig, UniqueId,
};

fn ok<T>(what: &str, r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn gen(kind: ScheduleKind, p: usize, m: usize, v: usize, reduce_grad: bool) -> weft::Result<Schedule> {
    Schedule::generate(kind, &ScheduleConfig { ranks: p, microbatches: m, stages_per_rank: v, reduce_grad })
}

/// The header's placement rules: which rank holds stage s of S.
fn placement(kind: ScheduleKind, p: usize, s: usize) -> usize {
    match kind {
        ScheduleKind::ZbV | ScheduleKind::DualPipeV => {
            if s < p {
                s
            } else {
                2 * p - 1 - s
            }
        }
        _ => s % p,
    }
}

/// (kind, v, micro-batch counts the kind allows at p ranks) for the sweep.
fn cases(p: usize) -> Vec<(ScheduleKind, usize, Vec<usize>)> {
    let any = vec![1, 2, p, 2 * p + 1];
    vec![
        (ScheduleKind::Gpipe, 1, any.clone()),
        (ScheduleKind::OneFOneB, 1, any.clone()),
        (ScheduleKind::Interleaved1F1B, 2, vec![1, p, 2 * p]),
        (ScheduleKind::ZbH1, 1, any.clone()),
        (ScheduleKind::ZbH2, 1, any.clone()),
        (ScheduleKind::ZbV, 2, any),
        (ScheduleKind::DualPipeV, 2, vec![2 * p, 2 * p + 3]),
    ]
}

#[test]
fn generators_pass_the_validator_and_follow_the_rules() {
    let mut ck = Checks::new("generators");
    for p in 1..=4 {
        for (kind, v, ms) in cases(p) {
            for m in ms {
                let name = format!("{kind:?} p={p} m={m}");
                let s = ok(&name, gen(kind, p, m, v, true));
                ok(&format!("{name}: validate"), s.validate());
                let info = ok("info", s.info());
                let stages = p * v;
                ck.equal(
                    &format!("{name}: info"),
                    (info.kind, info.ranks, info.stages, info.microbatches),
                    (Some(kind), p, stages, m),
                    |(k, r, st, mm)| (k, r, st + 1, mm),
                );
                ck.count(&format!("{name}: stages per rank"), info.stages_per_rank, v);
                let mut forwards: HashMap<(usize, usize), usize> = HashMap::new();
                let mut backwards: HashMap<(usize, usize), (usize, usize, usize)> = HashMap::new();
                let (mut sends_f, mut misplaced, mut reduces) = (0usize, 0usize, 0usize);
                for r in 0..p {
                    for a in ok("actions", s.actions(r)) {
                        let key = (a.stage(), a.microbatch().unwrap_or(usize::MAX));
                        if a.kind().is_compute() && placement(kind, p, a.stage()) != r {
                            misplaced += 1;
                        }
                        match a.kind() {
                            ActionKind::F => *forwards.entry(key).or_default() += 1,
                            ActionKind::B => backwards.entry(key).or_default().0 += 1,
                            ActionKind::I => backwards.entry(key).or_default().1 += 1,
                            ActionKind::W => backwards.entry(key).or_default().2 += 1,
                            ActionKind::SendF => sends_f += 1,
                            ActionKind::ReduceGrad => reduces += 1,
                            _ => {}
                        }
                    }
                }
                for st in 0..stages {
                    ck.equal(
                        &format!("{name}: stage_rank({st})"),
                        ok("stage_rank", s.stage_rank(st)),
                        Some(placement(kind, p, st)),
                        |r| r.map(|r| r + 1),
                    );
                }
                ck.count(&format!("{name}: compute actions on the wrong rank"), misplaced, 0);
                ck.count(&format!("{name}: (stage, micro-batch) forwards"), forwards.len(), stages * m);
                ck.holds(&format!("{name}: every forward once"), forwards.values().all(|&n| n == 1));
                ck.count(&format!("{name}: backwards"), backwards.len(), stages * m);
                ck.holds(
                    &format!("{name}: every backward as B or I+W"),
                    backwards.values().all(|&b| b == (1, 0, 0) || b == (0, 1, 1)),
                );
                let crossings = (0..stages.saturating_sub(1))
                    .filter(|&st| placement(kind, p, st) != placement(kind, p, st + 1))
                    .count();
                ck.count(&format!("{name}: SEND_F actions"), sends_f, crossings * m);
                ck.count(&format!("{name}: REDUCE_GRAD actions"), reduces, stages);
            }
        }
    }
    ck.finish();
}

#[test]
fn csv_parses_prints_and_round_trips() {
    let mut ck = Checks::new("csv");
    // GPipe at p = 2, m = 2, compute only, as torch writes it; weft inserts the transfers.
    let text = "0F0,0F1,0B0,0B1\r\n1F0,1F1,1B0,1B1\r\n";
    let s = ok("from_csv", Schedule::from_csv(text));
    ok("validate the parsed CSV", s.validate());
    let info = ok("info", s.info());
    ck.equal(
        "parsed info",
        (info.kind, info.ranks, info.stages, info.microbatches),
        (Some(ScheduleKind::Custom), 2, 2, 2),
        |(k, r, st, m)| (k, r, st, m + 1),
    );
    ck.text("compute-only CSV printed back", &ok("to_csv", s.to_csv(CsvFormat::ComputeOnly)), text);
    let a = |k, st, m| Action::new(k, st, Some(m));
    use ActionKind::*;
    let want0 = [
        a(F, 0, 0),
        a(SendF, 0, 0),
        a(F, 0, 1),
        a(SendF, 0, 1),
        a(RecvB, 0, 0),
        a(B, 0, 0),
        a(RecvB, 0, 1),
        a(B, 0, 1),
    ];
    let want1 = [
        a(RecvF, 1, 0),
        a(F, 1, 0),
        a(RecvF, 1, 1),
        a(F, 1, 1),
        a(B, 1, 0),
        a(SendB, 1, 0),
        a(B, 1, 1),
        a(SendB, 1, 1),
    ];
    ck.actions("rank 0 with the transfers inserted", ok("actions", s.actions(0)), &want0);
    ck.actions("rank 1 with the transfers inserted", ok("actions", s.actions(1)), &want1);
    // "\n" rows, an empty cell and "None" are idle steps.
    let loose = ok("from_csv (loose)", Schedule::from_csv("0F0,,0F1,None,0B0,0B1\n1F0,1F1,1B0,1B1\n"));
    ck.actions("idle steps skipped", ok("actions", loose.actions(0)), &want0);

    let dir = std::env::temp_dir().join(format!("weft-rust-pipeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (kind, v, ms) in cases(3) {
        let m = *ms.last().unwrap();
        let name = format!("{kind:?} p=3 m={m}");
        let s = ok(&name, gen(kind, 3, m, v, true));
        let full = ok("to_csv", s.to_csv(CsvFormat::ComputeComms));
        let back = ok(&format!("{name}: from_csv"), Schedule::from_csv(&full));
        let path = dir.join(format!("{kind:?}.weftsched"));
        ok("save", s.save(&path));
        let loaded = ok(&format!("{name}: load"), Schedule::load(&path));
        // pipeline.h calls a loaded schedule custom while the file keeps the generator: only the
        // shape is compared here, and the lists below.
        let (a, b) = (ok("info", loaded.info()), ok("info", s.info()));
        ck.equal(
            &format!("{name}: loaded shape"),
            (a.ranks, a.stages, a.microbatches),
            (b.ranks, b.stages, b.microbatches),
            |(r, st, m)| (r, st, m + 1),
        );
        for r in 0..3 {
            let want = ok("actions", s.actions(r));
            ck.actions(&format!("{name}: rank {r} after CSV"), ok("actions", back.actions(r)), want);
            ck.actions(&format!("{name}: rank {r} after save/load"), ok("actions", loaded.actions(r)), want);
        }
        let only = ok("to_csv", s.to_csv(CsvFormat::ComputeOnly));
        let reb = ok(&format!("{name}: compute-only from_csv"), Schedule::from_csv(&only));
        ok(&format!("{name}: compute-only schedule validates"), reb.validate());
        for r in 0..3 {
            let compute =
                |l: &[Action]| l.iter().filter(|a| matches!(a.kind(), F | B | I | W)).copied().collect::<Vec<_>>();
            ck.actions(
                &format!("{name}: rank {r} compute-only"),
                &compute(ok("actions", reb.actions(r))),
                &compute(ok("actions", s.actions(r))),
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    ck.finish();
}

#[test]
fn simulation_equals_the_closed_forms() {
    let mut ck = Checks::new("simulate");
    let dir = std::env::temp_dir().join(format!("weft-rust-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (f, b) = (1.0, 2.0);
    for p in [1usize, 2, 4] {
        for m in [1usize, 3, 8] {
            for kind in [ScheduleKind::Gpipe, ScheduleKind::OneFOneB] {
                let name = format!("{kind:?} p={p} m={m}");
                let s = ok(&name, gen(kind, p, m, 0, false));
                let t = ok("simulate", s.simulate(&Costs::uniform(p, f, b)));
                ck.count(&format!("{name}: ranks"), t.ranks(), p);
                ck.close(&format!("{name}: makespan"), t.makespan(), (m + p - 1) as f64 * (f + b), 1e-12);
                ck.close(&format!("{name}: bubble"), t.bubble_fraction(), (p - 1) as f64 / (m + p - 1) as f64, 1e-12);
                for r in 0..p {
                    let rt = ok("rank", t.rank(r));
                    let n = ok("actions", s.actions(r)).len();
                    ck.count(&format!("{name}: rank {r} times"), rt.start.len().min(rt.end.len()), n);
                    ck.close(&format!("{name}: rank {r} busy"), rt.stats.busy, m as f64 * (f + b), 1e-12);
                    let peak = if kind == ScheduleKind::Gpipe { m } else { (p - r).min(m) };
                    ck.count(&format!("{name}: rank {r} peak activations"), rt.stats.peak_activations, peak);
                    ck.holds(
                        &format!("{name}: rank {r} ends after starts"),
                        rt.start.iter().zip(rt.end).all(|(s, e)| e >= s),
                    );
                }
                if p == 4 && m == 8 {
                    let svg = dir.join(format!("{kind:?}.svg"));
                    let trace = dir.join(format!("{kind:?}.json"));
                    ok("write svg", t.write(TimelineFormat::Svg, &svg));
                    ok("write trace", t.write(TimelineFormat::ChromeTrace, &trace));
                    let svg = std::fs::read_to_string(&svg).unwrap();
                    let trace = std::fs::read_to_string(&trace).unwrap();
                    ck.holds(&format!("{name}: SVG"), svg.contains("<svg") && svg.trim_end().ends_with("</svg>"));
                    ck.holds(&format!("{name}: trace JSON"), trace.trim_start().starts_with(['{', '[']));
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    // Costs are checked before the call: a short array is named.
    let s = ok("gpipe", gen(ScheduleKind::Gpipe, 2, 2, 0, false));
    let bad = Costs { backward: Some(vec![1.0]), ..Costs::uniform(2, 1.0, 1.0) };
    let e = s.simulate(&bad).expect_err("a short backward array");
    ck.contains("short cost array", e.message(), "backward");
    ck.finish();
}

/// Simulates candidate (kind, m, v) of `c` the way weft.h's tuning model states it.
fn brute_force(c: &TuneConfig, kind: ScheduleKind, m: usize, v: usize) -> Option<(f64, f64)> {
    let (p, layers) = (c.ranks, c.layer_forward.len());
    let stages = p * v;
    let s = gen(kind, p, m, v, false).ok()?;
    if layers < stages {
        return None;
    }
    let mbs = (c.global_batch / m) as f64;
    let range = |st: usize| (st * layers / stages)..((st + 1) * layers / stages);
    let sum = |xs: &[f64], st: usize| range(st).map(|l| xs[l]).sum::<f64>() * mbs;
    let costs = Costs {
        forward: (0..stages).map(|st| sum(&c.layer_forward, st)).collect(),
        backward: Some((0..stages).map(|st| sum(&c.layer_backward, st)).collect()),
        activation_bytes: Some(
            (0..stages).map(|st| range(st).len() as f64 * c.activation_bytes_per_sample * mbs).collect(),
        ),
        boundary_bytes: Some(vec![c.boundary_bytes_per_sample * mbs; stages]),
        overhead: c.microbatch_overhead,
        ..Costs::default()
    };
    let t = s.simulate(&costs).ok()?;
    let peak = (0..p).map(|r| t.rank(r).unwrap().stats.peak_activation_bytes).fold(0.0, f64::max);
    Some((t.makespan(), peak + c.static_bytes))
}

#[test]
fn tuning_agrees_with_brute_force() {
    let mut ck = Checks::new("tune");
    let kinds = vec![ScheduleKind::Gpipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved1F1B];
    let cfg = TuneConfig {
        ranks: 2,
        layer_forward: vec![1.0, 2.0, 1.0, 3.0],
        layer_backward: vec![2.0, 4.0, 2.0, 6.0],
        global_batch: 8,
        microbatch_overhead: 0.5,
        activation_bytes_per_sample: 100.0,
        memory_cap: 1500.0,
        kinds: Some(kinds.clone()),
        max_stages_per_rank: 2,
        ..TuneConfig::default()
    };
    let (cands, best) = ok("tune", tune(&cfg));
    let mut want_fixed = Vec::new();
    for &kind in &kinds[..2] {
        for m in [1, 2, 4, 8] {
            if brute_force(&cfg, kind, m, 1).is_some() {
                want_fixed.push((kind, m));
            }
        }
    }
    let mut got_fixed: Vec<_> = cands
        .iter()
        .filter(|c| c.kind != Some(ScheduleKind::Interleaved1F1B))
        .map(|c| (c.kind.unwrap(), c.microbatches))
        .collect();
    got_fixed.sort_by_key(|&(k, m)| (k.raw(), m));
    ck.equal("GPipe and 1F1B candidates", got_fixed, want_fixed, |mut g| {
        g.pop();
        g
    });
    for c in &cands {
        let kind = c.kind.expect("a known kind");
        let name = format!("{kind:?} m={} v={}", c.microbatches, c.stages_per_rank);
        ck.holds(&format!("{name}: v in range"), (1..=2).contains(&c.stages_per_rank));
        ck.count(&format!("{name}: micro-batch size"), c.microbatch_size, 8 / c.microbatches);
        let (time, peak) = brute_force(&cfg, kind, c.microbatches, c.stages_per_rank).expect("a valid candidate");
        ck.close(&format!("{name}: step time"), c.step_time, time, 1e-9);
        ck.close(&format!("{name}: peak bytes"), c.peak_bytes, peak, 1e-9);
        ck.equal(&format!("{name}: fits"), c.fits, peak <= cfg.memory_cap, |f| !f);
    }
    let order_ok =
        cands.windows(2).all(|w| if w[0].fits != w[1].fits { w[0].fits } else { w[0].step_time <= w[1].step_time });
    ck.holds("sorted: fitting first, then by step time", order_ok);
    let want_best = cands
        .iter()
        .enumerate()
        .filter(|(_, c)| c.fits)
        .min_by(|a, b| a.1.step_time.partial_cmp(&b.1.step_time).unwrap())
        .map(|(i, _)| i);
    ck.holds("some candidate fits and some does not", cands.iter().any(|c| c.fits) && cands.iter().any(|c| !c.fits));
    ck.equal("best", best.map(|b| cands[b].step_time), want_best.map(|b| cands[b].step_time), |b| b.map(|t| t + 1.0));
    let short = TuneConfig { layer_backward: vec![1.0], ..cfg };
    ck.holds("mismatched layer arrays refused", tune(&short).is_err());
    ck.finish();
}

#[test]
fn broken_schedules_and_bad_arguments_are_refused() {
    let mut ck = Checks::new("refusals");
    let e = gen(ScheduleKind::DualPipeV, 2, 3, 0, false).expect_err("DualPipeV with m < 2p");
    ck.equal("DualPipeV m < 2p status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    ck.contains("DualPipeV m < 2p message", e.message(), "2p");
    let e = gen(ScheduleKind::Interleaved1F1B, 2, 3, 2, false).expect_err("interleaved with m = 3 at p = 2");
    ck.equal("interleaved m status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    let a = |k, st, m| Action::new(k, st, Some(m));
    use ActionKind::*;
    // GPipe p = 2, m = 1 without rank 1's backward: built, inspected, refused by validate.
    let skip = ok("create", Schedule::from_actions(&[vec![a(F, 0, 0), a(B, 0, 0)], vec![a(F, 1, 0)]]));
    let e = skip.validate().expect_err("a schedule without stage 1's backward");
    ck.equal("skipped backward status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    ck.contains("skipped backward names the rule", e.message(), "complete");
    // Rank 0 waits for the gradient before it sends the activation rank 1 waits for.
    let lock = ok(
        "create",
        Schedule::from_actions(&[
            vec![a(F, 0, 0), a(RecvB, 0, 0), a(B, 0, 0), a(SendF, 0, 0)],
            vec![a(RecvF, 1, 0), a(F, 1, 0), a(B, 1, 0), a(SendB, 1, 0)],
        ]),
    );
    let e = lock.validate().expect_err("a deadlocking schedule");
    ck.contains("deadlock names the rule", &e.message().to_lowercase(), "deadlock");
    let e = Schedule::from_actions(&[vec![Action::new(ActionKind::Unknown(77), 0, Some(0))]]).expect_err("kind 77");
    ck.equal("unknown kind status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    let s = ok("gpipe", gen(ScheduleKind::Gpipe, 2, 2, 0, false));
    ck.holds("rank out of range", s.actions(2).is_err());
    let e = s.stage_rank(5).expect_err("a stage out of range");
    ck.contains("stage out of range named", e.message(), "stage = 5");
    let e = Schedule::from_csv("0F0,0X1\r\n").expect_err("a bad cell");
    ck.contains("bad CSV cell named", e.message(), "0X1");
    ck.holds("missing file refused", Schedule::load("/nonexistent/weft.sched").is_err());
    ck.finish();
}

fn solo() -> Comm {
    let id = UniqueId::new().expect("weft_get_unique_id");
    let cfg = Config { timeout: Some(std::time::Duration::from_secs(20)), ..Config::default() };
    Comm::init(&id, 0, 1, Some(&cfg)).expect("one-rank weft_comm_init")
}

#[test]
fn executor_on_one_rank_equals_the_reference() {
    let mut ck = Checks::new("one-rank executor");
    let comm = solo();
    let (stages, m) = (2usize, 3usize);
    // Two stages on one rank (handed over in memory), 1F1B-like order, I/W split on stage 1.
    let a = |k, st, mb| Action::new(k, st, Some(mb));
    use ActionKind::*;
    let mut list = Vec::new();
    for i in 0..m {
        list.extend([a(F, 0, i), a(F, 1, i), a(I, 1, i), a(B, 0, i), a(W, 1, i)]);
    }
    list.push(Action::new(ReduceGrad, 0, None));
    list.push(Action::new(ReduceGrad, 1, None));
    let sched = ok("create", Schedule::from_actions(&[list.clone()]));
    ok("validate", sched.validate());
    let state = model::FrameworkState::new(stages, m);
    let cfg = PipelineConfig {
        callbacks: model::callbacks(&state),
        boundaries: vec![Boundary::host::<f32>(&[model::WIDTH])],
        record: true,
    };
    let mut pipe = ok("pipeline", Pipeline::new(&comm, &sched, cfg));
    let t = ok("run", pipe.run()).expect("a recorded timeline");
    ck.count("timeline ranks", t.ranks(), 1);
    ck.count("recorded actions", ok("rank", t.rank(0)).start.len(), list.len());
    ck.holds("makespan positive", t.makespan() > 0.0);
    drop(pipe);
    let want = model::reference(stages, m);
    let st = state.borrow();
    for s in 0..stages {
        ck.close(&format!("grad a[{s}]"), st.grad_a[s] as f64, want.grad_a[s] as f64, 1e-5);
        ck.close(&format!("grad c[{s}]"), st.grad_c[s] as f64, want.grad_c[s] as f64, 1e-5);
        ck.equal(&format!("REDUCE_GRAD({s}) after all backwards"), st.reduce_calls[s].clone(), vec![m], |mut v| {
            v.push(0);
            v
        });
    }
    for i in 0..m {
        ck.close(&format!("loss {i}"), st.losses[&i], want.losses[i], 1e-5);
        ck.all_close(&format!("stage 1 input {i}"), &st.seen_inputs[&(1, i)], &want.inputs[&(1, i)], 1e-6);
    }
    ck.count("callback calls", st.calls, list.len());
    ck.finish();
}

#[test]
fn closure_errors_and_panics_come_back_with_their_text() {
    let mut ck = Checks::new("callback failures");
    let sched = ok("gpipe", gen(ScheduleKind::Gpipe, 1, 2, 0, false));
    let failing = |panic: bool| Callbacks {
        forward: Some(Box::new(move |call: &mut weft::StageCall<'_>| {
            if call.microbatch() == Some(1) {
                if panic {
                    panic!("deliberate panic in micro-batch 1");
                }
                return Err("the model refused micro-batch 1".to_string());
            }
            Ok(())
        })),
        backward: Some(Box::new(|_: &mut weft::StageCall<'_>| Ok(()))),
        ..Callbacks::default()
    };
    for (panic, text) in [(false, "the model refused micro-batch 1"), (true, "deliberate panic in micro-batch 1")] {
        // A failed step leaves its communicator unusable: a fresh one each time.
        let comm = solo();
        let cfg = PipelineConfig { callbacks: failing(panic), ..PipelineConfig::default() };
        let mut pipe = ok("pipeline", Pipeline::new(&comm, &sched, cfg));
        let e = pipe.run().expect_err("a failing callback");
        ck.contains(&format!("panic={panic}: the closure's text"), e.message(), text);
        ck.contains(&format!("panic={panic}: the action"), e.message(), "0F1");
        ok("destroy after a failed step", pipe.destroy());
    }
    let comm = solo();
    let missing = PipelineConfig::default();
    let e = Pipeline::new(&comm, &sched, missing).expect_err("no forward callback");
    ck.contains("missing forward named", e.message(), "forward");
    let nob = PipelineConfig {
        callbacks: Callbacks { forward: Some(Box::new(|_: &mut weft::StageCall<'_>| Ok(()))), ..Callbacks::default() },
        ..PipelineConfig::default()
    };
    let e = Pipeline::new(&comm, &sched, nob).expect_err("B actions without a backward callback");
    ck.contains("missing backward named", e.message(), "backward");
    ck.finish();
}
