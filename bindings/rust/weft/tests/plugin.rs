//! weft/plugin.h through the safe binding, with the C plugin plugins/c_reduce: its manifest's
//! entries; calls by name of every argument type (I64, PTR + SIZE over Rust slices, TENSOR, STRING,
//! FN through a Rust [`Closure`]) and of the reduction operators, against references written here;
//! a type mismatch (weft's message names the argument and both types), a bad path, a closure that
//! fails. Then on 3 ranks under weftrun: a Rust [`UserOp`] (absmax of f64) and the plugin's
//! absmax and logsumexp entries in allreduce, against the reduction of every rank's inputs done
//! here.
//! The plugin: $WEFT_TEST_C_REDUCE_PLUGIN, else $WEFT_LIB_DIR/../plugins/libweft_c_reduce.so;
//! the tests say so and pass when it is not built.
//! WEFT_TEST_INJECT=1: every check corrupts its value and must fail (tests/common/inject.rs).

#[path = "common/inject.rs"]
mod inject;
#[path = "common/launcher.rs"]
mod launcher;

use std::ffi::{c_void, CString};
use std::path::PathBuf;

use inject::Checks;
use weft::{
    Closure, Comm, Costs, Dtype, Plugin, PluginKind, RouterConfig, Schedule, ScheduleConfig, ScheduleKind, Status,
    UserOp, Value, ValueType,
};

const RANKS: usize = 3;
const CHILD_FLAG: &str = "WEFT_RUST_PLUGIN_CHILD";

fn plugin_path() -> Option<String> {
    let path = match std::env::var("WEFT_TEST_C_REDUCE_PLUGIN") {
        Ok(p) if !p.is_empty() => PathBuf::from(p),
        _ => {
            let lib = std::env::var("WEFT_LIB_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../build/lib"));
            lib.join("../plugins/libweft_c_reduce.so")
        }
    };
    if path.exists() {
        Some(path.to_string_lossy().into_owned())
    } else {
        eprintln!("SKIPPED: the C plugin is not built at {} (set WEFT_TEST_C_REDUCE_PLUGIN)", path.display());
        None
    }
}

fn ok<T>(what: &str, r: weft::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn f64_of(v: Value<'_>) -> f64 {
    match v {
        Value::F64(x) => x,
        other => panic!("expected an F64 result, got {other:?}"),
    }
}

#[test]
fn plugin_manifest_and_calls() {
    let Some(path) = plugin_path() else { return };
    let mut c = Checks::new("plugin_manifest_and_calls");
    let p = ok("load", Plugin::load(&path));
    c.holds("name and version", !p.name().is_empty() && !p.version().is_empty());
    c.equal("abi major", p.abi().0, 1, |g| g + 1);
    let e = ok("lookup", p.entry("dot_f64"));
    c.equal(
        "dot_f64 signature",
        (e.ret, e.args.clone()),
        (ValueType::F64, vec![ValueType::Ptr, ValueType::Ptr, ValueType::Size]),
        |mut g| {
            g.1.pop();
            g
        },
    );
    let absmax = ok("lookup absmax", p.entry("absmax"));
    c.holds("absmax is a REDUCE_OP with an id", absmax.kind == PluginKind::ReduceOp && absmax.id >= 64);
    c.holds(
        "absmax dtypes",
        [Dtype::F32, Dtype::F64, Dtype::I32, Dtype::I64].iter().all(|d| absmax.dtypes.contains(d)),
    );
    c.holds("FUNCTION has no op", p.entry("add_i64").map(|e| e.op().is_none() && e.id == -1).unwrap_or(false));
    c.count(
        "entries listed",
        p.entries()
            .iter()
            .filter(|e| {
                ["add_i64", "dot_f64", "apply_twice", "tensor_sum", "strlen_u64", "absmax", "logsumexp", "sum_f32"]
                    .contains(&e.name.as_str())
            })
            .count(),
        8,
    );

    // Integers.
    let r = ok("add_i64", p.call("add_i64", &[Value::I64(1 << 40), Value::I64(-7)]));
    c.equal("add_i64", r, Value::I64((1 << 40) - 7), |_| Value::I64(0));
    // Pointers and SIZE over slices; the reference is a plain loop in f64 (the same order is not
    // assumed: within n * eps * sum|x y|).
    let x: Vec<f64> = (0..41).map(|i| (i as f64 * 0.37).sin()).collect();
    let y: Vec<f64> = (0..41).map(|i| 1.0 + i as f64 / 8.0).collect();
    let want: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
    let bound: f64 = x.iter().zip(&y).map(|(a, b)| (a * b).abs()).sum::<f64>() * 41.0 * f64::EPSILON;
    let got = f64_of(ok(
        "dot_f64",
        p.call(
            "dot_f64",
            &[Value::Ptr(x.as_ptr() as *mut c_void), Value::Ptr(y.as_ptr() as *mut c_void), Value::Size(x.len())],
        ),
    ));
    c.close("dot_f64", got, want, bound);
    // TENSOR: a contiguous float32 [3, 5] host tensor.
    let data: Vec<f32> = (0..15).map(|i| i as f32 * 0.25 - 1.0).collect();
    let shape = [3i64, 5];
    let t = weft::sys::weft_tensor_t {
        data: data.as_ptr() as *mut c_void,
        device_type: weft::sys::WEFT_DEVICE_CPU,
        device_id: 0,
        ndim: 2,
        dtype: weft::sys::WEFT_FLOAT32,
        shape: shape.as_ptr(),
        strides: std::ptr::null(),
        byte_offset: 0,
    };
    let got = f64_of(ok("tensor_sum", p.call("tensor_sum", &[Value::Tensor(&t)])));
    c.close("tensor_sum", got, data.iter().map(|&v| v as f64).sum(), 15.0 * f32::EPSILON as f64);
    // STRING.
    let s = CString::new("plugins from rust").unwrap();
    let r = ok("strlen_u64", p.call("strlen_u64", &[Value::Str(&s)]));
    c.equal("strlen_u64", r, Value::U64(17), |_| Value::U64(0));
    // FN: a Rust closure called twice by the plugin.
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let f = ok(
        "closure",
        Closure::new(ValueType::F64, &[ValueType::F64], move |a| {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            match a {
                [Value::F64(x)] => Ok(Value::F64(2.0 * x + 1.0)),
                _ => Err(format!("expected one F64, got {a:?}")),
            }
        }),
    );
    let got = f64_of(ok("apply_twice", p.call("apply_twice", &[Value::Fn(f.function()), Value::F64(3.0)])));
    c.close("apply_twice", got, 2.0 * (2.0 * 3.0 + 1.0) + 1.0, 0.0);
    c.count("closure calls", calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    c.equal("closure failures", ok("failures", f.failures()).0, 0, |g| g + 1);
    // A REDUCE_OP entry called by name: absmax of i64 against |a| max |b| written here.
    let a: Vec<i64> = (0..9).map(|i| (i - 4) * 1000 + i).collect();
    let b: Vec<i64> = (0..9).map(|i| 3500 - i * 777).collect();
    let mut dst = vec![0i64; 9];
    let r = ok(
        "absmax call",
        p.call(
            "absmax",
            &[
                Value::Ptr(dst.as_mut_ptr().cast()),
                Value::Ptr(a.as_ptr() as *mut c_void),
                Value::Ptr(b.as_ptr() as *mut c_void),
                Value::Size(9),
                Value::I32(Dtype::I64.raw()),
            ],
        ),
    );
    c.equal("absmax status", r, Value::I32(0), |_| Value::I32(1));
    let want: Vec<i64> = a.iter().zip(&b).map(|(x, y)| x.abs().max(y.abs())).collect();
    c.equal("absmax values", dst.clone(), want, |mut g| {
        g[0] += 1;
        g
    });

    // Errors: a mismatched type names the argument and both types; a bad path; a failing closure.
    let err = p.call("add_i64", &[Value::F64(1.5), Value::I64(2)]).unwrap_err();
    c.holds("mismatch is InvalidArgument", err.status() == Status::InvalidArgument);
    c.contains("mismatch message", err.message(), "expected I64, got F64");
    c.contains("mismatch names the entry", err.message(), "add_i64");
    let err = Plugin::load("/no/such/plugin.so").unwrap_err();
    c.contains("bad path message", err.message(), "/no/such/plugin.so");
    let bad =
        ok("closure", Closure::new(ValueType::F64, &[ValueType::F64], |_| Err("refused by the test".to_string())));
    let _ = p.call("apply_twice", &[Value::Fn(bad.function()), Value::F64(1.0)]);
    c.holds("failing closure counted", ok("failures", bad.failures()).0 >= 1);
    c.contains("failing closure message", &bad.last_error().unwrap_or_default(), "refused by the test");

    // The new config fields reach weft: an operator's id is no cost model or router selector.
    let sched = ok(
        "generate",
        Schedule::generate(ScheduleKind::OneFOneB, &ScheduleConfig { ranks: 2, microbatches: 4, ..Default::default() }),
    );
    let costs = Costs { forward: vec![1.0, 1.0], cost_model: absmax.id, microbatch_size: 2, ..Costs::default() };
    let err = sched.simulate(&costs).unwrap_err();
    c.contains("cost_model reaches weft", err.message(), &format!("no cost model with id {}", absmax.id));
    let err = Schedule::generate(
        ScheduleKind::Plugin(absmax.id),
        &ScheduleConfig { ranks: 2, microbatches: 4, ..Default::default() },
    )
    .unwrap_err();
    c.contains("schedule kind reaches weft", err.message(), &format!("no schedule generator with id {}", absmax.id));
    let cfg = RouterConfig { experts: 4, topk: 1, selector: absmax.id, ..RouterConfig::default() };
    let err = weft::route(&[0.0f32; 12], &cfg).unwrap_err();
    c.contains("selector reaches weft", err.message(), &format!("no router selector with id {}", absmax.id));
    c.finish();
}

#[test]
fn plugin_ops_multirank() {
    if launcher::is_child(CHILD_FLAG) {
        child();
        return;
    }
    if plugin_path().is_none() {
        return;
    }
    launcher::run_under_weftrun("plugin_ops_multirank", RANKS, CHILD_FLAG, 120);
}

/// Rank r's inputs (every rank can make every rank's).
fn inputs(rank: usize, n: usize, seed: u64) -> Vec<f64> {
    (0..n).map(|i| (((i as u64 * 7919 + rank as u64 * 104729 + seed * 13) % 2001) as f64 - 1000.0) / 97.0).collect()
}

fn child() {
    let path = plugin_path().expect("the parent found the plugin");
    let comm = ok("comm", Comm::from_env());
    let mut c = Checks::new(&format!("plugin_ops_multirank rank {}", comm.rank()));
    let n_ranks = comm.size();
    // A Rust operator (every rank creates it in the same order, so the ids agree).
    let op = ok(
        "UserOp",
        UserOp::create::<f64, _>("rust_absmax", |dst, a, b| {
            for i in 0..dst.len() {
                dst[i] = a[i].abs().max(b[i].abs());
            }
            Ok(())
        }),
    );
    let p = ok("load", Plugin::load(&path));
    let absmax = ok("absmax", p.entry("absmax")).op().expect("absmax is an operator");
    let lse = ok("logsumexp", p.entry("logsumexp")).op().expect("logsumexp is an operator");
    for &n in &[1usize, 10, 100_003] {
        let all: Vec<Vec<f64>> = (0..n_ranks).map(|r| inputs(r, n, n as u64)).collect();
        let want: Vec<f64> = (0..n).map(|i| all.iter().map(|v| v[i].abs()).fold(0.0, f64::max)).collect();
        for (what, o) in [("rust absmax", op.op()), ("plugin absmax", absmax)] {
            let mut x = all[comm.rank()].clone();
            ok(what, comm.allreduce_in_place(&mut x, o));
            c.equal(&format!("{what} n={n}"), x, want.clone(), |mut g| {
                g[n / 2] += 1.0;
                g
            });
        }
        // log-sum-exp merges: each within ~2 ulp of log(e^a + e^b); p - 1 merges, values <= ~12.
        let mut x = all[comm.rank()].clone();
        ok("logsumexp", comm.allreduce_in_place(&mut x, lse));
        let worst = (0..n).map(|i| {
            let m = all.iter().map(|v| v[i]).fold(f64::NEG_INFINITY, f64::max);
            let exact = m + all.iter().map(|v| (v[i] - m).exp()).sum::<f64>().ln();
            (x[i] - exact).abs() / exact.abs().max(1.0)
        });
        c.close(
            &format!("logsumexp n={n} (worst relative error)"),
            worst.fold(0.0, f64::max),
            0.0,
            8.0 * n_ranks as f64 * f64::EPSILON,
        );
    }
    c.holds("rust op had no failures", op.last_error().is_none());
    ok("barrier", comm.barrier());
    c.finish();
}
