//! Multi-rank test of the pipeline executor (weft/pipeline.h) with Rust closures as stage
//! callbacks. Run by `cargo test`, it starts `weftrun -n 3 <this test binary>` with
//! WEFT_RUST_PIPELINE_CHILD=1 and checks the job's exit status. Each rank then, for every
//! generator (p = 3, m = 6, REDUCE_GRAD on; 3 stages, or 6 for the interleaved and V-shaped
//! ones), runs two steps of tests/common/pipeline_model.rs's model and compares with the same
//! computation done here in one process: the input each stage's forward saw, the losses, and the
//! gradients of the stages this rank holds (two steps' worth), <= 1e-5 relative; REDUCE_GRAD
//! must come once per step after all of its stage's backwards; the recorded timeline must have a
//! time per action of every rank.
//! WEFT_TEST_INJECT=1: every check corrupts its value and must fail (tests/common/inject.rs).
//!
//! weftrun: $WEFTRUN, else the repository's build/bin/weftrun.

#[path = "common/inject.rs"]
mod inject;
#[path = "common/launcher.rs"]
mod launcher;
#[path = "common/pipeline_model.rs"]
mod model;

use inject::Checks;
use weft::{Boundary, Comm, Pipeline, PipelineConfig, Schedule, ScheduleConfig, ScheduleKind};

const RANKS: usize = 3;
const MICROBATCHES: usize = 6;
const STEPS: usize = 2;
const CHILD_FLAG: &str = "WEFT_RUST_PIPELINE_CHILD";
const TOLERANCE: f64 = 1e-5;

#[test]
fn pipeline_multirank() {
    if launcher::is_child(CHILD_FLAG) {
        child();
        return;
    }
    launcher::run_under_weftrun("pipeline_multirank", RANKS, CHILD_FLAG, 240);
}

fn ok<T>(what: &str, r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn child() {
    let comm = ok("init", Comm::from_env());
    assert_eq!(comm.size(), RANKS);
    let mut ck = Checks::new(&format!("pipeline_multirank rank {}", comm.rank()));
    for kind in ScheduleKind::GENERATORS {
        run_kind(&comm, kind, &mut ck);
    }
    ok("final barrier", comm.barrier());
    ck.finish();
    if comm.rank() == 0 {
        eprintln!("pipeline_multirank: every generator matched the one-process model on {RANKS} ranks");
    }
}

fn run_kind(comm: &Comm, kind: ScheduleKind, ck: &mut Checks) {
    let rank = comm.rank();
    let cfg = ScheduleConfig { ranks: RANKS, microbatches: MICROBATCHES, stages_per_rank: 0, reduce_grad: true };
    let cfg = if kind == ScheduleKind::Interleaved1F1B { ScheduleConfig { stages_per_rank: 2, ..cfg } } else { cfg };
    let sched = ok(&format!("{kind:?}: generate"), Schedule::generate(kind, &cfg));
    let stages = ok("info", sched.info()).stages;
    let state = model::FrameworkState::new(stages, MICROBATCHES);
    let config = PipelineConfig {
        callbacks: model::callbacks(&state),
        boundaries: (0..stages - 1).map(|_| Boundary::host::<f32>(&[model::WIDTH])).collect(),
        record: true,
    };
    let mut pipe = ok(&format!("{kind:?}: pipeline"), Pipeline::new(comm, &sched, config));
    for step in 0..STEPS {
        let t = ok(&format!("{kind:?}: run step {step}"), pipe.run()).expect("a recorded timeline");
        ck.count(&format!("{kind:?} step {step}: timeline ranks"), t.ranks(), RANKS);
        for r in 0..RANKS {
            let n = ok("actions", sched.actions(r)).len();
            ck.count(&format!("{kind:?} step {step}: rank {r} recorded times"), ok("rank", t.rank(r)).start.len(), n);
        }
        ck.holds(&format!("{kind:?} step {step}: makespan positive"), t.makespan() > 0.0);
    }
    ok("destroy", pipe.destroy());

    let want = model::reference(stages, MICROBATCHES);
    let st = state.borrow();
    let mine: Vec<usize> = (0..stages).filter(|&s| ok("stage_rank", sched.stage_rank(s)) == Some(rank)).collect();
    ck.holds(&format!("{kind:?}: this rank holds a stage"), !mine.is_empty());
    for s in 0..stages {
        let name = format!("{kind:?} stage {s}");
        if !mine.contains(&s) {
            ck.holds(
                &format!("{name}: untouched on rank {rank}"),
                st.grad_a[s] == 0.0 && st.reduce_calls[s].is_empty(),
            );
            continue;
        }
        let steps = STEPS as f64;
        ck.close(&format!("{name}: grad a"), st.grad_a[s] as f64, steps * want.grad_a[s] as f64, TOLERANCE);
        ck.close(&format!("{name}: grad c"), st.grad_c[s] as f64, steps * want.grad_c[s] as f64, TOLERANCE);
        let after: Vec<usize> = (1..=STEPS).map(|k| k * MICROBATCHES).collect();
        ck.equal(&format!("{name}: REDUCE_GRAD after the backwards"), st.reduce_calls[s].clone(), after, |mut v| {
            v.reverse();
            v.push(0);
            v
        });
        for i in 0..MICROBATCHES {
            let seen = st.seen_inputs.get(&(s, i)).cloned().unwrap_or_default();
            ck.all_close(&format!("{name}: input of micro-batch {i}"), &seen, &want.inputs[&(s, i)], TOLERANCE);
        }
    }
    if mine.contains(&(stages - 1)) {
        for i in 0..MICROBATCHES {
            let got = st.losses.get(&i).copied().unwrap_or(f64::NAN);
            ck.close(&format!("{kind:?}: loss of micro-batch {i}"), got, want.losses[i], TOLERANCE);
        }
    }
}
