//! Reduction operators written in Rust (`weft_op_create`): a function over slices becomes a
//! `weft_op_t` usable as [`Op::Custom`] in allreduce, reduce and reduce_scatter on host memory.
//!
//! ```no_run
//! let absmax = weft::UserOp::create::<f32, _>("absmax", |dst, a, b| {
//!     for i in 0..dst.len() { dst[i] = a[i].abs().max(b[i].abs()); }
//!     Ok(())
//! })?;
//! # let comm = weft::Comm::from_env()?; let mut x = vec![1.0f32; 4];
//! comm.allreduce_in_place(&mut x, absmax.op())?;
//! # Ok::<(), weft::Error>(())
//! ```
//!
//! weft calls the function once per chunk of a collective, from whichever thread runs it; every
//! rank must create its operators in the same order, and the function must be associative and
//! commutative (weft/plugin.h).
use std::ffi::{c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use weft_sys as sys;

use crate::error::{check, Error, Result};
use crate::types::{Op, WeftType};

type ReduceBody =
    dyn Fn(*mut c_void, *const c_void, *const c_void, usize) -> std::result::Result<(), String> + Send + Sync;

struct OpState {
    body: Box<ReduceBody>,
    last_error: Mutex<Option<String>>,
}

unsafe extern "C" fn reduce_trampoline(
    dst: *mut c_void,
    a: *const c_void,
    b: *const c_void,
    count: usize,
    _dtype: sys::weft_dtype_t,
    user_data: *mut c_void,
) -> sys::weft_status_t {
    // SAFETY: user_data is the Box<OpState> the UserOp owns (it unregisters before freeing it).
    let state = unsafe { &*(user_data as *const OpState) };
    let message = match catch_unwind(AssertUnwindSafe(|| (state.body)(dst, a, b, count))) {
        Ok(Ok(())) => return sys::WEFT_OK,
        Ok(Err(m)) => m,
        Err(panic) => format!("the operator panicked: {}", crate::pipeline::panic_text(&*panic)),
    };
    *state.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(message);
    sys::WEFT_ERR_INVALID_ARGUMENT
}

/// A registered operator (`weft_op_create`). Dropping it unregisters it (`weft_op_destroy`):
/// no collective may be using it then.
pub struct UserOp {
    id: sys::weft_op_t,
    name: String,
    state: Box<OpState>,
}

impl UserOp {
    /// Registers `f(dst, a, b)` (`dst[i] = a[i] op b[i]`) for element type `T`. When weft passes
    /// dst aliasing a or b, the aliased input is copied first so the slices never overlap.
    pub fn create<T, F>(name: &str, f: F) -> Result<UserOp>
    where
        T: WeftType,
        F: Fn(&mut [T], &[T], &[T]) -> std::result::Result<(), String> + Send + Sync + 'static,
    {
        let body = move |dst: *mut c_void, a: *const c_void, b: *const c_void, n: usize| {
            if n == 0 {
                return Ok(());
            }
            let (dst, a, b) = (dst as *mut T, a as *const T, b as *const T);
            // Copies of inputs that alias dst (weft allows dst == a or dst == b exactly).
            let copy = |p: *const T| -> Option<Vec<T>> {
                std::ptr::eq(p, dst).then(|| unsafe { std::slice::from_raw_parts(p, n) }.to_vec())
            };
            let (ca, cb) = (copy(a), copy(b));
            // SAFETY: weft passes count elements of T at each pointer; aliased inputs were copied.
            let out = unsafe { std::slice::from_raw_parts_mut(dst, n) };
            let x = ca.as_deref().unwrap_or_else(|| unsafe { std::slice::from_raw_parts(a, n) });
            let y = cb.as_deref().unwrap_or_else(|| unsafe { std::slice::from_raw_parts(b, n) });
            f(out, x, y)
        };
        let state = Box::new(OpState { body: Box::new(body), last_error: Mutex::new(None) });
        let cname = CString::new(name).map_err(|_| Error::invalid(format!("operator name {name:?} contains NUL")))?;
        let dtypes = [T::DTYPE.raw()];
        let mut cfg = sys::WEFT_OP_CONFIG_INIT;
        cfg.name = cname.as_ptr();
        cfg.fn_ = Some(reduce_trampoline);
        cfg.user_data = &*state as *const OpState as *mut c_void;
        cfg.dtypes = dtypes.as_ptr();
        cfg.ndtypes = dtypes.len();
        let mut id = 0;
        // SAFETY: a valid config (state outlives the registration: Drop unregisters first).
        check(unsafe { sys::weft_op_create(&cfg, &mut id) })?;
        Ok(UserOp { id, name: name.to_string(), state })
    }

    /// The operator for collectives.
    pub fn op(&self) -> Op {
        Op::Custom(self.id)
    }

    /// The operator's id, usable as [`Op::Custom`].
    pub fn id(&self) -> sys::weft_op_t {
        self.id
    }

    /// The operator's name (for messages).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The function's message (its `Err` or panic) of the last failed call.
    pub fn last_error(&self) -> Option<String> {
        self.state.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for UserOp {
    fn drop(&mut self) {
        // SAFETY: unregistered before `state` is freed; weft calls it no more after this.
        unsafe { sys::weft_op_destroy(self.id) };
    }
}

impl std::fmt::Debug for UserOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UserOp({} {:?})", self.id, self.name)
    }
}
