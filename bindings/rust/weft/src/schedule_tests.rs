//! Single-process tests of the pipeline types that need no schedule: defaults against the
//! header's _INIT macros, the C codes, and torch's action strings (the schedules, simulation,
//! tuning and executor are tested in tests/pipeline.rs and tests/pipeline_multirank.rs).
use crate::*;

#[test]
fn defaults_are_the_init_macros() {
    let c = ScheduleConfig::default();
    let i = sys::WEFT_SCHEDULE_CONFIG_INIT;
    assert_eq!((c.ranks, c.microbatches, c.stages_per_rank, c.reduce_grad), (1, 1, 0, false));
    assert_eq!((i.ranks, i.microbatches, i.stages_per_rank, i.reduce_grad), (1, 1, 0, 0));
    let t = TuneConfig::default();
    let ti = sys::WEFT_TUNE_CONFIG_INIT;
    assert_eq!((t.ranks, t.global_batch, t.max_stages_per_rank, t.max_microbatches), (1, 1, 0, 0));
    assert_eq!((ti.ranks, ti.global_batch, ti.max_stages_per_rank, ti.max_microbatches), (1, 1, 0, 0));
    assert!(t.kinds.is_none() && ti.kinds.is_null());
    assert_eq!(Costs::default().latency, sys::WEFT_PIPELINE_COSTS_INIT.latency);
    assert!(!PipelineConfig::default().record);
}

#[test]
fn codes_match_the_header() {
    let kinds = [
        (ActionKind::F, 0),
        (ActionKind::B, 1),
        (ActionKind::I, 2),
        (ActionKind::W, 3),
        (ActionKind::SendF, 4),
        (ActionKind::RecvF, 5),
        (ActionKind::SendB, 6),
        (ActionKind::RecvB, 7),
        (ActionKind::ReduceGrad, 8),
    ];
    for (k, code) in kinds {
        assert_eq!(k.raw(), code);
        assert_eq!(ActionKind::from_raw(code), k);
    }
    assert_eq!(ActionKind::from_raw(42), ActionKind::Unknown(42));
    for (i, k) in ScheduleKind::GENERATORS.iter().enumerate() {
        assert_eq!(k.raw(), i as i32);
        assert_eq!(ScheduleKind::from_raw(i as i32), Some(*k));
    }
    assert_eq!(ScheduleKind::from_raw(-1), Some(ScheduleKind::Custom));
    assert_eq!(ScheduleKind::from_raw(sys::WEFT_SCHEDULE_NUM_KINDS), None);
    assert_eq!(CsvFormat::ComputeOnly.raw(), sys::WEFT_CSV_COMPUTE_ONLY);
    assert_eq!(TimelineFormat::ChromeTrace.raw(), sys::WEFT_TIMELINE_CHROME_TRACE);
}

#[test]
fn actions_print_as_torch_writes_them() {
    assert_eq!(Action::new(ActionKind::F, 0, Some(0)).to_string(), "0F0");
    assert_eq!(Action::new(ActionKind::SendF, 1, Some(0)).to_string(), "1SEND_F0");
    assert_eq!(Action::new(ActionKind::I, 2, Some(3)).to_string(), "2I3");
    assert_eq!(Action::new(ActionKind::ReduceGrad, 1, None).to_string(), "1REDUCE_GRAD");
    let a = Action::new(ActionKind::RecvB, 3, Some(12));
    assert_eq!((a.kind(), a.stage(), a.microbatch()), (ActionKind::RecvB, 3, Some(12)));
    assert_eq!(a.raw(), sys::weft_action_t { kind: sys::WEFT_ACTION_RECV_B, stage: 3, microbatch: 12 });
    assert_eq!(std::mem::size_of::<Action>(), std::mem::size_of::<sys::weft_action_t>());
}
