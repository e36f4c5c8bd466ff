//! Multi-rank test of the training family (weft/training.h). Run by `cargo test`, it starts
//! `weftrun -n 3 <this test binary>` with WEFT_RUST_TRAINING_CHILD=1 and checks the job's exit
//! status. Each rank then
//!  - checks bucketer reductions (all-reduce and reduce-scatter, f32 and f64 in one bucketer)
//!    against a plain sum computed here;
//!  - trains tests/common/mlp.rs's MLP data-parallel with the bucketer, and with ZeRO stages 0-3
//!    (AdamW; SGD with momentum at stage 3; a save/load in the middle at stage 1), and compares
//!    the parameters with the same training done here in one process (<= 1e-5 relative);
//!  - refuses bad input (a gradient marked twice, given twice) with messages naming it;
//!  - smoke-tests region_apply (each region, forward and backward) and ring_shift.
//!
//! weftrun: $WEFTRUN, else the repository's build/bin/weftrun.

#[path = "common/launcher.rs"]
mod launcher;

use weft::{
    region_apply, region_apply_in_place, ring_shift, Bucketer, BucketerConfig, Comm, Mesh, Op, OptimizerConfig,
    Reduction, Region, Status, TensorView, Zero, ZeroConfig,
};

#[path = "common/mlp.rs"]
mod mlp;
use mlp::{Params, RefOpt};

const RANKS: usize = 3;
const CHILD_FLAG: &str = "WEFT_RUST_TRAINING_CHILD";
const TOLERANCE: f64 = 1e-5;

#[test]
fn training_multirank() {
    if launcher::is_child(CHILD_FLAG) {
        child();
        return;
    }
    launcher::run_under_weftrun("training_multirank", RANKS, CHILD_FLAG, 180);
}

fn ok<T>(what: &str, r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn child() {
    let comm = ok("init", Comm::from_env());
    assert_eq!(comm.size(), RANKS);
    bucketer_reductions(&comm);
    bucketer_training(&comm);
    bucketer_bad_input(&comm);
    let mesh = ok("dp mesh", Mesh::new(&comm, &[RANKS], &["dp"]));
    zero_training(&comm, &mesh);
    zero_bad_input(&mesh);
    regions(&comm);
    ok("final barrier", comm.barrier());
    if comm.rank() == 0 {
        eprintln!("training_multirank: every check passed on {RANKS} ranks");
    }
}

// ------------------------------------------------------------------ bucketer

/// Gradient g's element i on rank r: small integers, so every sum is exact.
fn grad_value(r: usize, g: usize, i: usize) -> f64 {
    ((i * 7 + g * 3 + r) % 9) as f64 - 4.0
}

fn bucketer_reductions(comm: &Comm) {
    let (rank, n) = (comm.rank(), comm.size());
    let sum = |g: usize, i: usize| (0..n).map(|r| grad_value(r, g, i)).sum::<f64>();
    for reduction in [Reduction::AllReduce, Reduction::ReduceScatter] {
        // Three f32 gradients (1, 7 and 1000 elements) and one f64 (a bucket of its own: the
        // dtype changes), 64-byte buckets so several buckets reduce while others fill.
        let mut a: Vec<f32> = (0..1).map(|i| grad_value(rank, 0, i) as f32).collect();
        let mut b: Vec<f32> = (0..7).map(|i| grad_value(rank, 1, i) as f32).collect();
        let mut c: Vec<f32> = (0..1000).map(|i| grad_value(rank, 2, i) as f32).collect();
        let mut d: Vec<f64> = (0..13).map(|i| grad_value(rank, 3, i)).collect();
        let views = vec![
            ok("view", TensorView::contiguous(&mut a, &[1])),
            ok("view", TensorView::contiguous(&mut b, &[7])),
            ok("view", TensorView::contiguous(&mut c, &[10, 100])),
            ok("view", TensorView::contiguous(&mut d, &[13])),
        ];
        let cfg = BucketerConfig { bucket_bytes: 64, op: Op::Sum, reduction, ..BucketerConfig::default() };
        let mut bk = ok("bucketer", Bucketer::new(comm, views, &cfg));
        assert_eq!(bk.len(), 4);
        let nb = ok("num_buckets", bk.num_buckets());
        assert!(nb >= 3, "{nb} buckets");
        for g in [3, 2, 1, 0] {
            ok("mark_ready", bk.mark_ready(g));
        }
        ok("finish", bk.finish());
        let sizes = [1usize, 7, 1000, 13];
        for (g, &size) in sizes.iter().enumerate() {
            if reduction == Reduction::AllReduce {
                let got: Vec<f64> = if g == 3 {
                    ok("grad", bk.grad::<f64>(g)).to_vec()
                } else {
                    ok("grad", bk.grad::<f32>(g)).iter().map(|&x| x as f64).collect()
                };
                let want: Vec<f64> = (0..size).map(|i| sum(g, i)).collect();
                assert_eq!(got, want, "all-reduced gradient {g}");
                continue;
            }
            // The part of gradient g inside this rank's chunk of its bucket.
            let (bucket, goff) = ok("bucket_of", bk.bucket_of(g));
            let check = |soff: usize, shard: &[f64]| {
                let (lo, hi) = (goff.max(soff), (goff + size).min(soff + shard.len()));
                for e in lo..hi {
                    assert_eq!(shard[e - soff], sum(g, e - goff), "reduce-scattered gradient {g} element {}", e - goff);
                }
            };
            if g == 3 {
                let (soff, s) = ok("shard", bk.shard::<f64>(bucket));
                check(soff, s);
            } else {
                let (soff, s) = ok("shard", bk.shard::<f32>(bucket));
                check(soff, &s.iter().map(|&x| x as f64).collect::<Vec<_>>());
            }
        }
        let st = ok("stats", bk.stats());
        assert_eq!(st.steps, 1);
        assert!(st.wire_bytes > 0);
        ok("destroy", bk.destroy());
    }
}

fn bucketer_training(comm: &Comm) {
    let (rank, n) = (comm.rank(), comm.size());
    let rows = mlp::BATCH / n;
    let steps = 10;
    let mut params = mlp::init_params(7);
    let mut opt = RefOpt::adamw(0.01);
    // Registered in backward's order (W2, b2, W1, b1), 100-byte buckets: a few of them.
    let order = [2usize, 3, 0, 1];
    let mut store: Params = order.iter().map(|&p| vec![0f32; mlp::count(p)]).collect();
    {
        let views = store
            .iter_mut()
            .zip(order)
            .map(|(g, p)| TensorView::contiguous(g, mlp::SHAPES[p]))
            .collect::<weft::Result<Vec<_>>>();
        let names = order.iter().map(|&p| mlp::NAMES[p].to_string()).collect();
        let cfg = BucketerConfig { bucket_bytes: 100, names: Some(names), ..BucketerConfig::default() };
        let mut bk = ok("bucketer", Bucketer::new(comm, ok("views", views), &cfg));
        assert!(ok("num_buckets", bk.num_buckets()) > 1);
        for step in 0..steps {
            let (x, y) = mlp::batch(step);
            let a = mlp::forward(&params, &x, rank * rows, rows);
            mlp::backward(&params, &a, &y, rows as f32, |p, g| {
                let slot = order.iter().position(|&q| q == p).unwrap();
                ok("grad_mut", bk.grad_mut::<f32>(slot)).copy_from_slice(g);
                ok("mark_ready", bk.mark_ready(slot));
            });
            ok("finish", bk.finish());
            let grads: Params = (0..4)
                .map(|p| ok("grad", bk.grad::<f32>(order.iter().position(|&q| q == p).unwrap())).to_vec())
                .collect();
            opt.step(&mut params, &grads);
        }
        assert_eq!(ok("stats", bk.stats()).steps, steps as u64);
    }
    let want = mlp::reference(steps, RefOpt::adamw(0.01));
    for p in 0..4 {
        let e = mlp::rel_err(&params[p], &want[p]);
        if rank == 0 {
            eprintln!("bucketer DP parity {}: relative error {e:.2e}", mlp::NAMES[p]);
        }
        assert!(e <= TOLERANCE, "bucketer training, {}: relative error {e:e}", mlp::NAMES[p]);
    }
}

fn bucketer_bad_input(comm: &Comm) {
    let (mut w, mut b) = (vec![1f32; 10], vec![2f32; 5]);
    let names = vec!["layer.weight".to_string(), "layer.bias".to_string()];
    let cfg = BucketerConfig { names: Some(names), ..BucketerConfig::default() };
    let mut bk = ok("bucketer", Bucketer::from_slices(comm, vec![&mut w[..], &mut b[..]], &cfg));
    ok("mark 0", bk.mark_ready(0));
    let e = bk.mark_ready(0).expect_err("marking a gradient twice must fail");
    assert_eq!(e.status(), Status::InvalidArgument);
    assert!(e.message().contains("layer.weight"), "the error names the gradient: {e}");
    assert!(bk.grad_mut::<f32>(0).is_err(), "a marked gradient cannot be written before finish");
    ok("mark 1", bk.mark_ready(1));
    ok("finish", bk.finish());
    assert!(bk.grad::<f64>(0).is_err(), "wrong element type");
    assert_eq!(ok("grad", bk.grad::<f32>(1)), &[2f32; 5]);
    let bad = BucketerConfig { bucket_of: Some(vec![0]), ..BucketerConfig::default() };
    let (mut x, mut y) = (vec![0f32; 3], vec![0f32; 3]);
    assert!(Bucketer::from_slices(comm, vec![&mut x[..], &mut y[..]], &bad).is_err(), "bucket_of of the wrong length");
}

// ------------------------------------------------------------------ ZeRO

const GROUPS: [usize; 4] = [0, 0, 1, 1];

fn make_zero<'m>(mesh: &'m Mesh, stage: u32, optimizer: OptimizerConfig) -> Zero<'m> {
    let init = mlp::init_params(7);
    let params: Vec<(&[f32], &[usize])> = (0..4).map(|p| (&init[p][..], mlp::SHAPES[p])).collect();
    let cfg = ZeroConfig {
        stage,
        optimizer,
        groups: Some(GROUPS.to_vec()),
        names: Some(mlp::NAMES.iter().map(|s| s.to_string()).collect()),
        ..ZeroConfig::default()
    };
    ok("zero", Zero::from_slices(mesh, "dp", &params, &cfg))
}

/// Every parameter, copied (stage 3: group 0 gathered blocking, group 1 as a prefetch request).
fn read_params(z: &mut Zero<'_>) -> Params {
    ok("gather 0", z.gather(0));
    ok("gather 1", ok("gather_async 1", z.gather_async(1)).wait());
    let p = (0..4).map(|q| ok("param", z.param::<f32>(q)).to_vec()).collect();
    ok("release 0", z.release(0));
    ok("release 1", z.release(1));
    p
}

fn train_zero(z: &mut Zero<'_>, first: usize, last: usize, rank: usize, n: usize) -> Vec<weft::StepInfo> {
    let rows = mlp::BATCH / n;
    let mut infos = Vec::new();
    for step in first..last {
        let (x, y) = mlp::batch(step);
        let p = read_params(z);
        let a = mlp::forward(&p, &x, rank * rows, rows);
        mlp::backward(&p, &a, &y, rows as f32, |q, g| ok("grad_ready", z.grad_ready(q, g)));
        infos.push(ok("step", z.step()));
    }
    infos
}

fn adamw() -> OptimizerConfig {
    OptimizerConfig { lr: 0.01, ..OptimizerConfig::default() }
}

fn expect_parity(what: &str, got: &Params, want: &Params, rank: usize) {
    for p in 0..4 {
        let e = mlp::rel_err(&got[p], &want[p]);
        if rank == 0 {
            eprintln!("{what} parity {}: relative error {e:.2e}", mlp::NAMES[p]);
        }
        assert!(e <= TOLERANCE, "{what}, {}: relative error {e:e}", mlp::NAMES[p]);
    }
}

fn zero_training(comm: &Comm, mesh: &Mesh) {
    let (rank, n) = (comm.rank(), comm.size());
    let steps = 8;
    let want = mlp::reference(steps, RefOpt::adamw(0.01));
    let mut memory = Vec::new();
    for stage in 0..=3 {
        let mut z = make_zero(mesh, stage, adamw());
        assert_eq!(ok("num_groups", z.num_groups()), 2);
        assert_eq!((0..4).map(|p| ok("group_of", z.group_of(p))).collect::<Vec<_>>(), GROUPS);
        let infos = train_zero(&mut z, 0, steps, rank, n);
        let m = ok("memory", z.memory());
        // P = the parameters, each group padded to a multiple of the dp size; f32: 4 bytes each.
        let padded = (mlp::count(0) + mlp::count(1)).div_ceil(n) * n + (mlp::count(2) + mlp::count(3)).div_ceil(n) * n;
        let shard = padded / n;
        assert_eq!(m.params, 4 * if stage == 3 { shard } else { padded } as u64, "stage {stage} params bytes");
        assert_eq!(m.optimizer, 8 * if stage == 0 { padded } else { shard } as u64, "stage {stage} AdamW state");
        for i in &infos {
            assert!(!i.skipped && i.grad_norm > 0.0 && i.loss_scale == 1.0, "stage {stage}: {i:?}");
            assert_eq!(i.comm_elements, 2 * padded as u64, "stage {stage}: elements moved per step");
        }
        expect_parity(&format!("ZeRO stage {stage}"), &read_params(&mut z), &want, rank);
        memory.push(m);
        ok("destroy", z.destroy());
    }
    assert_eq!(memory[1].optimizer * n as u64, memory[0].optimizer);

    // SGD with momentum at stage 3.
    let sgd = OptimizerConfig { kind: weft::Optimizer::Sgd, lr: 0.05, momentum: 0.9, ..OptimizerConfig::default() };
    let mut z = make_zero(mesh, 3, sgd);
    train_zero(&mut z, 0, steps, rank, n);
    expect_parity("ZeRO stage 3 SGD", &read_params(&mut z), &mlp::reference(steps, RefOpt::sgd(0.05, 0.9)), rank);
    drop(z);

    // Stage 1: 4 steps, saved, loaded into a fresh handle, 4 more steps = 8 steps.
    let mut buf = [0u8; 256];
    if rank == 0 {
        let d = std::env::temp_dir().join(format!("weft-rust-zero-{}", std::process::id()));
        let b = d.to_str().unwrap().as_bytes();
        buf[..b.len()].copy_from_slice(b);
    }
    ok("broadcast dir", comm.broadcast(&mut buf, 0));
    let dir = String::from_utf8(buf.iter().take_while(|&&c| c != 0).copied().collect()).unwrap();
    {
        let mut z = make_zero(mesh, 1, adamw());
        train_zero(&mut z, 0, steps / 2, rank, n);
        ok("save", z.save(&dir));
    }
    let mut z = make_zero(mesh, 1, adamw());
    ok("load", z.load(&dir));
    train_zero(&mut z, steps / 2, steps, rank, n);
    expect_parity("ZeRO stage 1 saved and resumed", &read_params(&mut z), &want, rank);
    drop(z);
    ok("barrier", comm.barrier());
    if rank == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn zero_bad_input(mesh: &Mesh) {
    let z = make_zero(mesh, 3, adamw());
    let e = z.param::<f32>(0).expect_err("stage 3: a parameter is readable only while gathered");
    assert_eq!(e.status(), Status::InvalidArgument);
    let g = vec![0.5f32; mlp::count(0)];
    ok("grad_ready", z.grad_ready(0, &g));
    let e = z.grad_ready(0, &g).expect_err("a gradient given twice must fail");
    assert!(e.message().contains("fc1.weight"), "the error names the parameter: {e}");
    assert!(z.grad_ready(1, &g).is_err(), "a gradient of the wrong length");
    let mut z = z;
    let e = z.step().expect_err("a step with missing gradients must fail");
    assert!(e.message().contains("fc1.bias"), "the error names the missing parameter: {e}");
}

// ------------------------------------------------------------------ regions, ring shift

fn regions(comm: &Comm) {
    let (rank, n) = (comm.rank(), comm.size());
    let tp = ok("tp mesh", Mesh::new(comm, &[n], &["tp"]));
    let (rows, cols) = (7usize, 2usize); // chunks of 3, 3 and 1 rows over 3 ranks
    let g: Vec<f32> = (0..rows * cols).map(|i| i as f32 - 5.0).collect();
    let chunk = rows.div_ceil(n);
    let (lo, hi) = ((rank * chunk).min(rows), ((rank + 1) * chunk).min(rows));
    let mine: Vec<f32> = g[lo * cols..hi * cols].to_vec();
    let scaled = |k: f32| g.iter().map(|x| x * k).collect::<Vec<f32>>();

    // SCATTER forward keeps this rank's chunk; GATHER forward all-gathers it (into a strided view:
    // every row at a stride of 4 elements).
    let mut out = vec![0f32; mine.len()];
    {
        let input = ok("view", TensorView::read_only(&g, &[rows, cols], None));
        let mut output = ok("view", TensorView::contiguous(&mut out, &[hi - lo, cols]));
        ok("scatter", region_apply(&tp, "tp", Region::Scatter, false, 0, &input, &mut output));
    }
    assert_eq!(out, mine, "SCATTER forward");
    let mut wide = vec![-1f32; rows * 4];
    {
        let input = ok("view", TensorView::read_only(&mine, &[hi - lo, cols], None));
        let mut output = ok("view", TensorView::strided(&mut wide, &[rows, cols], &[4, 1]));
        ok("gather", region_apply(&tp, "tp", Region::Gather, false, 0, &input, &mut output));
    }
    for r in 0..rows {
        assert_eq!(&wide[r * 4..r * 4 + 2], &g[r * cols..r * cols + 2], "GATHER forward row {r}");
        assert_eq!(&wide[r * 4 + 2..r * 4 + 4], &[-1.0, -1.0], "GATHER left the gaps alone");
    }
    // COPY backward = all-reduce (in place); REDUCE backward = identity.
    let mut x: Vec<f32> = scaled((rank + 1) as f32);
    {
        let mut v = ok("view", TensorView::contiguous(&mut x, &[rows, cols]));
        ok("copy backward", region_apply_in_place(&tp, "tp", Region::Copy, true, &mut v));
        ok("reduce backward", region_apply_in_place(&tp, "tp", Region::Reduce, true, &mut v));
    }
    let total = (n * (n + 1) / 2) as f32;
    assert_eq!(x, scaled(total), "COPY backward");
    // SEQ_REDUCE_SCATTER forward and SEQ_GATHER backward: reduce-scatter (sum); asynchronously.
    let part = scaled((rank + 1) as f32);
    let (mut rs1, mut rs2) = (vec![0f32; mine.len()], vec![0f32; mine.len()]);
    let (mut ring_in, mut ring_back) = (vec![0i64; 3], vec![0i64; 3]);
    let ring_send = vec![rank as i64 * 10; 3];
    {
        let input = ok("view", TensorView::read_only(&part, &[rows, cols], None));
        let mut o1 = ok("view", TensorView::contiguous(&mut rs1, &[hi - lo, cols]));
        let mut o2 = ok("view", TensorView::contiguous(&mut rs2, &[hi - lo, cols]));
        ok(
            "scope",
            comm.scope(|s| {
                let r1 = s.region_apply(&tp, "tp", Region::SeqReduceScatter, false, 0, &input, &mut o1)?;
                let r2 = s.region_apply(&tp, "tp", Region::SeqGather, true, 0, &input, &mut o2)?;
                let r3 = s.ring_shift(&tp, "tp", 1, &ring_send, &mut ring_in)?;
                r1.wait()?;
                r2.wait()?;
                r3.wait()
            }),
        );
    }
    let want: Vec<f32> = mine.iter().map(|v| v * total).collect();
    assert_eq!(rs1, want, "SEQ_REDUCE_SCATTER forward");
    assert_eq!(rs2, want, "SEQ_GATHER backward");
    let prev = (rank + n - 1) % n;
    assert_eq!(ring_in, vec![prev as i64 * 10; 3], "ring_shift by 1");
    ok("ring back", ring_shift(&tp, "tp", -1, &ring_in, &mut ring_back));
    assert_eq!(ring_back, ring_send, "ring_shift by -1 undoes it");
    let mut short = vec![0i64; 2];
    assert!(ring_shift(&tp, "tp", 3, &ring_send, &mut short).is_err(), "shift by the group size: recv too short");
    let mut nothing = vec![0f32; 1];
    let input = ok("view", TensorView::read_only(&g, &[rows, cols], None));
    let mut bad = ok("view", TensorView::contiguous(&mut nothing, &[1, 1]));
    let e = region_apply(&tp, "tp", Region::Scatter, false, 0, &input, &mut bad).expect_err("wrong out shape");
    assert!(e.message().contains("out"), "the error names the argument: {e}");
}
