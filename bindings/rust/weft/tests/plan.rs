//! The planner (weft/plan.h) through the safe binding, one process: a one-layer model on 2 ranks
//! against closed forms written here from plan.h's cost model (pure data parallelism: step,
//! compute, communication, bytes sent, memory, and the Amdahl/Gustafson numbers; pure tensor
//! parallelism: step and communication), the search's order and rules, the text files, and bad
//! input refused with weft's message.
//!
//! The reference (plan.h): a dense layer of P parameters, forward f and backward b seconds per
//! sample, on n samples in one micro-batch (GPipe, m = 1, pp = 1: no bubble) computes n (f + b).
//! Data parallelism over dp ranks then all-reduces the P x 2 gradient bytes in a ring:
//! 2 (dp - 1) / dp x bytes / bandwidth + 2 (dp - 1) x latency, sending 2 (dp - 1) / dp x bytes.
//! Tensor parallelism over tp divides the compute by tp and adds 4 ring all-reduces of
//! output_bytes x samples. Memory: P x (2 + 2 + 12) bytes plus one micro-batch's activations.
//! Tolerance 1e-9 relative: the library adds the same few doubles in another order (rounding
//! about 1e-15), while a wrong term moves the result by >= 1e-3 here.
//!
//! WEFT_TEST_INJECT=1: every check corrupts its value and must fail (tests/common/inject.rs).

#[path = "common/inject.rs"]
mod inject;

use inject::Checks;
use weft::{LayoutPlan, PlanCluster, PlanConfig, PlanFormat, PlanLayer, PlanLayout, ScheduleKind, Status};

const P: f64 = 1000.0;
const F: f64 = 1e-3;
const B: f64 = 3e-3;
const ACT: f64 = 100.0;
const OUT: f64 = 64.0;
const BW: f64 = 1e6;
const LAT: f64 = 1e-5;
const G: usize = 8;
const REL: f64 = 1e-9;

fn model() -> Vec<PlanLayer> {
    vec![PlanLayer {
        name: "fc".into(),
        params: P,
        forward_seconds: F,
        backward_seconds: B,
        activation_bytes: ACT,
        output_bytes: OUT,
        ..Default::default()
    }]
}

fn cluster(memory: f64) -> PlanCluster {
    PlanCluster {
        ranks_per_host: 2,
        memory_per_rank: memory,
        intra_bandwidth: BW,
        intra_latency: LAT,
        ..Default::default()
    }
}

/// (seconds, bytes a rank sends) of a ring all-reduce of `bytes` over n ranks (plan.h).
fn ring_allreduce(n: f64, bytes: f64) -> (f64, f64) {
    (2.0 * (n - 1.0) / n * bytes / BW + 2.0 * (n - 1.0) * LAT, 2.0 * (n - 1.0) / n * bytes)
}

fn predict(layout: PlanLayout) -> weft::Result<LayoutPlan> {
    let (layers, cl) = (model(), cluster(1e9));
    LayoutPlan::create(&PlanConfig { global_batch: G, layout: Some(layout), ..PlanConfig::new(&layers, &cl) })
}

fn gpipe_m1(dp: usize, tp: usize) -> PlanLayout {
    PlanLayout { dp, tp, schedule: Some(ScheduleKind::Gpipe), microbatches: 1, ..Default::default() }
}

fn ok<T>(what: &str, r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

#[test]
fn pure_data_parallel_matches_the_closed_form() {
    let mut k = Checks::new("plan dp=2");
    let n = (G / 2) as f64; // samples per replica, one micro-batch
    let compute = n * (F + B);
    let (comm, sent) = ring_allreduce(2.0, P * 2.0);
    let step = compute + comm;
    let plan = ok("create", predict(gpipe_m1(2, 1)));
    let info = ok("info", plan.info());
    k.count("kept", info.count, 1);
    k.count("ranks", info.ranks, 2);
    let b = ok("best", plan.best()).expect("a layout");
    k.count("dp", b.dp, 2);
    k.count("tp", b.tp, 1);
    k.count("pp", b.pp, 1);
    k.equal("schedule", b.schedule, Some(ScheduleKind::Gpipe), |_| Some(ScheduleKind::OneFOneB));
    k.holds("fits", b.fits);
    k.close("step_seconds", b.step_seconds, step, REL);
    k.close("compute_seconds", b.compute_seconds, compute, REL);
    k.close("communication_seconds", b.communication_seconds, comm, REL);
    k.close("communication_bytes", b.communication_bytes, sent, REL);
    k.close("static_bytes", b.static_bytes, P * 16.0, REL);
    k.close("activation_bytes", b.activation_bytes, n * ACT, REL);
    k.close("memory_per_rank", b.memory_per_rank, P * 16.0 + n * ACT, REL);

    let one_rank = G as f64 * (F + B);
    let speedup = one_rank / step;
    let s = (1.0 / speedup - 0.5) / 0.5;
    let (sum, points) = ok("scaling", plan.scaling());
    k.count("summary ranks", sum.ranks, 2);
    k.close("one_rank_seconds", sum.one_rank_seconds, one_rank, REL);
    k.close("speedup", sum.speedup, speedup, REL);
    k.close("efficiency", sum.efficiency, speedup / 2.0, REL);
    k.close("serial_fraction", sum.serial_fraction, s, REL);
    k.close("gustafson_speedup", sum.gustafson_speedup, 2.0 - s, REL);
    k.count("points", points.len(), 2);
    k.count("weak batch at 1", points[0].weak_batch, G / 2);
    k.close("weak step at 1", points[0].weak_seconds, n * (F + B), REL);
    k.close("amdahl at 2", points[1].amdahl_speedup, 1.0 / (s + (1.0 - s) / 2.0), REL);
    k.close("weak speedup at 2", points[1].weak_speedup, 2.0 * n * (F + B) / step, REL);
    ok("destroy", plan.destroy());
    k.finish();
}

#[test]
fn pure_tensor_parallel_matches_the_closed_form() {
    let mut k = Checks::new("plan tp=2");
    let compute = G as f64 * (F + B) / 2.0;
    let (per, sent) = ring_allreduce(2.0, OUT * G as f64);
    let plan = ok("create", predict(gpipe_m1(1, 2)));
    let b = ok("layout 0", plan.layout(0));
    k.count("tp", b.tp, 2);
    k.close("compute_seconds", b.compute_seconds, compute, REL);
    k.close("communication_seconds", b.communication_seconds, 4.0 * per, REL);
    k.close("step_seconds", b.step_seconds, compute + 4.0 * per, REL);
    k.close("communication_bytes", b.communication_bytes, 4.0 * sent, REL);
    k.finish();
}

/// Closed forms that only hold when each description field arrives where plan.h puts it (the
/// binding's field mapping): the inter-host link, flops, bytes per parameter and the overhead; an
/// MoE layer under expert parallelism; a layer kept whole over tp; context parallelism.
#[test]
fn every_field_reaches_the_library() {
    let mut k = Checks::new("plan fields");
    let n = (G / 2) as f64;
    let gm1 = |dp, tp, ep, cp| PlanLayout {
        dp,
        tp,
        ep,
        cp,
        schedule: Some(ScheduleKind::Gpipe),
        microbatches: 1,
        ..Default::default()
    };
    let create = |layers: &[PlanLayer], cl: &PlanCluster, l: PlanLayout, extra: fn(&mut PlanConfig<'_>)| {
        let mut cfg = PlanConfig { global_batch: G, layout: Some(l), ..PlanConfig::new(layers, cl) };
        extra(&mut cfg);
        ok("create", LayoutPlan::create(&cfg).and_then(|p| p.layout(0)))
    };
    // (a) 2 hosts of 1 rank: dp = 2 crosses hosts. Compute from flops; backward = 2 x forward;
    // 4 + 4 + 4 bytes per parameter; the 2 compute actions (F, B) of one micro-batch get the overhead.
    let (flops, ibw, ilat, over) = (1e9, 2e6, 3e-5, 1e-4);
    let hosts = PlanCluster {
        hosts: 2,
        ranks_per_host: 1,
        memory_per_rank: 1e9,
        flops_per_rank: flops,
        intra_bandwidth: BW,
        intra_latency: LAT,
        inter_bandwidth: ibw,
        inter_latency: ilat,
    };
    let by_flops = [PlanLayer {
        name: "fc".into(),
        params: P,
        forward_flops: F * flops,
        activation_bytes: ACT,
        output_bytes: OUT,
        ..Default::default()
    }];
    let b = create(&by_flops, &hosts, gm1(2, 1, 1, 1), |c| {
        c.weight_bytes = 4.0;
        c.grad_bytes = 4.0;
        c.optimizer_bytes = 4.0;
        c.microbatch_overhead = 1e-4;
    });
    k.close("inter-host dp: compute", b.compute_seconds, n * 3.0 * F, REL);
    k.close("inter-host dp: step", b.step_seconds, n * 3.0 * F + 2.0 * over + P * 4.0 / ibw + 2.0 * ilat, REL);
    k.close("inter-host dp: static", b.static_bytes, P * 12.0, REL);
    // (b) experts 2, top_k 1 over ep = 2 (dp = 2): 4 all-to-alls of top_k x out x n x 1/2 bytes; a
    // rank's expert has no other replica (no data-parallel reduction).
    let moe = [PlanLayer { experts: 2, top_k: 1, ..model()[0].clone() }];
    let a2a = OUT * n * 0.5 / BW + LAT;
    let b = create(&moe, &cluster(1e9), gm1(2, 1, 2, 1), |_| {});
    k.close("ep: communication", b.communication_seconds, 4.0 * a2a, REL);
    k.close("ep: step", b.step_seconds, n * (F + B) + 4.0 * a2a, REL);
    k.close("ep: static", b.static_bytes, P / 2.0 * 16.0, REL);
    // (c) tensor_parallel = false: every tp rank runs the whole layer, nothing to reduce over tp.
    let whole = [PlanLayer { tensor_parallel: false, ..model()[0].clone() }];
    let b = create(&whole, &cluster(1e9), gm1(1, 2, 1, 1), |_| {});
    k.close("unsplittable over tp: step", b.step_seconds, G as f64 * (F + B), REL);
    // (d) cp = 2: the work halves, 3 ring exchanges (1 forward, 2 backward) of kv x G x 1/2 bytes,
    // and the gradients are reduced over dp x cp = 2.
    let kv = 32.0;
    let ctx = [PlanLayer { context_bytes: kv, ..model()[0].clone() }];
    let b = create(&ctx, &cluster(1e9), gm1(1, 1, 1, 2), |_| {});
    let comm = 3.0 * (kv * G as f64 * 0.5 / BW + LAT) + ring_allreduce(2.0, P * 2.0).0;
    k.close("cp: communication", b.communication_seconds, comm, REL);
    k.close("cp: step", b.step_seconds, G as f64 * (F + B) / 2.0 + comm, REL);
    k.finish();
}

#[test]
fn search_ranks_by_step_time_and_formats() {
    let mut k = Checks::new("plan search");
    let (layers, cl) = (model(), cluster(1e9));
    let plan =
        ok("create", LayoutPlan::create(&PlanConfig { global_batch: G, top: 50, ..PlanConfig::new(&layers, &cl) }));
    let lays = ok("layouts", plan.layouts());
    k.count("count", lays.len(), ok("info", plan.info()).count);
    k.holds("every layout uses 2 ranks", lays.iter().all(|l| l.dp * l.tp * l.pp * l.cp == 2));
    k.holds("sorted by step", lays.windows(2).all(|w| w[0].step_seconds <= w[1].step_seconds));
    let dp_step = (G / 2) as f64 * (F + B) + ring_allreduce(2.0, P * 2.0).0;
    k.count("best is data parallel", lays[0].dp, 2);
    k.close("best step", lays[0].step_seconds, dp_step, REL);
    let one = ok("predict", predict(gpipe_m1(2, 1))); // the search may leave GPipe out where schedules tie
    k.contains("table", &ok("table", one.table()), "gpipe");
    k.contains("report", &ok("report", one.report()), "serial fraction");
    k.contains("json", &ok("json", one.format(PlanFormat::Json)), "\"layouts\"");

    let kinds = PlanConfig {
        global_batch: G,
        kinds: Some(vec![ScheduleKind::OneFOneB]),
        max_pp: 1,
        ..PlanConfig::new(&layers, &cl)
    };
    let only = ok("kinds", LayoutPlan::create(&kinds).and_then(|p| p.layouts()));
    k.holds("kinds filter", only.iter().all(|l| l.schedule == Some(ScheduleKind::OneFOneB) && l.pp == 1));

    let small = cluster(10.0); // 10 bytes: nothing fits
    let none =
        ok("tiny memory", LayoutPlan::create(&PlanConfig { global_batch: G, ..PlanConfig::new(&layers, &small) }));
    k.count("nothing kept", ok("info", none.info()).count, 0);
    k.holds("no best", ok("best", none.best()).is_none());
    let e = none.scaling().expect_err("scaling of a plan with no layout");
    k.contains("scaling error", e.message(), "no layout");
    k.finish();
}

#[test]
fn files_and_bad_input() {
    let mut k = Checks::new("plan files and errors");
    let dir = std::env::temp_dir().join(format!("weft-plan-rs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (m, c, bad) = (dir.join("model.txt"), dir.join("cluster.txt"), dir.join("bad.txt"));
    std::fs::write(
        &m,
        format!("layer name=fc params={P} fwd={F} bwd={B} act={ACT} out={OUT}\ntrain global_batch={G}\n"),
    )
    .unwrap();
    std::fs::write(&c, format!("# two ranks\ncluster ranks_per_host=2 memory=1e9 intra_bw={BW} intra_lat={LAT}\n"))
        .unwrap();
    std::fs::write(&bad, "# model\nlayer name=fc params=1 fwd=1 wat=3\n").unwrap();
    let cfg = PlanConfig { layout: Some(gpipe_m1(2, 1)), ..Default::default() };
    let loaded = ok("load", LayoutPlan::load(&m, &c, Some(&cfg)));
    let made = ok("create", predict(gpipe_m1(2, 1)));
    k.count("batch from the train line", ok("info", loaded.info()).global_batch, G);
    k.close("same step", ok("l", loaded.layout(0)).step_seconds, ok("c", made.layout(0)).step_seconds, REL);

    let e = LayoutPlan::load(&bad, &c, None).expect_err("an unknown key");
    k.equal("status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    k.contains("file:line", e.message(), "bad.txt:2");
    k.contains("the key", e.message(), "wat");
    let (layers, zero) = (model(), cluster(0.0));
    let e =
        LayoutPlan::create(&PlanConfig { global_batch: G, ..PlanConfig::new(&layers, &zero) }).expect_err("memory 0");
    k.contains("memory 0", e.message(), "memory_per_rank");
    let e = predict(PlanLayout { dp: 3, ..Default::default() }).expect_err("3 ranks of 2");
    k.contains("dp 3", e.message(), "dp 3");
    let e = ok("plan", predict(gpipe_m1(2, 1))).layout(5).expect_err("index past the end");
    k.equal("index status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    std::fs::remove_dir_all(&dir).ok();
    k.finish();
}
