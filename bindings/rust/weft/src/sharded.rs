//! Sharded tensors and redistribution (`weft/mesh.h`, second part): [`ShardedTensor`],
//! [`TensorView`], [`redistribute`], [`plan`], [`full`].
use std::ffi::{c_int, c_void, CString};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;

use weft_sys as sys;

use crate::error::{check, Error, Result};
use crate::mesh::{raw_layout, shape_i64, LocalBox, Mesh, Placement};
use crate::types::{Dtype, WeftType};

impl Dtype {
    /// From the C value; `None` for a dtype this binding does not know.
    pub fn from_raw(d: sys::weft_dtype_t) -> Option<Dtype> {
        usize::try_from(d).ok().and_then(|i| Dtype::ALL.get(i).copied())
    }
}

/// Where a view's memory lives (`weft_device_type_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// Host memory.
    Cpu,
    /// CUDA device memory of GPU `id`.
    Cuda(i32),
    /// Pinned host memory.
    CudaHost,
}

impl Device {
    pub(crate) fn raw(self) -> (sys::weft_device_type_t, c_int) {
        match self {
            Device::Cpu => (sys::WEFT_DEVICE_CPU, 0),
            Device::Cuda(id) => (sys::WEFT_DEVICE_CUDA, id),
            Device::CudaHost => (sys::WEFT_DEVICE_CUDA_HOST, 0),
        }
    }
}

/// A view of caller memory for a [`ShardedTensor`] (`weft_tensor_t`), borrowing it for `'a`:
/// a shape, strides in elements (any non-negative values; `None` = contiguous row-major), a
/// dtype and a device. Safe constructors check that every element lies inside the slice.
pub struct TensorView<'a> {
    data: *mut c_void,
    dtype: Dtype,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    device: Device,
    writable: bool,
    /// (pointer, length) when the view is a whole contiguous slice: ShardedTensor::local().
    slice: Option<(*mut c_void, usize)>,
    _borrow: PhantomData<&'a mut [u8]>,
}

fn ptr_of<T>(s: &[T]) -> *mut c_void {
    if s.is_empty() {
        ptr::null_mut()
    } else {
        s.as_ptr() as *mut c_void
    }
}

/// Strides in elements as the library is told them. Row-major strides for `None`; and since a
/// dim of size 1 is never stepped over and an empty tensor reaches no element, their strides
/// are replaced by row-major ones (the library refuses a 0 stride on a dim longer than 1, which
/// row-major strides of an empty tensor such as (7, 0) would otherwise give).
fn lib_strides(shape: &[usize], strides: Option<&[usize]>) -> Result<Vec<i64>> {
    let empty = shape.contains(&0);
    let mut out = vec![0usize; shape.len()];
    let mut acc = 1usize;
    for k in (0..shape.len()).rev() {
        out[k] = match strides {
            Some(s) if !empty && shape[k] > 1 => s[k],
            _ => acc,
        };
        acc = acc.checked_mul(shape[k].max(1)).ok_or_else(|| Error::invalid("view too large"))?;
    }
    shape_i64(&out, "strides")
}

fn span(shape: &[usize], strides: &[usize]) -> Result<usize> {
    // Number of elements a strided view reaches: 1 + sum((n_k - 1) * s_k), 0 when empty.
    if shape.contains(&0) {
        return Ok(0);
    }
    let mut last = 0usize;
    for (&n, &s) in shape.iter().zip(strides) {
        last =
            (n - 1).checked_mul(s).and_then(|v| v.checked_add(last)).ok_or_else(|| Error::invalid("view too large"))?;
    }
    Ok(last + 1)
}

impl<'a> TensorView<'a> {
    /// All of `data` as a contiguous row-major tensor of `shape` (`data.len()` must equal the
    /// product of `shape`).
    pub fn contiguous<T: WeftType>(data: &'a mut [T], shape: &[usize]) -> Result<TensorView<'a>> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(Error::invalid(format!(
                "TensorView: shape {shape:?} has {n} elements but the slice {}",
                data.len()
            )));
        }
        let p = ptr_of(data);
        Ok(TensorView {
            data: p,
            dtype: T::DTYPE,
            shape: shape_i64(shape, "shape")?,
            strides: Some(lib_strides(shape, None)?),
            device: Device::Cpu,
            writable: true,
            slice: Some((p, data.len())),
            _borrow: PhantomData,
        })
    }

    /// A strided view into `data`: element (i0, .., ik) is `data[sum(i_j * strides[j])]`
    /// (e.g. a column-major matrix, or every other row). Every element must lie in `data`.
    pub fn strided<T: WeftType>(data: &'a mut [T], shape: &[usize], strides: &[usize]) -> Result<TensorView<'a>> {
        let v = Self::check_strided(data.len(), shape, strides)?;
        Ok(TensorView { data: ptr_of(data), dtype: T::DTYPE, writable: true, ..v })
    }

    /// A read-only view (contiguous when `strides` is `None`): a tensor over it can be the
    /// source of a redistribution or a checkpoint save, never a destination.
    pub fn read_only<T: WeftType>(data: &'a [T], shape: &[usize], strides: Option<&[usize]>) -> Result<TensorView<'a>> {
        let v = match strides {
            Some(s) => Self::check_strided(data.len(), shape, s)?,
            None => {
                let n: usize = shape.iter().product();
                if n != data.len() {
                    return Err(Error::invalid(format!(
                        "TensorView: shape {shape:?} has {n} elements but the slice {}",
                        data.len()
                    )));
                }
                TensorView {
                    shape: shape_i64(shape, "shape")?,
                    strides: Some(lib_strides(shape, None)?),
                    ..Self::empty()
                }
            }
        };
        let p = ptr_of(data);
        let slice = if strides.is_none() { Some((p, data.len())) } else { None };
        Ok(TensorView { data: p, dtype: T::DTYPE, writable: false, slice, ..v })
    }

    fn empty() -> TensorView<'a> {
        TensorView {
            data: ptr::null_mut(),
            dtype: Dtype::U8,
            shape: Vec::new(),
            strides: None,
            device: Device::Cpu,
            writable: false,
            slice: None,
            _borrow: PhantomData,
        }
    }

    fn check_strided(len: usize, shape: &[usize], strides: &[usize]) -> Result<TensorView<'a>> {
        if strides.len() != shape.len() {
            return Err(Error::invalid(format!("TensorView: {} strides for {} dims", strides.len(), shape.len())));
        }
        let need = span(shape, strides)?;
        if need > len {
            return Err(Error::invalid(format!(
                "TensorView: shape {shape:?} with strides {strides:?} reaches element {} of a slice of {len}",
                need - 1
            )));
        }
        Ok(TensorView {
            shape: shape_i64(shape, "shape")?,
            strides: Some(lib_strides(shape, Some(strides))?),
            ..Self::empty()
        })
    }

    /// A view of memory the caller vouches for (e.g. CUDA memory, or memory from another
    /// library).
    ///
    /// # Safety
    /// `data` must be valid (readable, and writable when `writable`) for every element the
    /// shape and strides reach, for `dtype`, on `device`, for all of `'a`, and not be accessed
    /// by anything else while a library call uses it.
    pub unsafe fn from_raw_parts(
        data: *mut c_void,
        dtype: Dtype,
        shape: &[usize],
        strides: Option<&[usize]>,
        device: Device,
        writable: bool,
    ) -> Result<TensorView<'a>> {
        Ok(TensorView {
            data,
            dtype,
            shape: shape_i64(shape, "shape")?,
            strides: match strides {
                Some(s) if s.len() != shape.len() => {
                    return Err(Error::invalid(format!("TensorView: {} strides for {} dims", s.len(), shape.len())))
                }
                s => Some(lib_strides(shape, s)?),
            },
            device,
            writable,
            slice: None,
            _borrow: PhantomData,
        })
    }

    pub(crate) fn raw(&self) -> sys::weft_tensor_t {
        let (device_type, device_id) = self.device.raw();
        sys::weft_tensor_t {
            data: self.data,
            device_type,
            device_id,
            ndim: self.shape.len() as c_int,
            dtype: self.dtype.raw(),
            shape: if self.shape.is_empty() { ptr::null() } else { self.shape.as_ptr() },
            strides: self.strides.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            byte_offset: 0,
        }
    }

    /// The element type of the view.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> Vec<usize> {
        self.shape.iter().map(|&n| n.max(0) as usize).collect()
    }

    /// Where the memory lives.
    pub fn device(&self) -> Device {
        self.device
    }

    /// Whether the view may be written (a destination).
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// (pointer, length) when the view is a whole contiguous slice.
    pub(crate) fn slice(&self) -> Option<(*mut c_void, usize)> {
        self.slice
    }
}

impl fmt::Debug for TensorView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorView")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("device", &self.device)
            .field("writable", &self.writable)
            .finish()
    }
}

/// The view a sharded tensor holds (`weft_sharded_local`), copied out: the address, dtype,
/// shape and strides (in elements; `None` = contiguous).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalView {
    /// The address of the local piece's first byte (before `byte_offset`).
    pub data: *mut c_void,
    /// The element type; `None` for a dtype this binding does not know.
    pub dtype: Option<Dtype>,
    /// The local shape.
    pub shape: Vec<i64>,
    /// Strides in elements; `None` = contiguous row-major.
    pub strides: Option<Vec<i64>>,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// A tensor of a global shape laid out on a [`Mesh`], with this rank's piece in caller memory
/// borrowed for `'a` (`weft_sharded_t`). Dropping it calls `weft_sharded_destroy` (not
/// collective; the data is untouched).
///
/// ```no_run
/// # fn f(comm: &weft::Comm) -> weft::Result<()> {
/// use weft::{Mesh, Placement::*, ShardedTensor};
/// let mesh = Mesh::new(comm, &[comm.size()], &["dp"])?;
/// let mut mine = vec![0f32; mesh.local_shape(&[Shard(0)], &[10, 4])?.iter().product()];
/// let mut all = vec![0f32; 40];
/// let src = ShardedTensor::new(&mesh, &[10, 4], &[Shard(0)], &mut mine)?;
/// let mut dst = ShardedTensor::new(&mesh, &[10, 4], &[Replicate], &mut all)?;
/// weft::redistribute(&src, &mut dst)?; // all-gather
/// println!("{:?}", dst.local::<f32>()?);
/// # Ok(()) }
/// ```
pub struct ShardedTensor<'a> {
    raw: sys::weft_sharded_t,
    mesh: &'a Mesh,
    global_shape: Vec<usize>,
    layout: Vec<Placement>,
    dtype: Dtype,
    name: Option<String>,
    /// None: a descriptor; Some(writable)
    local: Option<bool>,
    slice: Option<(*mut c_void, usize)>,
    _borrow: PhantomData<&'a mut [u8]>,
}

impl<'a> ShardedTensor<'a> {
    /// `weft_sharded_create` over all of `local`, a contiguous row-major piece of this rank's
    /// local shape ([`Mesh::local_shape`]); the element type gives the dtype.
    pub fn new<T: WeftType>(
        mesh: &'a Mesh,
        global_shape: &[usize],
        layout: &[Placement],
        local: &'a mut [T],
    ) -> Result<ShardedTensor<'a>> {
        let shape = mesh.local_shape(layout, global_shape)?;
        let view = TensorView::contiguous(local, &shape)?;
        ShardedTensor::create(mesh, global_shape, T::DTYPE, layout, Some(view), None)
    }

    /// A read-only tensor over `local` (contiguous): the source of a redistribution or a save.
    pub fn from_slice<T: WeftType>(
        mesh: &'a Mesh,
        global_shape: &[usize],
        layout: &[Placement],
        local: &'a [T],
    ) -> Result<ShardedTensor<'a>> {
        let shape = mesh.local_shape(layout, global_shape)?;
        let view = TensorView::read_only(local, &shape, None)?;
        ShardedTensor::create(mesh, global_shape, T::DTYPE, layout, Some(view), None)
    }

    /// A tensor over any [`TensorView`] (strided, read-only, raw) of this rank's local shape.
    pub fn from_view(
        mesh: &'a Mesh,
        global_shape: &[usize],
        layout: &[Placement],
        local: TensorView<'a>,
    ) -> Result<ShardedTensor<'a>> {
        let dtype = local.dtype;
        ShardedTensor::create(mesh, global_shape, dtype, layout, Some(local), None)
    }

    /// A descriptor (no local memory), on a rank that is not a member of `mesh`: it describes
    /// the other side of a redistribution between meshes.
    pub fn descriptor(
        mesh: &'a Mesh,
        global_shape: &[usize],
        dtype: Dtype,
        layout: &[Placement],
    ) -> Result<ShardedTensor<'a>> {
        ShardedTensor::create(mesh, global_shape, dtype, layout, None, None)
    }

    /// `weft_sharded_create` with every argument: `local` `None` makes a descriptor; `name`
    /// appears in error messages.
    pub fn create(
        mesh: &'a Mesh,
        global_shape: &[usize],
        dtype: Dtype,
        layout: &[Placement],
        local: Option<TensorView<'a>>,
        name: Option<&str>,
    ) -> Result<ShardedTensor<'a>> {
        mesh.check_layout(layout)?;
        let g = shape_i64(global_shape, "global shape")?;
        let pl = raw_layout(layout)?;
        if let Some(v) = &local {
            if v.dtype != dtype {
                return Err(Error::invalid(format!("ShardedTensor: the view holds {:?}, not {dtype:?}", v.dtype)));
            }
        }
        let cname = name
            .map(|n| CString::new(n).map_err(|_| Error::invalid("ShardedTensor name contains a NUL byte")))
            .transpose()?;
        let mut cfg = sys::WEFT_SHARDED_CONFIG_INIT;
        if let Some(n) = &cname {
            cfg.name = n.as_ptr();
        }
        let view = local.as_ref().map(|v| v.raw());
        let mut raw: sys::weft_sharded_t = ptr::null_mut();
        // SAFETY: mesh is live; every array is valid for the call (the handle copies the view's
        // shape and strides); the view's memory is borrowed for 'a by the returned tensor.
        check(unsafe {
            sys::weft_sharded_create(
                mesh.as_raw(),
                g.len() as c_int,
                g.as_ptr(),
                dtype.raw(),
                pl.as_ptr(),
                view.as_ref().map_or(ptr::null(), |v| v as *const _),
                &cfg,
                &mut raw,
            )
        })?;
        Ok(ShardedTensor {
            raw,
            mesh,
            global_shape: global_shape.to_vec(),
            layout: layout.to_vec(),
            dtype,
            name: name.map(str::to_owned),
            local: local.as_ref().map(|v| v.writable),
            slice: local.and_then(|v| v.slice),
            _borrow: PhantomData,
        })
    }

    /// The raw handle (still owned by `self`).
    pub fn as_raw(&self) -> sys::weft_sharded_t {
        self.raw
    }
    /// The mesh the tensor is laid out on.
    pub fn mesh(&self) -> &'a Mesh {
        self.mesh
    }
    /// The global shape.
    pub fn global_shape(&self) -> &[usize] {
        &self.global_shape
    }
    /// The placements, one per mesh dim.
    pub fn layout(&self) -> &[Placement] {
        &self.layout
    }
    /// The element type.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    /// The tensor's name, if it was given one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// Whether this is a descriptor (no local memory).
    pub fn is_descriptor(&self) -> bool {
        self.local.is_none()
    }
    /// Whether the local memory may be written (a redistribution's destination, a load target).
    pub fn is_writable(&self) -> bool {
        self.local == Some(true)
    }
    /// This rank's piece: shape and global offset (members only).
    pub fn local_box(&self) -> Result<LocalBox> {
        self.mesh.local_box(&self.layout, &self.global_shape, None)
    }

    /// The local piece as a slice, for tensors made over a whole contiguous slice
    /// ([`ShardedTensor::new`], [`ShardedTensor::from_slice`], contiguous views); `T` must be
    /// the tensor's element type.
    pub fn local<T: WeftType>(&self) -> Result<&[T]> {
        let (p, n) = self.slice_of::<T>()?;
        // SAFETY: the slice is borrowed by self for 'a and holds n elements of T (checked dtype).
        Ok(if n == 0 { &[] } else { unsafe { std::slice::from_raw_parts(p as *const T, n) } })
    }

    /// The local piece as a mutable slice (writable tensors over a contiguous slice).
    pub fn local_mut<T: WeftType>(&mut self) -> Result<&mut [T]> {
        if self.local != Some(true) {
            return Err(Error::invalid("ShardedTensor::local_mut: the local memory is read-only"));
        }
        let (p, n) = self.slice_of::<T>()?;
        // SAFETY: as in local(), and &mut self makes this the only access.
        Ok(if n == 0 { &mut [] } else { unsafe { std::slice::from_raw_parts_mut(p as *mut T, n) } })
    }

    fn slice_of<T: WeftType>(&self) -> Result<(*mut c_void, usize)> {
        if T::DTYPE != self.dtype {
            return Err(Error::invalid(format!("ShardedTensor holds {:?}, not {:?}", self.dtype, T::DTYPE)));
        }
        self.slice.ok_or_else(|| Error::invalid("ShardedTensor: the local piece is not a contiguous slice"))
    }

    /// `weft_sharded_local`: the view the library holds.
    pub fn local_view(&self) -> Result<LocalView> {
        let mut t = sys::weft_tensor_t {
            data: ptr::null_mut(),
            device_type: 0,
            device_id: 0,
            ndim: 0,
            dtype: 0,
            shape: ptr::null(),
            strides: ptr::null(),
            byte_offset: 0,
        };
        // SAFETY: self.raw is live; shape and strides point into the handle and are copied now.
        check(unsafe { sys::weft_sharded_local(self.raw, &mut t) })?;
        let n = t.ndim.max(0) as usize;
        let copy =
            |p: *const i64| if p.is_null() { None } else { Some(unsafe { std::slice::from_raw_parts(p, n) }.to_vec()) };
        Ok(LocalView {
            data: t.data,
            dtype: Dtype::from_raw(t.dtype),
            shape: copy(t.shape).unwrap_or_default(),
            strides: copy(t.strides),
            byte_offset: t.byte_offset,
        })
    }

    /// `weft_sharded_set_local`: points the handle at another contiguous slice of the same local
    /// shape and dtype (e.g. next step's buffer), borrowed for `'a` from now on.
    pub fn set_local<T: WeftType>(&mut self, local: &'a mut [T]) -> Result<()> {
        let shape = self.local_box()?.shape;
        self.set_local_view(TensorView::contiguous(local, &shape)?)
    }

    /// `weft_sharded_set_local` with any view.
    pub fn set_local_view(&mut self, local: TensorView<'a>) -> Result<()> {
        if local.dtype != self.dtype {
            return Err(Error::invalid(format!("set_local: the view holds {:?}, not {:?}", local.dtype, self.dtype)));
        }
        let v = local.raw();
        // SAFETY: self.raw is live; the view's memory is borrowed for 'a.
        check(unsafe { sys::weft_sharded_set_local(self.raw, &v) })?;
        self.local = Some(local.writable);
        self.slice = local.slice;
        Ok(())
    }

    /// `weft_sharded_destroy`, reporting errors (dropping does the same silently).
    pub fn destroy(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: raw is live and ours.
        check(unsafe { sys::weft_sharded_destroy(raw) })
    }
}

impl Drop for ShardedTensor<'_> {
    fn drop(&mut self) {
        // SAFETY: self.raw is live and ours.
        unsafe { sys::weft_sharded_destroy(self.raw) };
    }
}

impl fmt::Debug for ShardedTensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardedTensor")
            .field("name", &self.name)
            .field("dtype", &self.dtype)
            .field("global_shape", &self.global_shape)
            .field("layout", &self.layout)
            .field("descriptor", &self.is_descriptor())
            .finish()
    }
}

pub(crate) fn redistribute_raw(
    src: &ShardedTensor<'_>,
    dst: &mut ShardedTensor<'_>,
    req: *mut sys::weft_request_t,
) -> Result<()> {
    if dst.local == Some(false) {
        return Err(Error::invalid("redistribute: dst's local memory is read-only"));
    }
    // SAFETY: both handles are live; src's memory is borrowed shared and dst's mutably for the
    // call (blocking) or for the scope holding the request.
    check(unsafe { sys::weft_redistribute(src.raw, dst.raw, ptr::null_mut(), req) })
}

/// `weft_redistribute`: writes into `dst`'s local memory the values of `src` laid out as
/// `dst` says. Collective over the members of both meshes (the same mesh, or two meshes made
/// from one communicator); on a rank outside one mesh that side is a descriptor. Both local
/// pieces are host memory, or both CUDA memory of the communicators' GPU (views made with
/// [`TensorView::from_raw_parts`] and [`Device::Cuda`]); this call returns when `dst` is
/// written. Asynchronously: [`Scope::redistribute`](crate::Scope::redistribute);
/// stream-ordered: [`redistribute_on_stream`].
pub fn redistribute(src: &ShardedTensor<'_>, dst: &mut ShardedTensor<'_>) -> Result<()> {
    redistribute_raw(src, dst, ptr::null_mut())
}

/// `weft_redistribute` queued on a CUDA `stream` (device memory on both sides): every step is
/// stream-ordered, and the call may return before the data has moved.
///
/// # Safety
/// `stream` must be a valid `cudaStream_t` of the communicators' GPU, and the memory of both
/// tensors must stay valid, and not be touched except by work ordered after it on `stream`,
/// until the work this call queued has completed: the borrows end when the call returns, not
/// when the GPU is done.
pub unsafe fn redistribute_on_stream(
    src: &ShardedTensor<'_>,
    dst: &mut ShardedTensor<'_>,
    stream: *mut c_void,
) -> Result<()> {
    if dst.local == Some(false) {
        return Err(Error::invalid("redistribute: dst's local memory is read-only"));
    }
    // SAFETY: live handles; the caller vouches for the stream and the memory's lifetime.
    check(unsafe { sys::weft_redistribute(src.raw, dst.raw, stream, ptr::null_mut()) })
}

/// `weft_redistribute_kind_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// A local copy, slice or zero fill: no communication.
    Local,
    /// All-gather along a mesh dim (Shard to Replicate).
    AllGather,
    /// All-reduce along a mesh dim (Partial to Replicate).
    AllReduce,
    /// Reduce-scatter along a mesh dim (Partial to Shard).
    ReduceScatter,
    /// All-to-all along a mesh dim (Shard(a) to Shard(b)).
    AllToAll,
    /// Point-to-point exchange of boxes over the whole mesh (or between meshes).
    Exchange,
    /// A kind this binding does not know.
    Unknown(i32),
}

impl StepKind {
    fn from_raw(k: sys::weft_redistribute_kind_t) -> StepKind {
        match k {
            sys::WEFT_STEP_LOCAL => StepKind::Local,
            sys::WEFT_STEP_ALLGATHER => StepKind::AllGather,
            sys::WEFT_STEP_ALLREDUCE => StepKind::AllReduce,
            sys::WEFT_STEP_REDUCE_SCATTER => StepKind::ReduceScatter,
            sys::WEFT_STEP_ALLTOALL => StepKind::AllToAll,
            sys::WEFT_STEP_EXCHANGE => StepKind::Exchange,
            other => StepKind::Unknown(other),
        }
    }
}

/// One step of a redistribution (`weft_redistribute_step_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What the step does.
    pub kind: StepKind,
    /// The mesh dim changed; `None` for an exchange or the final copy.
    pub mesh_dim: Option<usize>,
    /// Placements on `mesh_dim` before and after (`None` if this binding does not know them).
    pub from: Option<Placement>,
    /// The placement on `mesh_dim` after the step.
    pub to: Option<Placement>,
    /// Bytes this rank sends in this step, and the most any rank sends.
    pub bytes_sent: u64,
    /// The most bytes any rank sends in this step.
    pub max_bytes_sent: u64,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.kind)?;
        if let Some(d) = self.mesh_dim {
            let show = |p: Option<Placement>| p.map_or("?".to_owned(), |p| p.to_string());
            write!(f, " over mesh dim {d}: {} -> {}", show(self.from), show(self.to))?;
        }
        write!(f, "; sends {} B (at most {} B by one rank)", self.bytes_sent, self.max_bytes_sent)
    }
}

/// `weft_redistribute_plan`: the steps `redistribute(src, dst)` would run, in order, without
/// communicating (any rank involved).
pub fn plan(src: &ShardedTensor<'_>, dst: &ShardedTensor<'_>) -> Result<Vec<Step>> {
    let mut n = 0usize;
    // SAFETY: live handles; steps may be null to ask for the count.
    check(unsafe { sys::weft_redistribute_plan(src.raw, dst.raw, ptr::null_mut(), 0, &mut n) })?;
    let empty = sys::weft_redistribute_step_t {
        kind: 0,
        mesh_dim: -1,
        from_: sys::WEFT_PLACEMENT_REPLICATE_INIT,
        to: sys::WEFT_PLACEMENT_REPLICATE_INIT,
        bytes_sent: 0,
        max_bytes_sent: 0,
    };
    let mut steps = vec![empty; n];
    let cap = steps.len();
    // SAFETY: steps has room for cap entries.
    check(unsafe {
        sys::weft_redistribute_plan(
            src.raw,
            dst.raw,
            if cap == 0 { ptr::null_mut() } else { steps.as_mut_ptr() },
            cap,
            &mut n,
        )
    })?;
    steps.truncate(n.min(cap));
    Ok(steps
        .iter()
        .map(|s| Step {
            kind: StepKind::from_raw(s.kind),
            mesh_dim: usize::try_from(s.mesh_dim).ok(),
            from: Placement::from_raw(&s.from_),
            to: Placement::from_raw(&s.to),
            bytes_sent: s.bytes_sent,
            max_bytes_sent: s.max_bytes_sent,
        })
        .collect())
}

/// The whole global tensor (row-major) on every member of `src`'s mesh, by redistributing into
/// a new all-`Replicate` buffer; `None` on other ranks. Collective over the mesh's members.
pub fn full<T: WeftType + Default>(src: &ShardedTensor<'_>) -> Result<Option<Vec<T>>> {
    let mesh = src.mesh;
    if !mesh.is_member() {
        return Ok(None);
    }
    if T::DTYPE != src.dtype {
        return Err(Error::invalid(format!("full: the tensor holds {:?}, not {:?}", src.dtype, T::DTYPE)));
    }
    let mut out = vec![T::default(); src.global_shape.iter().product()];
    {
        let layout = vec![Placement::Replicate; mesh.ndim()];
        let mut rep = ShardedTensor::new(mesh, &src.global_shape, &layout, &mut out)?;
        redistribute(src, &mut rep)?;
    }
    Ok(Some(out))
}
