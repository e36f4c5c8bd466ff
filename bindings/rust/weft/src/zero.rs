//! ZeRO stages 0-3 with a fused optimizer (`weft/training.h`): [`Zero`], [`ZeroConfig`],
//! [`OptimizerConfig`], [`Optimizer`], [`StepInfo`], [`ZeroMemory`], [`ZeroGather`].
use std::cell::Cell;
use std::ffi::{c_int, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;

use weft_sys as sys;

use crate::bucketer::empty_view;
use crate::error::{check, Error, Result};
use crate::mesh::Mesh;
use crate::sharded::TensorView;
use crate::training::{c_names, Wire};
use crate::types::{to_c_int, Dtype, Op, WeftType};

/// `weft_optimizer_kind_t`: torch.optim's formulas (foreach=False) in float32 per element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Optimizer {
    /// SGD with momentum (dampening 0), weight decay added to the gradient.
    Sgd,
    /// Adam, L2 weight decay added to the gradient.
    Adam,
    /// AdamW, decoupled weight decay.
    AdamW,
}

impl Optimizer {
    /// The C value (`weft_optimizer_kind_t`).
    pub fn raw(self) -> sys::weft_optimizer_kind_t {
        match self {
            Optimizer::Sgd => sys::WEFT_OPTIMIZER_SGD,
            Optimizer::Adam => sys::WEFT_OPTIMIZER_ADAM,
            Optimizer::AdamW => sys::WEFT_OPTIMIZER_ADAMW,
        }
    }
}

/// `weft_optimizer_config_t`; the default is `WEFT_OPTIMIZER_CONFIG_INIT` (AdamW, lr 1e-3,
/// betas (0.9, 0.999), eps 1e-8, weight decay 0.01).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptimizerConfig {
    /// Which optimizer.
    pub kind: Optimizer,
    /// Learning rate.
    pub lr: f32,
    /// SGD.
    pub momentum: f32,
    /// Adam, AdamW.
    pub beta1: f32,
    /// Adam, AdamW: the second moment's decay.
    pub beta2: f32,
    /// Adam, AdamW: added to the denominator.
    pub eps: f32,
    /// Weight decay (decoupled for AdamW, added to the gradient for SGD and Adam).
    pub weight_decay: f32,
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        let c = sys::WEFT_OPTIMIZER_CONFIG_INIT;
        OptimizerConfig {
            kind: Optimizer::AdamW,
            lr: c.lr,
            momentum: c.momentum,
            beta1: c.beta1,
            beta2: c.beta2,
            eps: c.eps,
            weight_decay: c.weight_decay,
        }
    }
}

impl OptimizerConfig {
    fn raw(&self) -> sys::weft_optimizer_config_t {
        sys::weft_optimizer_config_t {
            kind: self.kind.raw(),
            lr: self.lr,
            momentum: self.momentum,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: self.weight_decay,
            ..sys::WEFT_OPTIMIZER_CONFIG_INIT
        }
    }
}

/// ZeRO options (`weft_zero_config_t`); the default is `WEFT_ZERO_CONFIG_INIT` (stage 2, float32,
/// AdamW, 25 MiB groups, `Op::Avg`, native wire, no clipping, no loss scaling).
#[derive(Debug, Clone, PartialEq)]
pub struct ZeroConfig {
    /// 0 = plain data parallel; 1 = optimizer state sharded; 2 = + gradients; 3 = + parameters.
    pub stage: u32,
    /// `F32`, `Bf16` or `F16`: the parameters and gradients weft holds (16-bit ones with float32
    /// master weights).
    pub param_dtype: Dtype,
    /// The optimizer and its hyper-parameters.
    pub optimizer: OptimizerConfig,
    /// Each parameter's group (0, 1, ... without gaps, non-decreasing): one flat buffer, reduced,
    /// partitioned and (stage 3) gathered together. `None`: consecutive parameters up to
    /// `group_bytes` each.
    pub groups: Option<Vec<usize>>,
    /// 0 = 25 MiB.
    pub group_bytes: usize,
    /// Parameter names for messages and the saved state (`"param[i]"` otherwise).
    pub names: Option<Vec<String>>,
    /// `Op::Avg` (the mean over the data-parallel ranks) or `Op::Sum`.
    pub grad_op: Op,
    /// The format gradients travel in ([`Wire::Native`] = their own dtype).
    pub wire: Wire,
    /// Clip the unscaled gradients to this global L2 norm (0 = no clipping).
    pub max_grad_norm: f32,
    /// The factor the loss was multiplied by (1 = none); gradients are divided by it.
    pub loss_scale: f32,
    /// torch.amp.GradScaler's rule: a skipped step multiplies the scale by `backoff`,
    /// `growth_interval` clean steps in a row by `growth`.
    pub dynamic_loss_scale: bool,
    /// The factor the scale grows by (default 2).
    pub growth: f32,
    /// The factor the scale shrinks by after a skipped step (default 0.5).
    pub backoff: f32,
    /// Clean steps before the scale grows (default 2000).
    pub growth_interval: u32,
    /// As the bucketer's (compressed wires only).
    pub error_feedback: bool,
}

impl Default for ZeroConfig {
    fn default() -> Self {
        let c = sys::WEFT_ZERO_CONFIG_INIT;
        ZeroConfig {
            stage: c.stage as u32,
            param_dtype: Dtype::F32,
            optimizer: OptimizerConfig::default(),
            groups: None,
            group_bytes: 0,
            names: None,
            grad_op: Op::Avg,
            wire: Wire::Native,
            max_grad_norm: c.max_grad_norm,
            loss_scale: c.loss_scale,
            dynamic_loss_scale: false,
            growth: c.growth,
            backoff: c.backoff,
            growth_interval: c.growth_interval as u32,
            error_feedback: false,
        }
    }
}

/// What [`Zero::step`] did (`weft_zero_step_info_t`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepInfo {
    /// An inf/NaN gradient on some rank: no parameter changed.
    pub skipped: bool,
    /// Global L2 norm of the unscaled gradient, before clipping.
    pub grad_norm: f32,
    /// The scale to multiply the next step's loss by.
    pub loss_scale: f32,
    /// Elements this rank's collectives moved since the last step (all-reduce 2n,
    /// reduce-scatter n, all-gather n).
    pub comm_elements: u64,
    /// The same in bytes, in the wire format.
    pub comm_bytes: u64,
}

/// Bytes weft holds for this rank (`weft_zero_memory_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ZeroMemory {
    /// Bytes of this rank's parameters.
    pub params: u64,
    /// Bytes of this rank's gradients.
    pub grads: u64,
    /// float32 master weights and optimizer state.
    pub optimizer: u64,
    /// Communication buffers now (buckets, gathered stage-3 groups).
    pub buffers: u64,
    /// The most communication buffer bytes held at once so far.
    pub buffers_peak: u64,
}

/// A ZeRO handle (`weft_zero_t`) over a [`Mesh`] it borrows: weft holds the parameters,
/// gradients, optimizer state and master weights. Dropping it calls `weft_zero_destroy`.
///
/// One step: (stage 3: [`gather`](Zero::gather) each group, read it, [`release`](Zero::release)
/// it) read the parameters with [`param`](Zero::param) for forward and backward, hand in each
/// gradient with [`grad_ready`](Zero::grad_ready) as backward produces it, then
/// [`step`](Zero::step). Parameter slices borrow the handle, so `step`, `release` and `load`
/// (which change or free that memory) need them dropped first.
///
/// ```no_run
/// # fn f(comm: &weft::Comm) -> weft::Result<()> {
/// use weft::{Mesh, Zero, ZeroConfig};
/// let mesh = Mesh::new(comm, &[comm.size()], &["dp"])?;
/// let (w, b) = (vec![0.1f32; 12], vec![0f32; 3]);
/// let params: [(&[f32], &[usize]); 2] = [(&w, &[3, 4]), (&b, &[3])];
/// let mut z = Zero::from_slices(&mesh, "dp", &params, &ZeroConfig::default())?;
/// let grad_w = z.param::<f32>(0)?.iter().map(|x| 2.0 * x).collect::<Vec<_>>(); // backward
/// z.grad_ready(1, &[0.5f32; 3])?;
/// z.grad_ready(0, &grad_w)?;
/// let info = z.step()?;
/// println!("norm {} -> w[0] = {}", info.grad_norm, z.param::<f32>(0)?[0]);
/// # Ok(()) }
/// ```
///
/// A parameter slice cannot outlive the step that changes it:
///
/// ```compile_fail
/// # fn f(z: &mut weft::Zero<'_>) -> weft::Result<()> {
/// let w = z.param::<f32>(0)?;
/// z.step()?; // error: `z` is borrowed by `w`
/// println!("{}", w[0]);
/// # Ok(()) }
/// ```
pub struct Zero<'m> {
    raw: sys::weft_zero_t,
    shapes: Vec<Vec<usize>>,
    dtype: Dtype,
    _mesh: PhantomData<&'m Mesh>,
    _not_sync: PhantomData<Cell<()>>,
}

fn path_c(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::invalid(format!("path {} contains a NUL byte", p.display())))
}

impl<'m> Zero<'m> {
    /// `weft_zero_create`, collective over the mesh's members: partitions over mesh dim `dp_dim`
    /// (every other dim keeps its own copy). `params` are the initial values (contiguous host
    /// views of `config.param_dtype` or `F32`), read during the call; the dp coordinate 0's
    /// values are broadcast to the others.
    pub fn new(mesh: &'m Mesh, dp_dim: &str, params: &[TensorView<'_>], config: &ZeroConfig) -> Result<Zero<'m>> {
        let n = params.len();
        let dim = CString::new(dp_dim).map_err(|_| Error::invalid("dp_dim contains a NUL byte"))?;
        let groups = match &config.groups {
            Some(g) if g.len() != n => {
                return Err(Error::invalid(format!("ZeroConfig::groups has {} entries for {n} parameters", g.len())))
            }
            Some(g) => Some(g.iter().map(|&x| to_c_int(x, "group index")).collect::<Result<Vec<c_int>>>()?),
            None => None,
        };
        let (_owned, name_ptrs) = c_names(config.names.as_deref(), n, "parameter")?;
        let cfg = sys::weft_zero_config_t {
            stage: to_c_int(config.stage as usize, "stage")?,
            param_dtype: config.param_dtype.raw(),
            optimizer: config.optimizer.raw(),
            groups: groups.as_ref().map_or(ptr::null(), |g| g.as_ptr()),
            group_bytes: config.group_bytes,
            names: if name_ptrs.is_empty() { ptr::null() } else { name_ptrs.as_ptr() },
            grad_op: config.grad_op.raw(),
            wire: config.wire.raw(),
            max_grad_norm: config.max_grad_norm,
            loss_scale: config.loss_scale,
            dynamic_loss_scale: config.dynamic_loss_scale as c_int,
            growth: config.growth,
            backoff: config.backoff,
            growth_interval: to_c_int(config.growth_interval as usize, "growth_interval")?,
            error_feedback: config.error_feedback as c_int,
            ..sys::WEFT_ZERO_CONFIG_INIT
        };
        let views: Vec<sys::weft_tensor_t> = params.iter().map(|p| p.raw()).collect();
        let mut raw: sys::weft_zero_t = ptr::null_mut();
        // SAFETY: the mesh is live; every array is valid for the call (params are read during it).
        check(unsafe {
            sys::weft_zero_create(
                mesh.as_raw(),
                dim.as_ptr(),
                if views.is_empty() { ptr::null() } else { views.as_ptr() },
                n,
                &cfg,
                &mut raw,
            )
        })?;
        Ok(Zero {
            raw,
            shapes: params.iter().map(|p| p.shape()).collect(),
            dtype: config.param_dtype,
            _mesh: PhantomData,
            _not_sync: PhantomData,
        })
    }

    /// [`Zero::new`] with `(values, shape)` pairs of one element type (row-major).
    pub fn from_slices<T: WeftType>(
        mesh: &'m Mesh,
        dp_dim: &str,
        params: &[(&[T], &[usize])],
        config: &ZeroConfig,
    ) -> Result<Zero<'m>> {
        let views = params.iter().map(|(v, s)| TensorView::read_only(v, s, None)).collect::<Result<Vec<_>>>()?;
        Zero::new(mesh, dp_dim, &views, config)
    }

    /// The raw handle (still owned by `self`).
    pub fn as_raw(&self) -> sys::weft_zero_t {
        self.raw
    }

    /// Number of parameters.
    pub fn nparams(&self) -> usize {
        self.shapes.len()
    }

    /// Parameter `p`'s shape.
    pub fn param_shape(&self, p: usize) -> Result<&[usize]> {
        self.shapes
            .get(p)
            .map(|s| &s[..])
            .ok_or_else(|| Error::invalid(format!("parameter {p}: there are {}", self.shapes.len())))
    }

    /// `weft_zero_num_groups`.
    pub fn num_groups(&self) -> Result<usize> {
        let mut n = 0usize;
        // SAFETY: self.raw is live; valid out-pointer.
        check(unsafe { sys::weft_zero_num_groups(self.raw, &mut n) })?;
        Ok(n)
    }

    /// `weft_zero_group_of`: parameter `p`'s group.
    pub fn group_of(&self, p: usize) -> Result<usize> {
        let mut g = 0usize;
        // SAFETY: self.raw is live; valid out-pointer.
        check(unsafe { sys::weft_zero_group_of(self.raw, p, &mut g) })?;
        Ok(g)
    }

    /// `weft_zero_param`: the full value of parameter `p` in weft's memory (row-major, its
    /// shape; `T` the parameter dtype). Stage 3: only while its group is gathered.
    pub fn param<T: WeftType>(&self, p: usize) -> Result<&[T]> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!("the parameters are {:?}, not {:?}", self.dtype, T::DTYPE)));
        }
        let mut v = empty_view();
        // SAFETY: self.raw is live; valid out-pointer.
        check(unsafe { sys::weft_zero_param(self.raw, p, &mut v) })?;
        let n: usize = self.param_shape(p)?.iter().product();
        // SAFETY: weft-owned memory of n elements of T, valid until the next step or release of
        // its group (or load, or destroy), all of which need &mut self while this borrow lives.
        Ok(if n == 0 || v.data.is_null() {
            &[]
        } else {
            unsafe { std::slice::from_raw_parts((v.data as *const u8).add(v.byte_offset as usize) as *const T, n) }
        })
    }

    /// `weft_zero_gather`, blocking: stage 3 all-gathers group `group` (at once when already
    /// gathered); stages 0-2 do nothing.
    pub fn gather(&self, group: usize) -> Result<()> {
        // SAFETY: self.raw is live; null request: blocking.
        check(unsafe { sys::weft_zero_gather(self.raw, group, ptr::null_mut()) })
    }

    /// `weft_zero_gather` with a request: the gather runs while the caller computes (prefetch
    /// group g + 1 during g's forward); its parameters are readable once the request completes.
    pub fn gather_async(&self, group: usize) -> Result<ZeroGather<'_>> {
        let mut req: sys::weft_request_t = ptr::null_mut();
        // SAFETY: self.raw is live; the request writes weft-owned memory only.
        check(unsafe { sys::weft_zero_gather(self.raw, group, &mut req) })?;
        Ok(ZeroGather { raw: req, _zero: PhantomData })
    }

    /// `weft_zero_release`: stage 3 frees group `group`'s gathered parameters (no gather may be
    /// in flight for it); stages 0-2 do nothing.
    pub fn release(&mut self, group: usize) -> Result<()> {
        // SAFETY: self.raw is live; &mut self: no parameter slice is borrowed.
        check(unsafe { sys::weft_zero_release(self.raw, group) })
    }

    /// `weft_zero_grad_ready` with parameter `p`'s shape: its gradient for this step (the
    /// parameter dtype), copied during the call. Completing a group starts its reduction. Twice
    /// in a step is an error naming the parameter.
    pub fn grad_ready<T: WeftType>(&self, p: usize, grad: &[T]) -> Result<()> {
        let shape = self.param_shape(p)?;
        let n: usize = shape.iter().product();
        if grad.len() != n {
            return Err(Error::invalid(format!(
                "grad_ready: parameter {p} has {n} elements {shape:?}, the gradient {}",
                grad.len()
            )));
        }
        self.grad_ready_view(p, &TensorView::read_only(grad, shape, None)?)
    }

    /// `weft_zero_grad_ready` with any contiguous host view.
    pub fn grad_ready_view(&self, p: usize, grad: &TensorView<'_>) -> Result<()> {
        let v = grad.raw();
        // SAFETY: self.raw is live; the view is valid for the call (copied during it).
        check(unsafe { sys::weft_zero_grad_ready(self.raw, p, &v) })
    }

    /// `weft_zero_step`, collective over the mesh's members: waits for the reductions,
    /// unscales, agrees on skipping, clips, runs the optimizer on this rank's shard and (stages
    /// 0-2) all-gathers the new parameters.
    pub fn step(&mut self) -> Result<StepInfo> {
        let mut i = sys::WEFT_ZERO_STEP_INFO_INIT;
        // SAFETY: self.raw is live; &mut self: no parameter slice is borrowed.
        check(unsafe { sys::weft_zero_step(self.raw, &mut i) })?;
        Ok(StepInfo {
            skipped: i.skipped != 0,
            grad_norm: i.grad_norm,
            loss_scale: i.loss_scale,
            comm_elements: i.comm_elements,
            comm_bytes: i.comm_bytes,
        })
    }

    /// `weft_zero_memory`: bytes weft holds for this rank.
    pub fn memory(&self) -> Result<ZeroMemory> {
        let mut m = sys::WEFT_ZERO_MEMORY_INIT;
        // SAFETY: self.raw is live; valid out-pointer.
        check(unsafe { sys::weft_zero_memory(self.raw, &mut m) })?;
        Ok(ZeroMemory {
            params: m.params,
            grads: m.grads,
            optimizer: m.optimizer,
            buffers: m.buffers,
            buffers_peak: m.buffers_peak,
        })
    }

    /// `weft_zero_save`, collective over the mesh's members: the optimizer state (master
    /// weights, optimizer buffers, step count, loss scale) as a weft checkpoint in `dir`.
    pub fn save(&self, dir: impl AsRef<Path>) -> Result<()> {
        let d = path_c(dir.as_ref())?;
        // SAFETY: self.raw is live; d valid for the call.
        check(unsafe { sys::weft_zero_save(self.raw, d.as_ptr()) })
    }

    /// `weft_zero_load`, collective: reads a state saved with the same parameter shapes and
    /// optimizer, on any data-parallel size, and all-gathers the parameters.
    pub fn load(&mut self, dir: impl AsRef<Path>) -> Result<()> {
        let d = path_c(dir.as_ref())?;
        // SAFETY: self.raw is live; &mut self: no parameter slice is borrowed.
        check(unsafe { sys::weft_zero_load(self.raw, d.as_ptr()) })
    }

    /// `weft_zero_destroy`, reporting errors (dropping does the same silently).
    pub fn destroy(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: raw is live and ours; not used again.
        check(unsafe { sys::weft_zero_destroy(raw) })
    }
}

impl Drop for Zero<'_> {
    fn drop(&mut self) {
        // SAFETY: self.raw is live and ours (parameter and gather borrows have ended).
        unsafe { sys::weft_zero_destroy(self.raw) };
    }
}

impl fmt::Debug for Zero<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Zero").field("params", &self.shapes).field("dtype", &self.dtype).finish()
    }
}

/// A stage-3 gather in flight ([`Zero::gather_async`]), borrowing the handle. `wait()` returns
/// its outcome; dropping it waits. A gather with nothing to do is complete at once.
#[must_use = "a gather should be waited for to learn whether it succeeded"]
pub struct ZeroGather<'z> {
    raw: sys::weft_request_t,
    _zero: PhantomData<&'z Zero<'z>>,
}

impl ZeroGather<'_> {
    /// `weft_wait`, then `weft_request_free`.
    pub fn wait(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        if raw.is_null() {
            return Ok(());
        }
        // SAFETY: raw is a live request of ours, freed once.
        let waited = check(unsafe { sys::weft_wait(raw) });
        let freed = check(unsafe { sys::weft_request_free(raw) });
        waited.and(freed)
    }

    /// `weft_test`: `Ok(true)` once complete.
    pub fn test(&mut self) -> Result<bool> {
        if self.raw.is_null() {
            return Ok(true);
        }
        let mut done = 0;
        // SAFETY: live request; valid out-pointer.
        match unsafe { sys::weft_test(self.raw, &mut done) } {
            sys::WEFT_OK => Ok(true),
            sys::WEFT_IN_PROGRESS => Ok(false),
            st => Err(Error::from_failed_call(st)),
        }
    }
}

impl Drop for ZeroGather<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: a live request of ours (freeing waits for it).
            unsafe { sys::weft_request_free(self.raw) };
        }
    }
}
