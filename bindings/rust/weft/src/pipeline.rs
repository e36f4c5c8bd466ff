//! The pipeline executor (`weft/pipeline.h`, last part): a [`Pipeline`] runs a [`Schedule`] over
//! a communicator, calling Rust closures for the compute actions and moving activations and
//! gradients between ranks itself.
//!
//! The closures are called through one `extern "C"` trampoline whose `user_data` points at a
//! boxed [`Callbacks`]. A closure's `Err(text)` becomes `weft_pipeline_set_error(text)` and
//! `WEFT_ERR_INVALID_ARGUMENT`, so [`Pipeline::run`] fails with that text and the action named;
//! a panic is caught there (it never unwinds into C) and reported the same way with its message.
//!
//! ```no_run
//! use weft::{Boundary, Callbacks, Comm, Pipeline, PipelineConfig, Schedule, ScheduleConfig, ScheduleKind, StageCall};
//!
//! fn main() -> weft::Result<()> {
//!     let comm = Comm::from_env()?; // weftrun -n 4 ./prog
//!     let cfg = ScheduleConfig { ranks: comm.size(), microbatches: 8, ..ScheduleConfig::default() };
//!     let schedule = Schedule::generate(ScheduleKind::OneFOneB, &cfg)?;
//!     let callbacks = Callbacks {
//!         forward: Some(Box::new(|call: &mut StageCall<'_>| {
//!             let x = call.input::<f32>()?.map(|x| x.to_vec()); // None on stage 0: own data
//!             if let Some(out) = call.output::<f32>()? {
//!                 out.copy_from_slice(&x.unwrap_or_else(|| vec![1.0; 16]));
//!             }
//!             Ok(())
//!         })),
//!         backward: Some(Box::new(|_call: &mut StageCall<'_>| Ok(()))),
//!         ..Callbacks::default()
//!     };
//!     let boundaries = vec![Boundary::host::<f32>(&[16]); comm.size() - 1];
//!     let mut pipe = Pipeline::new(&comm, &schedule, PipelineConfig { callbacks, boundaries, record: false })?;
//!     pipe.run()?;
//!     Ok(())
//! }
//! ```
use std::ffi::{c_int, c_void, CString};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use weft_sys as sys;

use crate::comm::Comm;
use crate::error::{check, Error, Result};
use crate::mesh::shape_i64;
use crate::schedule::{ActionKind, Schedule};
use crate::sharded::Device;
use crate::timeline::Timeline;
use crate::types::{Dtype, WeftType};

/// A stage callback: given the call, it computes and writes the call's output (if any);
/// `Err(text)` stops the run with that text.
pub type StageFn<'a> = Box<dyn FnMut(&mut StageCall<'_>) -> std::result::Result<(), String> + 'a>;

/// The stage callbacks (pipeline.h: `forward` is required; `backward` when the schedule has B
/// actions; `backward_input` and `backward_weight` when it has I and W; `reduce_grad` optional).
#[derive(Default)]
pub struct Callbacks<'a> {
    /// The forward of a stage for one micro-batch (F actions); required.
    pub forward: Option<StageFn<'a>>,
    /// The whole backward of a stage (B actions).
    pub backward: Option<StageFn<'a>>,
    /// The backward for the inputs only (I actions).
    pub backward_input: Option<StageFn<'a>>,
    /// The backward for the weights only (W actions).
    pub backward_weight: Option<StageFn<'a>>,
    /// Called when a stage's gradients are complete for the step (optional).
    pub reduce_grad: Option<StageFn<'a>>,
}

/// A stage boundary: stage s's output = stage s+1's input, and the shape of the gradient sent
/// back. Host memory ([`Device::Cpu`]) or the communicator's GPU ([`Device::Cuda`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundary {
    /// The element type of the activations crossing the boundary.
    pub dtype: Dtype,
    /// The shape of one micro-batch's activation (and of its gradient).
    pub shape: Vec<usize>,
    /// Where the boundary buffers live.
    pub device: Device,
}

impl Boundary {
    /// A host boundary of element type `T`.
    pub fn host<T: WeftType>(shape: &[usize]) -> Boundary {
        Boundary { dtype: T::DTYPE, shape: shape.to_vec(), device: Device::Cpu }
    }
}

/// Executor options (`weft_pipeline_config_t`): the callbacks, one boundary per pair of
/// neighbouring stages (S - 1), and whether each run records a timeline.
#[derive(Default)]
pub struct PipelineConfig<'a> {
    /// The stage callbacks.
    pub callbacks: Callbacks<'a>,
    /// One boundary per pair of neighbouring stages (S - 1).
    pub boundaries: Vec<Boundary>,
    /// Every run records start and end times of each action and gathers them to every rank
    /// (set it on all ranks or none).
    pub record: bool,
}

/// A weft-owned buffer a callback is given: its dtype, shape, device and address (for device
/// memory; host memory is easier through [`StageCall::input`] / [`StageCall::output`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferInfo {
    /// `None` for a dtype this binding does not know.
    pub dtype: Option<Dtype>,
    /// The buffer's shape.
    pub shape: Vec<usize>,
    /// Where the buffer lives.
    pub device: Device,
    /// The first element (the view's data plus its byte offset).
    pub data: *mut c_void,
}

/// What a callback is given (`weft_stage_call_t`): the action and its buffers. pipeline.h says
/// which are absent (stage 0's forward input, the last stage's forward output and backward
/// input, stage 0's backward output, W and REDUCE_GRAD). An F input stays valid and unchanged
/// until the backward of the same stage and micro-batch has returned; every other buffer only
/// during the call.
pub struct StageCall<'a> {
    raw: &'a sys::weft_stage_call_t,
}

fn info_of(t: *const sys::weft_tensor_t) -> Option<BufferInfo> {
    // SAFETY: the library passes NULL or a view valid during the call.
    let t = unsafe { t.as_ref() }?;
    let ndim = t.ndim.max(0) as usize;
    let shape = if ndim == 0 || t.shape.is_null() {
        Vec::new()
    } else {
        // SAFETY: the view's shape holds ndim extents.
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }.iter().map(|&n| n.max(0) as usize).collect()
    };
    let device = match t.device_type {
        sys::WEFT_DEVICE_CUDA => Device::Cuda(t.device_id),
        sys::WEFT_DEVICE_CUDA_HOST => Device::CudaHost,
        _ => Device::Cpu,
    };
    let data = (t.data as *mut u8).wrapping_add(t.byte_offset as usize) as *mut c_void;
    Some(BufferInfo { dtype: Dtype::from_raw(t.dtype), shape, device, data })
}

impl StageCall<'_> {
    /// The action this call runs.
    pub fn kind(&self) -> ActionKind {
        ActionKind::from_raw(self.raw.kind)
    }

    /// The stage this call runs.
    pub fn stage(&self) -> usize {
        self.raw.stage.max(0) as usize
    }

    /// `None` for REDUCE_GRAD.
    pub fn microbatch(&self) -> Option<usize> {
        usize::try_from(self.raw.microbatch).ok()
    }

    /// The input buffer's description, `None` when the call has none.
    pub fn input_info(&self) -> Option<BufferInfo> {
        info_of(self.raw.input)
    }

    /// The output buffer's description, `None` when the call has none.
    pub fn output_info(&self) -> Option<BufferInfo> {
        info_of(self.raw.output)
    }

    /// Checks a buffer for a slice of `T`: host memory, dtype `T`, contiguous.
    fn host_slice<T: WeftType>(
        &self,
        t: *const sys::weft_tensor_t,
        what: &str,
    ) -> std::result::Result<Option<(*mut T, usize)>, String> {
        let Some(info) = info_of(t) else { return Ok(None) };
        let here = || format!("stage {} {} micro-batch {:?}", self.stage(), self.kind().name(), self.microbatch());
        if matches!(info.device, Device::Cuda(_)) {
            return Err(format!("{}: the {what} is device memory; use {what}_info() for its address", here()));
        }
        if info.dtype != Some(T::DTYPE) {
            return Err(format!("{}: the {what} holds {:?}, not {:?}", here(), info.dtype, T::DTYPE));
        }
        // SAFETY: t is non-null here (info_of returned Some).
        if !unsafe { (*t).strides }.is_null() {
            return Err(format!("{}: the {what} is strided; use {what}_info()", here()));
        }
        let n = info.shape.iter().product::<usize>();
        Ok(Some((info.data as *mut T, n)))
    }

    /// The input as a slice of `T` (host memory of dtype `T`); `Ok(None)` when the call has no
    /// input. The error text says what did not match (fit for `?` in a callback).
    pub fn input<T: WeftType>(&self) -> std::result::Result<Option<&[T]>, String> {
        Ok(self.host_slice::<T>(self.raw.input, "input")?.map(|(p, n)| {
            if n == 0 {
                &[][..]
            } else {
                // SAFETY: a weft-owned host buffer of n elements of T, valid during the call.
                unsafe { std::slice::from_raw_parts(p as *const T, n) }
            }
        }))
    }

    /// The output as a mutable slice of `T`; `Ok(None)` when the call has no output.
    pub fn output<T: WeftType>(&mut self) -> std::result::Result<Option<&mut [T]>, String> {
        Ok(self.host_slice::<T>(self.raw.output, "output")?.map(|(p, n)| {
            if n == 0 {
                &mut [][..]
            } else {
                // SAFETY: a weft-owned host buffer of n elements of T that only this call writes;
                // `&mut self` keeps a second mutable borrow out.
                unsafe { std::slice::from_raw_parts_mut(p, n) }
            }
        }))
    }
}

/// Text of a panic payload (also for plugin closures and user operators).
pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-text payload".to_string()
    }
}

/// The one C callback: finds the closure for the call's kind in the boxed [`Callbacks`] that
/// `user_data` points at and runs it, catching panics.
unsafe extern "C" fn trampoline(call: *const sys::weft_stage_call_t, user_data: *mut c_void) -> sys::weft_status_t {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: user_data is the Callbacks box the Pipeline owns (it outlives the handle),
        // reached only from here, on the thread inside Pipeline::run (which holds &mut self).
        let cbs = unsafe { &mut *(user_data as *mut Callbacks<'_>) };
        // SAFETY: the library passes a call valid for the duration of this function.
        let raw = unsafe { &*call };
        let kind = ActionKind::from_raw(raw.kind);
        let f = match kind {
            ActionKind::F => cbs.forward.as_mut(),
            ActionKind::B => cbs.backward.as_mut(),
            ActionKind::I => cbs.backward_input.as_mut(),
            ActionKind::W => cbs.backward_weight.as_mut(),
            ActionKind::ReduceGrad => cbs.reduce_grad.as_mut(),
            _ => None,
        };
        match f {
            Some(f) => f(&mut StageCall { raw }),
            None => Err(format!("weft (Rust): no callback for a {} action", kind.name())),
        }
    }));
    let text = match outcome {
        Ok(Ok(())) => return sys::WEFT_OK,
        Ok(Err(text)) => text,
        Err(payload) => format!("the stage callback panicked: {}", panic_text(payload.as_ref())),
    };
    // Interior NUL bytes would cut the text short; replace them.
    let c = CString::new(text.replace('\0', " ")).unwrap_or_default();
    // SAFETY: c lives for the call; the library copies it.
    unsafe { sys::weft_pipeline_set_error(c.as_ptr()) };
    sys::WEFT_ERR_INVALID_ARGUMENT
}

/// A pipeline executor (`weft_pipeline_t`) over a borrowed communicator, owning its closures.
/// Used by one thread at a time; dropping it destroys the handle.
pub struct Pipeline<'c> {
    raw: sys::weft_pipeline_t,
    /// The boxed closures `user_data` points at (from Box::into_raw; freed in Drop, after the
    /// handle is gone).
    callbacks: *mut Callbacks<'c>,
    record: bool,
    _comm: PhantomData<&'c Comm>,
}

impl<'c> Pipeline<'c> {
    /// `weft_pipeline_create`, collective over `comm` (its size = the schedule's ranks; rank r
    /// runs list r). The schedule is validated; the pipeline keeps its own reference to it.
    pub fn new(comm: &'c Comm, schedule: &Schedule, config: PipelineConfig<'c>) -> Result<Pipeline<'c>> {
        // SAFETY: a null stream is always valid.
        unsafe { Pipeline::new_on_stream(comm, schedule, config, ptr::null_mut()) }
    }

    /// [`Pipeline::new`] with device boundaries ordered on a CUDA `stream` (null: the
    /// communicator's).
    ///
    /// # Safety
    /// A non-null `stream` must be a valid `cudaStream_t` of the communicator's GPU that outlives
    /// the pipeline.
    pub unsafe fn new_on_stream(
        comm: &'c Comm,
        schedule: &Schedule,
        config: PipelineConfig<'c>,
        stream: *mut c_void,
    ) -> Result<Pipeline<'c>> {
        let PipelineConfig { callbacks, boundaries, record } = config;
        let shapes = boundaries
            .iter()
            .enumerate()
            .map(|(s, b)| shape_i64(&b.shape, &format!("boundaries[{s}].shape")))
            .collect::<Result<Vec<_>>>()?;
        let views: Vec<sys::weft_tensor_t> = boundaries
            .iter()
            .zip(&shapes)
            .map(|(b, shape)| {
                let (device_type, device_id) = b.device.raw();
                sys::weft_tensor_t {
                    data: ptr::null_mut(),
                    device_type,
                    device_id,
                    ndim: shape.len() as c_int,
                    dtype: b.dtype.raw(),
                    shape: if shape.is_empty() { ptr::null() } else { shape.as_ptr() },
                    strides: ptr::null(),
                    byte_offset: 0,
                }
            })
            .collect();
        if callbacks.forward.is_none() {
            return Err(Error::invalid("Pipeline::new: the forward callback is required"));
        }
        let given = |f: &Option<StageFn<'c>>| if f.is_some() { Some(trampoline as _) } else { None };
        let mut c = sys::WEFT_PIPELINE_CONFIG_INIT;
        c.forward = given(&callbacks.forward);
        c.backward = given(&callbacks.backward);
        c.backward_input = given(&callbacks.backward_input);
        c.backward_weight = given(&callbacks.backward_weight);
        c.reduce_grad = given(&callbacks.reduce_grad);
        let boxed = Box::into_raw(Box::new(callbacks));
        c.user_data = boxed as *mut c_void;
        c.boundaries = if views.is_empty() { ptr::null() } else { views.as_ptr() };
        c.nboundaries = views.len();
        c.stream = stream;
        c.record = record as c_int;
        let mut raw = ptr::null_mut();
        // SAFETY: live communicator and schedule; the config and the views live for the call
        // (the library copies the boundaries); user_data stays valid until Drop.
        let st = unsafe { sys::weft_pipeline_create(comm.as_raw(), schedule.as_raw(), &c, &mut raw) };
        if let Err(e) = check(st) {
            // SAFETY: the box was never handed to a live pipeline.
            drop(unsafe { Box::from_raw(boxed) });
            return Err(e);
        }
        Ok(Pipeline { raw, callbacks: boxed, record, _comm: PhantomData })
    }

    /// The raw `weft_pipeline_t` handle (owned by this value).
    pub fn as_raw(&self) -> sys::weft_pipeline_t {
        self.raw
    }

    /// `weft_pipeline_run`: one step (this rank's actions in order; the callbacks run on this
    /// thread). With `record` set, the step's timeline for all ranks. A failed closure's text
    /// comes back in the error's message, with the action named.
    pub fn run(&mut self) -> Result<Option<Timeline>> {
        let mut t: sys::weft_timeline_t = ptr::null_mut();
        let out = if self.record { &mut t as *mut sys::weft_timeline_t } else { ptr::null_mut() };
        // SAFETY: live handle; `&mut self` keeps the closures to this call's trampolines.
        check(unsafe { sys::weft_pipeline_run(self.raw, out) })?;
        // SAFETY: a timeline the library made for the caller to destroy.
        Ok(if t.is_null() { None } else { Some(unsafe { Timeline::from_raw(t) }) })
    }

    /// Destroys the pipeline, reporting an error (Drop ignores it).
    pub fn destroy(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        // SAFETY: live handle, destroyed once (Drop sees null and skips it).
        check(unsafe { sys::weft_pipeline_destroy(raw) })
    }
}

impl Drop for Pipeline<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: live, owned handle.
            unsafe { sys::weft_pipeline_destroy(self.raw) };
        }
        // SAFETY: from Box::into_raw in new_on_stream; the handle that used it is gone.
        drop(unsafe { Box::from_raw(self.callbacks) });
    }
}

impl std::fmt::Debug for Pipeline<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pipeline(record={})", self.record)
    }
}
