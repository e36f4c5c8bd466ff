//! The checks of the pipeline tests, with their injection proof: under WEFT_TEST_INJECT=1 every
//! check corrupts the value it was given (a number moved far off, a text or list changed, a
//! condition negated) and must then fail; a corruption that passes fails the test at
//! [`Checks::finish`]. Without the variable a failed check panics with its description.
#![allow(dead_code)]

use weft::Action;

pub struct Checks {
    inject: bool,
    injected: usize,
    caught: usize,
    what: String,
}

impl Checks {
    pub fn new(what: &str) -> Checks {
        let inject = std::env::var("WEFT_TEST_INJECT").map(|v| !v.is_empty() && v != "0").unwrap_or(false);
        Checks { inject, injected: 0, caught: 0, what: what.to_string() }
    }

    /// Records one check's outcome (`ok` computed on the possibly corrupted value).
    fn outcome(&mut self, ok: bool, describe: impl FnOnce() -> String) {
        if self.inject {
            self.injected += 1;
            if !ok {
                self.caught += 1;
            }
        } else if !ok {
            panic!("{}: {}", self.what, describe());
        }
    }

    /// `|got - want| <= tol * max(1, |want|)`.
    pub fn close(&mut self, what: &str, got: f64, want: f64, tol: f64) {
        let got = if self.inject { got + 1.0 + got.abs() } else { got };
        let ok = (got - want).abs() <= tol * want.abs().max(1.0);
        self.outcome(ok, || format!("{what}: got {got}, expected {want} (tolerance {tol} relative)"));
    }

    /// Element-wise [`Checks::close`] of two equally long vectors (one check).
    pub fn all_close(&mut self, what: &str, got: &[f32], want: &[f32], tol: f64) {
        let mut got: Vec<f64> = got.iter().map(|&x| x as f64).collect();
        if self.inject {
            match got.first_mut() {
                Some(x) => *x += 1.0 + x.abs(),
                None => got.push(0.0),
            }
        }
        let bad = if got.len() != want.len() {
            Some(format!("{} values, expected {}", got.len(), want.len()))
        } else {
            got.iter().zip(want).enumerate().find_map(|(i, (&g, &w))| {
                let w = w as f64;
                ((g - w).abs() > tol * w.abs().max(1.0)).then(|| format!("element {i}: got {g}, expected {w}"))
            })
        };
        self.outcome(bad.is_none(), || format!("{what}: {}", bad.clone().unwrap_or_default()));
    }

    pub fn equal<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T, corrupt: impl FnOnce(T) -> T) {
        let got = if self.inject { corrupt(got) } else { got };
        let ok = got == want;
        self.outcome(ok, || format!("{what}: got {got:?}, expected {want:?}"));
    }

    pub fn count(&mut self, what: &str, got: usize, want: usize) {
        self.equal(what, got, want, |g| g + 1);
    }

    pub fn text(&mut self, what: &str, got: &str, want: &str) {
        self.equal(what, got.to_string(), want.to_string(), |g| g + "x");
    }

    pub fn actions(&mut self, what: &str, got: &[Action], want: &[Action]) {
        let got: Vec<String> = got.iter().map(|a| a.to_string()).collect();
        let want: Vec<String> = want.iter().map(|a| a.to_string()).collect();
        self.equal(what, got, want, |mut g| {
            g.push("0F0".into());
            g
        });
    }

    pub fn holds(&mut self, what: &str, cond: bool) {
        let cond = if self.inject { !cond } else { cond };
        self.outcome(cond, || what.to_string());
    }

    /// `text` contains `part` (an error message naming what it should).
    pub fn contains(&mut self, what: &str, text: &str, part: &str) {
        let text = if self.inject { text.replace(part, "") } else { text.to_string() };
        self.outcome(text.contains(part), || format!("{what}: {text:?} does not contain {part:?}"));
    }

    /// Under injection: every corrupted check must have failed.
    pub fn finish(self) {
        if self.inject {
            eprintln!("{}: injection: {} cases, {} caught", self.what, self.injected, self.caught);
            assert!(
                self.injected > 0 && self.caught == self.injected,
                "{}: WEFT_TEST_INJECT: {} of {} corrupted results passed",
                self.what,
                self.injected - self.caught,
                self.injected
            );
        }
    }
}
