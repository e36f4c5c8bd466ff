//! The gradient bucketer (`weft/training.h`): data-parallel gradient reduction in buckets that
//! start while backward goes on, as DDP does. [`Bucketer`], [`BucketerConfig`], [`Reduction`],
//! [`BucketerStats`].
use std::cell::Cell;
use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::time::Duration;

use weft_sys as sys;

use crate::comm::Comm;
use crate::error::{check, Error, Result};
use crate::sharded::{Device, TensorView};
use crate::training::{c_names, Wire};
use crate::types::{Dtype, Op, WeftType};

/// What a bucket's reduction leaves where (`weft_bucket_reduction_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Reduction {
    /// Every rank gets the whole reduced gradient, written back into the registered gradients.
    #[default]
    AllReduce,
    /// Each rank gets one chunk of each bucket ([`Bucketer::shard`]), ZeRO-style.
    ReduceScatter,
}

impl Reduction {
    /// The C value (`weft_bucket_reduction_t`).
    pub fn raw(self) -> sys::weft_bucket_reduction_t {
        match self {
            Reduction::AllReduce => sys::WEFT_BUCKET_ALLREDUCE,
            Reduction::ReduceScatter => sys::WEFT_BUCKET_REDUCE_SCATTER,
        }
    }
}

/// Bucketer options (`weft_bucketer_config_t`); `BucketerConfig::default()` is
/// `WEFT_BUCKETER_CONFIG_INIT` (25 MiB buckets, `Op::Avg`, native wire, all-reduce).
#[derive(Debug, Clone, PartialEq)]
pub struct BucketerConfig {
    /// A bucket is closed when the next gradient would make it larger (0 = 25 MiB); a new one also
    /// starts where the dtype or the memory kind changes.
    pub bucket_bytes: usize,
    /// Each gradient's bucket (0, 1, ... without gaps) instead of `bucket_bytes`.
    pub bucket_of: Option<Vec<usize>>,
    /// `Op::Sum` or `Op::Avg` (the mean over the communicator's ranks).
    pub op: Op,
    /// The format gradients travel in ([`Wire::Native`] = their own dtype).
    pub wire: Wire,
    /// All-reduce each bucket, or reduce-scatter it (each rank keeps its shard).
    pub reduction: Reduction,
    /// One name per gradient for error messages (`"grad[i]"` otherwise).
    pub names: Option<Vec<String>>,
    /// Compressed wires only: keep what the encoding lost and add it to the next step's gradients.
    pub error_feedback: bool,
}

impl Default for BucketerConfig {
    fn default() -> Self {
        BucketerConfig {
            bucket_bytes: 0,
            bucket_of: None,
            op: Op::Avg,
            wire: Wire::Native,
            reduction: Reduction::AllReduce,
            names: None,
            error_feedback: false,
        }
    }
}

/// `weft_bucketer_stats_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BucketerStats {
    /// `finish` calls so far.
    pub steps: u64,
    /// Last step: bytes this rank's reductions moved in the wire format (an all-reduce of n
    /// bytes counts 2n, a reduce-scatter or all-gather n).
    pub wire_bytes: u64,
    /// Last step: the time `finish` waited for communication.
    pub exposed: Duration,
    /// Last step: buckets that were ready before an earlier bucket (and waited for it).
    pub launched_late: u64,
}

struct Grad {
    data: *mut c_void,
    dtype: Dtype,
    /// Some(len) for host views over a whole slice.
    len: Option<usize>,
}

/// A gradient bucketer (`weft_bucketer_t`) over gradients in caller memory, borrowed mutably
/// for `'a` (as is the communicator, shared): while it lives the gradients are reached through
/// it ([`Bucketer::grad_mut`] to write one during backward, [`Bucketer::grad`] to read the
/// reduced result). Dropping it calls `weft_bucketer_destroy`.
///
/// One step: write each gradient, [`mark_ready`](Bucketer::mark_ready) it as backward produces
/// it (buckets start reducing as they fill), then [`finish`](Bucketer::finish). A marked
/// gradient cannot be borrowed mutably until `finish` (the library may still read it).
///
/// ```no_run
/// # fn f(comm: &weft::Comm) -> weft::Result<()> {
/// use weft::{Bucketer, BucketerConfig};
/// let (mut w, mut b) = (vec![0f32; 1000], vec![0f32; 10]);
/// let mut bk = Bucketer::from_slices(comm, vec![&mut w[..], &mut b[..]], &BucketerConfig::default())?;
/// for step in 0..3 {
///     bk.grad_mut::<f32>(1)?.fill(step as f32); // backward: the last layer first
///     bk.mark_ready(1)?;
///     bk.grad_mut::<f32>(0)?.fill(1.0);
///     bk.mark_ready(0)?;
///     bk.finish()?; // both gradients now hold the mean over the ranks
/// }
/// # Ok(()) }
/// ```
///
/// The gradients stay borrowed while the bucketer lives: they are reached through it only.
///
/// ```compile_fail
/// # fn f(comm: &weft::Comm) -> weft::Result<()> {
/// let mut w = vec![0f32; 4];
/// let mut bk = weft::Bucketer::from_slices(comm, vec![&mut w[..]], &weft::BucketerConfig::default())?;
/// w[0] = 1.0; // error: `w` is borrowed by the bucketer
/// bk.mark_ready(0)
/// # }
/// ```
pub struct Bucketer<'a> {
    raw: sys::weft_bucketer_t,
    grads: Vec<Grad>,
    marked: Vec<bool>,
    _borrow: PhantomData<(&'a Comm, &'a mut [u8])>,
    _not_sync: PhantomData<Cell<()>>,
}

impl<'a> Bucketer<'a> {
    /// `weft_bucketer_create`, collective over `comm`: registers `grads` (contiguous, floating
    /// point, host memory or CUDA memory of the communicator's GPU) in the order backward
    /// produces them. Every rank must register the same shapes and dtypes.
    pub fn new(comm: &'a Comm, grads: Vec<TensorView<'a>>, config: &BucketerConfig) -> Result<Bucketer<'a>> {
        let n = grads.len();
        if let Some(b) = &config.bucket_of {
            if b.len() != n {
                return Err(Error::invalid(format!(
                    "BucketerConfig::bucket_of has {} entries for {n} gradients",
                    b.len()
                )));
            }
        }
        for (i, g) in grads.iter().enumerate() {
            if !g.is_writable() {
                return Err(Error::invalid(format!("Bucketer: gradient {i} is a read-only view")));
            }
        }
        let (_owned, name_ptrs) = c_names(config.names.as_deref(), n, "gradient")?;
        let mut cfg = sys::WEFT_BUCKETER_CONFIG_INIT;
        cfg.bucket_bytes = config.bucket_bytes;
        cfg.bucket_of = config.bucket_of.as_ref().map_or(ptr::null(), |b| b.as_ptr());
        cfg.op = config.op.raw();
        cfg.wire = config.wire.raw();
        cfg.reduction = config.reduction.raw();
        cfg.error_feedback = config.error_feedback as core::ffi::c_int;
        cfg.names = if name_ptrs.is_empty() { ptr::null() } else { name_ptrs.as_ptr() };
        let views: Vec<sys::weft_tensor_t> = grads.iter().map(|g| g.raw()).collect();
        let mut raw: sys::weft_bucketer_t = ptr::null_mut();
        // SAFETY: comm is live; every array is valid for the call; the gradients' memory is
        // borrowed mutably for 'a by the returned Bucketer, which the library keeps using.
        check(unsafe {
            sys::weft_bucketer_create(
                comm.as_raw(),
                if views.is_empty() { ptr::null() } else { views.as_ptr() },
                views.len(),
                &cfg,
                &mut raw,
            )
        })?;
        let grads = grads
            .iter()
            .zip(&views)
            .map(|(g, v)| Grad {
                data: v.data,
                dtype: g.dtype(),
                len: if g.device() == Device::Cpu { g.slice().map(|(_, n)| n) } else { None },
            })
            .collect();
        Ok(Bucketer { raw, grads, marked: vec![false; n], _borrow: PhantomData, _not_sync: PhantomData })
    }

    /// [`Bucketer::new`] over whole slices of one element type, each registered as a 1-d tensor.
    pub fn from_slices<T: WeftType>(
        comm: &'a Comm,
        grads: Vec<&'a mut [T]>,
        config: &BucketerConfig,
    ) -> Result<Bucketer<'a>> {
        let views = grads
            .into_iter()
            .map(|g| {
                let n = g.len();
                TensorView::contiguous(g, &[n])
            })
            .collect::<Result<Vec<_>>>()?;
        Bucketer::new(comm, views, config)
    }

    /// The raw handle (still owned by `self`).
    pub fn as_raw(&self) -> sys::weft_bucketer_t {
        self.raw
    }

    /// Number of registered gradients.
    pub fn len(&self) -> usize {
        self.grads.len()
    }

    /// True when the bucketer holds no gradients.
    pub fn is_empty(&self) -> bool {
        self.grads.is_empty()
    }

    fn index(&self, i: usize) -> Result<&Grad> {
        self.grads.get(i).ok_or_else(|| Error::invalid(format!("gradient {i}: the bucketer has {}", self.grads.len())))
    }

    fn slice_of<T: WeftType>(&self, i: usize) -> Result<(*mut c_void, usize)> {
        let g = self.index(i)?;
        if g.dtype != T::DTYPE {
            return Err(Error::invalid(format!("gradient {i} holds {:?}, not {:?}", g.dtype, T::DTYPE)));
        }
        let n = g.len.ok_or_else(|| Error::invalid(format!("gradient {i} is not a host slice")))?;
        Ok((g.data, n))
    }

    /// Gradient `i` (a host view over a whole slice of `T`): after [`finish`](Bucketer::finish)
    /// in all-reduce mode, the reduced value.
    pub fn grad<T: WeftType>(&self, i: usize) -> Result<&[T]> {
        let (p, n) = self.slice_of::<T>(i)?;
        // SAFETY: the memory is borrowed by self for 'a and holds n elements of T (checked); the
        // library writes it only inside calls that take &mut self.
        Ok(if n == 0 { &[] } else { unsafe { std::slice::from_raw_parts(p as *const T, n) } })
    }

    /// Gradient `i` to write (backward). Refused between its `mark_ready` and `finish`.
    pub fn grad_mut<T: WeftType>(&mut self, i: usize) -> Result<&mut [T]> {
        let (p, n) = self.slice_of::<T>(i)?;
        if self.marked[i] {
            return Err(Error::invalid(format!(
                "gradient {i} is marked ready for this step; it may be written again after finish()"
            )));
        }
        // SAFETY: as in grad(), and &mut self makes this the only access.
        Ok(if n == 0 { &mut [] } else { unsafe { std::slice::from_raw_parts_mut(p as *mut T, n) } })
    }

    /// `weft_bucketer_num_buckets`.
    pub fn num_buckets(&self) -> Result<usize> {
        let mut n = 0usize;
        // SAFETY: self.raw is live; valid out-pointer.
        check(unsafe { sys::weft_bucketer_num_buckets(self.raw, &mut n) })?;
        Ok(n)
    }

    /// `weft_bucketer_bucket_of`: gradient `i`'s bucket and the element offset where it starts
    /// in that bucket.
    pub fn bucket_of(&self, i: usize) -> Result<(usize, usize)> {
        let (mut b, mut off) = (0usize, 0usize);
        // SAFETY: self.raw is live; valid out-pointers.
        check(unsafe { sys::weft_bucketer_bucket_of(self.raw, i, &mut b, &mut off) })?;
        Ok((b, off))
    }

    /// `weft_bucketer_mark_ready`: gradient `i` holds its final value for this step. Buckets it
    /// completes start reducing (in bucket order) before the call returns. Marking a gradient
    /// twice in a step is an error naming it.
    pub fn mark_ready(&mut self, i: usize) -> Result<()> {
        // SAFETY: the registered memory, borrowed for 'a.
        unsafe { self.mark_ready_on_stream(i, ptr::null_mut()) }
    }

    /// `weft_bucketer_mark_ready` with device gradients' copies queued on a CUDA `stream` (null:
    /// the communicator's stream).
    ///
    /// # Safety
    /// A non-null `stream` must be a valid `cudaStream_t` of the communicator's GPU.
    pub unsafe fn mark_ready_on_stream(&mut self, i: usize, stream: *mut c_void) -> Result<()> {
        let data = self.index(i)?.data;
        // SAFETY: self.raw is live; data is the registered address.
        check(unsafe { sys::weft_bucketer_mark_ready(self.raw, i, data, stream) })?;
        self.marked[i] = true;
        Ok(())
    }

    /// `weft_bucketer_finish`: waits for every bucket's reduction and writes the results
    /// (all-reduce: into the gradients; reduce-scatter: into [`shard`](Bucketer::shard)s), then
    /// resets for the next step. A gradient never marked is an error naming it (the step stays
    /// open: mark it and finish again).
    pub fn finish(&mut self) -> Result<()> {
        // SAFETY: null stream: the call returns when the results are written.
        unsafe { self.finish_on_stream(ptr::null_mut()) }
    }

    /// `weft_bucketer_finish` with device results queued on a CUDA `stream`.
    ///
    /// # Safety
    /// A non-null `stream` must be a valid `cudaStream_t` of the communicator's GPU, and the
    /// device gradients must not be read except by work ordered after it on `stream`.
    pub unsafe fn finish_on_stream(&mut self, stream: *mut c_void) -> Result<()> {
        // SAFETY: self.raw is live; the gradients are borrowed mutably by self.
        check(unsafe { sys::weft_bucketer_finish(self.raw, stream) })?;
        self.marked.iter_mut().for_each(|m| *m = false);
        Ok(())
    }

    /// `weft_bucketer_shard` (reduce-scatter mode, after `finish`): this rank's reduced chunk of
    /// bucket `bucket` and the element offset in the bucket where it starts (the bucket is its
    /// gradients concatenated in list order; chunks follow torch.chunk's rule). It is weft's
    /// memory, valid until the next `finish` (which borrows `self` mutably).
    pub fn shard<T: WeftType>(&self, bucket: usize) -> Result<(usize, &[T])> {
        let mut t = empty_view();
        let mut off = 0usize;
        // SAFETY: self.raw is live; valid out-pointers.
        check(unsafe { sys::weft_bucketer_shard(self.raw, bucket, &mut t, &mut off) })?;
        if t.dtype != T::DTYPE.raw() {
            return Err(Error::invalid(format!(
                "bucket {bucket} holds {:?}, not {:?}",
                Dtype::from_raw(t.dtype),
                T::DTYPE
            )));
        }
        if t.device_type == sys::WEFT_DEVICE_CUDA {
            return Err(Error::invalid(format!("bucket {bucket}'s shard is in device memory")));
        }
        let n = if t.ndim >= 1 && !t.shape.is_null() {
            // SAFETY: a 1-d view: shape points at one extent owned by the bucketer.
            unsafe { *t.shape }.max(0) as usize
        } else {
            0
        };
        // SAFETY: weft-owned memory of n elements of T, valid until the next finish or destroy,
        // both of which need &mut self (or self) while this borrow of self lives.
        let s = if n == 0 || t.data.is_null() {
            &[][..]
        } else {
            unsafe { std::slice::from_raw_parts((t.data as *const u8).add(t.byte_offset as usize) as *const T, n) }
        };
        Ok((off, s))
    }

    /// `weft_bucketer_stats`.
    pub fn stats(&self) -> Result<BucketerStats> {
        let mut s = sys::WEFT_BUCKETER_STATS_INIT;
        // SAFETY: self.raw is live; valid out-pointer with struct_size set.
        check(unsafe { sys::weft_bucketer_stats(self.raw, &mut s) })?;
        Ok(BucketerStats {
            steps: s.steps,
            wire_bytes: s.wire_bytes,
            exposed: Duration::from_nanos(s.exposed_ns),
            launched_late: s.launched_late,
        })
    }

    /// `weft_bucketer_destroy`, reporting errors (dropping does the same silently).
    pub fn destroy(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: raw is live and ours; not used again.
        check(unsafe { sys::weft_bucketer_destroy(raw) })
    }
}

pub(crate) fn empty_view() -> sys::weft_tensor_t {
    sys::weft_tensor_t {
        data: ptr::null_mut(),
        device_type: 0,
        device_id: 0,
        ndim: 0,
        dtype: 0,
        shape: ptr::null(),
        strides: ptr::null(),
        byte_offset: 0,
    }
}

impl Drop for Bucketer<'_> {
    fn drop(&mut self) {
        // SAFETY: self.raw is live and ours (shard borrows have ended).
        unsafe { sys::weft_bucketer_destroy(self.raw) };
    }
}

impl fmt::Debug for Bucketer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bucketer")
            .field("grads", &self.grads.len())
            .field("marked", &self.marked.iter().filter(|m| **m).count())
            .finish()
    }
}
