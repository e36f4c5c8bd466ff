//! The planner (weft/plan.h) through the safe binding, one process: a one-layer model on 2 ranks
//! against closed forms written here from plan.h's cost model (pure data parallelism: step,
//! compute, communication, bytes sent, memory, and the Amdahl/Gustafson numbers; pure tensor
//! parallelism: step and communication), measured collectives replacing a collective's latency
//! term, the search's order and rules, the text files, and bad input refused with weft's message.
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
use weft::{
    LayoutPlan, PlanCluster, PlanCollective, PlanCollectiveKind, PlanConfig, PlanFormat, PlanLayer, PlanLayout,
    ScheduleKind, Status,
};

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

/// plan.h: a layer split over tp keeps its tp_replicated share r whole on every tp rank, so a rank
/// computes G (f + b) (r + (1 - r) / tp); tp_allreduces = 1 (an MLP alone) runs one ring
/// all-reduce of out x G per direction instead of Megatron's 2 (GPipe, one micro-batch of G).
/// The model file's tp_rep= and tp_ar= keys give the same; a share over 1 is refused.
#[test]
fn tp_replicated_share_and_allreduces() {
    let mut k = Checks::new("plan tp_replicated");
    let (tp, r) = (2.0, 0.25);
    let compute = G as f64 * (F + B) * (r + (1.0 - r) / tp); // 0.625 G (f + b)
    let (per, sent) = ring_allreduce(tp, OUT * G as f64); // 2 (n-1)/n x bytes / bw + 2 (n-1) x latency
    let mlp = [PlanLayer { name: "mlp".into(), tp_replicated: r, tp_allreduces: 1, ..model()[0].clone() }];
    let cl = cluster(1e9);
    let cfg = PlanConfig { global_batch: G, layout: Some(gpipe_m1(1, 2)), ..PlanConfig::new(&mlp, &cl) };
    let b = ok("create", LayoutPlan::create(&cfg).and_then(|p| p.layout(0)));
    k.count("tp", b.tp, 2);
    k.close("compute_seconds", b.compute_seconds, compute, REL);
    k.close("communication_seconds", b.communication_seconds, 2.0 * per, REL);
    k.close("step_seconds", b.step_seconds, compute + 2.0 * per, REL);
    k.close("communication_bytes", b.communication_bytes, 2.0 * sent, REL);

    let dir = std::env::temp_dir().join(format!("weft-plan-tprep-rs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mf, cf) = (dir.join("model.txt"), dir.join("cluster.txt"));
    std::fs::write(
        &mf,
        format!(
            "layer name=mlp params={P} fwd={F} bwd={B} act={ACT} out={OUT} tp_rep={r} tp_ar=1\n\
             train global_batch={G}\n"
        ),
    )
    .unwrap();
    std::fs::write(&cf, format!("cluster ranks_per_host=2 memory=1e9 intra_bw={BW} intra_lat={LAT}\n")).unwrap();
    let lcfg = PlanConfig { layout: Some(gpipe_m1(1, 2)), ..Default::default() };
    let got = ok("load", LayoutPlan::load(&mf, &cf, Some(&lcfg)).and_then(|p| p.layout(0)));
    k.close("file: tp_rep=0.25 tp_ar=1", got.step_seconds, compute + 2.0 * per, REL);
    std::fs::remove_dir_all(&dir).ok();

    let over = [PlanLayer { tp_replicated: 1.5, ..mlp[0].clone() }];
    let ocfg = PlanConfig { global_batch: G, layout: Some(gpipe_m1(1, 2)), ..PlanConfig::new(&over, &cl) };
    let e = LayoutPlan::create(&ocfg).expect_err("tp_replicated 1.5");
    k.equal("status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    k.contains("tp_replicated 1.5", e.message(), "tp_replicated");
    k.finish();
}

/// plan.h: grad_allreduce_bytes adds a ring all-reduce of that many bytes per parameter over the
/// replicas before the DP reduction; an MoE layer's shared_params are summed over tp once a step,
/// then reduced as dense ones, while its experts (params - shared, ep = 1) are reduced over their
/// dp x tp / ep = 2 replicas.
#[test]
fn grad_allreduce_bytes_and_shared_params() {
    let mut k = Checks::new("plan grad_allreduce_bytes/shared_params");
    let n = (G / 2) as f64;
    let (wide, _) = ring_allreduce(2.0, P * 8.0);
    let (plain, _) = ring_allreduce(2.0, P * 2.0);
    let (layers, cl) = (model(), cluster(1e9));
    let cfg = PlanConfig {
        global_batch: G,
        layout: Some(gpipe_m1(2, 1)),
        grad_allreduce_bytes: 8.0,
        ..PlanConfig::new(&layers, &cl)
    };
    let b = ok("create", LayoutPlan::create(&cfg).and_then(|p| p.layout(0)));
    k.close("dp 2, grad_allreduce_bytes 8: step", b.step_seconds, n * (F + B) + wide + plain, REL);
    k.close("dp 2, grad_allreduce_bytes 8: communication", b.communication_seconds, wide + plain, REL);

    let (s, tp) = (200.0, 2.0);
    let moe = [PlanLayer { name: "moe".into(), experts: 2, top_k: 1, shared_params: s, ..model()[0].clone() }];
    let gather = (tp - 1.0) / tp * OUT * G as f64 / BW + (tp - 1.0) * LAT;
    let (shared, _) = ring_allreduce(tp, s * 2.0);
    let (experts, _) = ring_allreduce(tp, (P - s) * 2.0);
    let compute = G as f64 * (F + B) / tp;
    let lay = PlanLayout { ep: 1, ..gpipe_m1(1, 2) };
    let mcfg = PlanConfig { global_batch: G, layout: Some(lay), ..PlanConfig::new(&moe, &cl) };
    let b = ok("create moe", LayoutPlan::create(&mcfg).and_then(|p| p.layout(0)));
    k.close("tp 2, shared 200: step", b.step_seconds, compute + 2.0 * gather + shared + experts, REL);
    k.close("tp 2, shared 200: static bytes", b.static_bytes, P * 16.0, REL);
    let over = [PlanLayer { shared_params: 2.0 * P, ..moe[0].clone() }];
    let ocfg = PlanConfig { global_batch: G, layout: Some(lay), ..PlanConfig::new(&over, &cl) };
    let e = LayoutPlan::create(&ocfg).expect_err("shared_params above params");
    k.equal("status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    k.contains("shared_params above params", e.message(), "shared_params");
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
        ..Default::default()
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

/// plan.h's measured collectives (the numbers of tests/unit/test_plan.cpp's
/// MeasuredCollectivesSetTheirLatencyTerm): within a host a measured entry replaces a collective's
/// latency term: the entry for the group's size, else the per-step cost of the nearest smaller
/// size, else of the nearest larger (per step: seconds / 2 (n - 1) for an all-reduce, / (n - 1)
/// for an all-to-all).
#[test]
fn measured_collectives_set_their_latency_term() {
    use PlanCollectiveKind::{AllReduce, AllToAll};
    let mut k = Checks::new("plan measured collectives");
    let host = |ranks: usize, measured: &[(PlanCollectiveKind, usize, f64)]| PlanCluster {
        ranks_per_host: ranks,
        memory_per_rank: 1e12,
        flops_per_rank: 1e12,
        intra_bandwidth: 1e9,
        intra_latency: 1e-5,
        intra_collectives: measured.iter().map(|&(kind, n, s)| PlanCollective::new(kind, n, s)).collect(),
        ..Default::default()
    };
    let step = |layers: &[PlanLayer], cl: &PlanCluster, batch: usize, ranks: usize, l: PlanLayout| {
        let cfg = PlanConfig { global_batch: batch, ranks, layout: Some(l), ..PlanConfig::new(layers, cl) };
        LayoutPlan::create(&cfg).and_then(|p| p.layout(0)).map(|l| l.step_seconds)
    };
    // tp 2 of a 2-rank host, fixed layout, m micro-batches of G / m samples: 3fG/2 compute and 4
    // all-reduces of out x mbs per micro-batch, each (n-1)/n x 2 x bytes / bw = bytes / bw plus
    // the latency term T: the measured all-reduce of 2 ranks, else 2 x intra_latency.
    let (g, m, f, out, bw, a) = (4usize, 2usize, 0.004, 1e6, 1e9, 1e-5);
    let mbs = (g / m) as f64;
    let bytes = out * mbs / bw;
    let dense =
        [PlanLayer { name: "dense".into(), params: 1e3, forward_seconds: f, output_bytes: out, ..Default::default() }];
    let tp = PlanLayout { tp: 2, schedule: Some(ScheduleKind::OneFOneB), microbatches: m, ..Default::default() };
    let compute = 3.0 * f * g as f64 / 2.0;
    let both = host(2, &[(AllToAll, 2, 5e-4), (AllReduce, 2, 7e-5)]);
    let got = ok("tp 2, measured", step(&dense, &both, g, 0, tp));
    k.close("tp 2, all-reduce of 2 measured at 70 us", got, compute + m as f64 * 4.0 * (bytes + 7e-5), REL);
    let got = ok("tp 2, all-to-all only", step(&dense, &host(2, &[(AllToAll, 2, 5e-4)]), g, 0, tp));
    k.close("tp 2, only all-to-alls measured: 2 latencies", got, compute + m as f64 * 4.0 * (bytes + 2.0 * a), REL);
    let got = ok("tp 2, none", step(&dense, &host(2, &[]), g, 0, tp));
    k.close("tp 2, nothing measured: 2 latencies", got, compute + m as f64 * 4.0 * (bytes + 2.0 * a), REL);

    // ep 4 on 4 of 8 ranks, 8 samples: 2 per rank, one micro-batch; 4 all-to-alls (dispatch and
    // combine in F and B) of (n-1)/n x top_k x out x B bytes, each with n - 1 = 3 steps of latency.
    let (n, b) = (4usize, 2.0);
    let moe = [PlanLayer {
        name: "moe".into(),
        experts: 8,
        top_k: 2,
        params: 4e6,
        forward_seconds: 0.001,
        output_bytes: 4e5,
        ..Default::default()
    }];
    let moved = (n as f64 - 1.0) / n as f64 * 2.0 * 4e5 * b / bw;
    let ep = PlanLayout { dp: n, ep: n, schedule: Some(ScheduleKind::OneFOneB), microbatches: 1, ..Default::default() };
    type Table<'a> = &'a [(PlanCollectiveKind, usize, f64)];
    let cases: [(&str, Table, f64); 3] = [
        (
            "ep 4: per step of the 2-rank entry",
            &[(AllToAll, 2, 3e-5), (AllToAll, 8, 7e-4), (AllReduce, 4, 1.0)],
            3.0 * 3e-5,
        ),
        ("ep 4: per step of the 8-rank entry", &[(AllToAll, 8, 7e-4)], 3.0 * 1e-4),
        ("ep 4: the 4-rank entry itself", &[(AllToAll, 4, 2e-4), (AllToAll, 2, 1.0)], 2e-4),
    ];
    for (what, table, latency) in cases {
        let got = ok(what, step(&moe, &host(8, table), 8, n, ep));
        k.close(what, got, 3.0 * 0.001 * b + 4.0 * (latency + moved), REL);
    }

    // The cluster file's intra_allreduce key gives the same closed form.
    let dir = std::env::temp_dir().join(format!("weft-plan-measured-rs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mf, cf) = (dir.join("model.txt"), dir.join("cluster.txt"));
    std::fs::write(&mf, format!("layer name=dense params=1e3 fwd={f} out={out}\ntrain global_batch={g}\n")).unwrap();
    std::fs::write(
        &cf,
        format!(
            "cluster ranks_per_host=2 memory=1e12 flops=1e12 intra_bw={bw} intra_lat={a}\n\
             cluster intra_allreduce=2:7e-5 intra_alltoall=2:5e-4\n"
        ),
    )
    .unwrap();
    let cfg = PlanConfig { layout: Some(tp), ..Default::default() };
    let got = ok("load", LayoutPlan::load(&mf, &cf, Some(&cfg)).and_then(|p| p.layout(0)));
    k.close("file: intra_allreduce=2:7e-5", got.step_seconds, compute + m as f64 * 4.0 * (bytes + 7e-5), REL);
    std::fs::remove_dir_all(&dir).ok();

    // A group larger than a host is refused, naming the entry.
    let e = step(&dense, &host(2, &[(AllReduce, 8, 1e-6)]), g, 0, tp).expect_err("8 ranks on a 2-rank host");
    k.equal("status", e.status(), Status::InvalidArgument, |_| Status::Internal);
    k.contains("a group larger than a host", e.message(), "intra_collectives[0].ranks");
    k.finish();
}
