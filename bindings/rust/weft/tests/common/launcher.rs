//! The one launcher of the multi-rank integration tests: the test binary starts
//! `weftrun -n RANKS <itself>` with `child_flag` set, and each rank then runs the test's child
//! half. weftrun: $WEFTRUN, else the repository's build/bin/weftrun.
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// True in a rank started by `run_under_weftrun` (run the child half then).
pub fn is_child(child_flag: &str) -> bool {
    std::env::var_os(child_flag).is_some()
}

/// Runs test `test_name` of this binary on `ranks` ranks under weftrun (job deadline
/// `timeout_s`) and fails when any rank fails.
pub fn run_under_weftrun(test_name: &str, ranks: usize, child_flag: &str, timeout_s: u32) {
    let weftrun = std::env::var_os("WEFTRUN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../build/bin/weftrun"));
    assert!(weftrun.exists(), "weftrun not found at {} (build weft, or set WEFTRUN)", weftrun.display());
    let exe = std::env::current_exe().unwrap();
    let start = Instant::now();
    let status = Command::new(&weftrun)
        .args(["-n", &ranks.to_string(), "--timeout", &timeout_s.to_string()])
        .arg(&exe)
        .args(["--exact", test_name, "--nocapture", "--test-threads=1", "-q"])
        .env(child_flag, "1")
        .env("WEFT_TIMEOUT", "60")
        .status()
        .expect("could not start weftrun");
    eprintln!("{test_name}: weftrun -n {ranks} finished in {:.1} s: {status}", start.elapsed().as_secs_f64());
    assert!(status.success(), "a rank failed (see its output above): {status}");
}
