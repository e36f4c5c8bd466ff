//! Single-process tests of the training family (weft/training.h): defaults against the header's
//! _INIT macros, and one-rank bucketer, ZeRO, regions and ring shift (the multi-rank tests are in
//! tests/training_multirank.rs).
use crate::*;

fn solo() -> Comm {
    let id = UniqueId::new().expect("weft_get_unique_id");
    let cfg =
        Config { timeout: Some(std::time::Duration::from_secs(20)), name: Some("solo".into()), ..Config::default() };
    Comm::init(&id, 0, 1, Some(&cfg)).expect("one-rank weft_comm_init")
}

#[test]
fn defaults_are_the_init_macros() {
    let b = BucketerConfig::default();
    assert_eq!((b.bucket_bytes, b.op, b.wire, b.reduction), (0, Op::Avg, Wire::Native, Reduction::AllReduce));
    let z = ZeroConfig::default();
    assert_eq!(
        (z.stage, z.param_dtype, z.grad_op, z.loss_scale, z.growth_interval),
        (2, Dtype::F32, Op::Avg, 1.0, 2000)
    );
    assert_eq!((z.growth, z.backoff, z.dynamic_loss_scale), (2.0, 0.5, false));
    let o = OptimizerConfig::default();
    assert_eq!(
        (o.kind, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay),
        (Optimizer::AdamW, 1e-3, 0.9, 0.999, 1e-8, 0.01)
    );
    assert_eq!(Region::SeqReduceScatter.raw(), sys::WEFT_REGION_SEQ_REDUCE_SCATTER);
    assert_eq!(Wire::Fp8E4M3.raw(), sys::WEFT_WIRE_FP8_E4M3);
    assert_eq!(Optimizer::Sgd.raw(), sys::WEFT_OPTIMIZER_SGD);
}

#[test]
fn one_rank_bucketer() {
    let comm = solo();
    let (mut a, mut b) = (vec![1.5f32; 5], vec![-2.0f32; 3]);
    let cfg = BucketerConfig { op: Op::Sum, reduction: Reduction::ReduceScatter, ..BucketerConfig::default() };
    let mut bk = Bucketer::from_slices(&comm, vec![&mut a[..], &mut b[..]], &cfg).unwrap();
    assert_eq!(bk.num_buckets().unwrap(), 1);
    assert_eq!(bk.bucket_of(1).unwrap(), (0, 5));
    bk.mark_ready(1).unwrap();
    bk.mark_ready(0).unwrap();
    bk.finish().unwrap();
    let (off, shard) = bk.shard::<f32>(0).unwrap();
    assert_eq!(off, 0);
    assert_eq!(shard, &[1.5, 1.5, 1.5, 1.5, 1.5, -2.0, -2.0, -2.0]);
    assert!(bk.shard::<f64>(0).is_err());
    assert!(bk.grad_mut::<f32>(2).is_err());
    assert_eq!(bk.stats().unwrap().steps, 1);
    bk.destroy().unwrap();
    let e = Bucketer::from_slices::<i32>(&comm, vec![&mut [1, 2][..]], &BucketerConfig::default()).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "integer gradients: {e}");
}

#[test]
fn one_rank_zero_and_regions() {
    let comm = solo();
    let mesh = Mesh::new(&comm, &[1], &["dp"]).unwrap();
    let w = vec![1.0f32, 2.0, 3.0, 4.0];
    let cfg = ZeroConfig {
        stage: 3,
        optimizer: OptimizerConfig { kind: Optimizer::Sgd, lr: 0.5, weight_decay: 0.0, ..OptimizerConfig::default() },
        ..ZeroConfig::default()
    };
    let params: [(&[f32], &[usize]); 1] = [(&w, &[2, 2])];
    let mut z = Zero::from_slices(&mesh, "dp", &params, &cfg).unwrap();
    assert_eq!((z.nparams(), z.num_groups().unwrap(), z.group_of(0).unwrap()), (1, 1, 0));
    assert!(z.param::<f32>(0).is_err(), "stage 3: not gathered yet");
    z.gather_async(0).unwrap().wait().unwrap();
    assert_eq!(z.param::<f32>(0).unwrap(), &w[..]);
    assert!(z.param::<Bf16>(0).is_err());
    z.release(0).unwrap();
    z.grad_ready(0, &[2.0f32; 4]).unwrap();
    let info = z.step().unwrap();
    assert!(!info.skipped && (info.grad_norm - 4.0).abs() < 1e-6, "{info:?}");
    z.gather(0).unwrap();
    assert_eq!(z.param::<f32>(0).unwrap(), &[0.0, 1.0, 2.0, 3.0]);
    assert!(z.memory().unwrap().params > 0);
    z.destroy().unwrap();

    let tp = Mesh::new(&comm, &[1], &["tp"]).unwrap();
    let x = [1.0f64, 2.0, 3.0];
    let mut y = [0.0f64; 3];
    {
        let input = TensorView::read_only(&x, &[3], None).unwrap();
        let mut out = TensorView::contiguous(&mut y, &[3]).unwrap();
        region_apply(&tp, "tp", Region::Gather, false, 0, &input, &mut out).unwrap();
        let ro = TensorView::read_only(&x, &[3], None).unwrap();
        let mut ro2 = TensorView::read_only(&x, &[3], None).unwrap();
        assert!(region_apply(&tp, "tp", Region::Copy, false, 0, &ro, &mut ro2).is_err(), "a read-only output");
        assert!(region_apply(&tp, "nope", Region::Copy, false, 0, &ro, &mut out).is_err(), "an unknown dim");
    }
    assert_eq!(y, x);
    let mut r = [0u8; 2];
    ring_shift(&tp, "tp", 1, &[7u8, 9], &mut r).unwrap();
    assert_eq!(r, [7, 9]);
}
