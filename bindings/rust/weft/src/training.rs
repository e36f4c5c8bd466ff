//! Training parallelism (`weft/training.h`), the shared pieces and the communication of tensor,
//! sequence and context parallelism: [`Wire`], [`Region`], [`region_apply`], [`ring_shift`]
//! (asynchronously: [`Scope::region_apply`], [`Scope::ring_shift`]). The gradient bucketer is
//! in [`Bucketer`](crate::Bucketer), ZeRO in [`Zero`](crate::Zero).
use std::ffi::{c_int, c_void, CString};
use std::ptr;

use weft_sys as sys;

use crate::error::{check, Error, Result};
use crate::mesh::Mesh;
use crate::request::{Request, Scope};
use crate::sharded::TensorView;
use crate::types::{to_c_int, WeftType};

/// How gradients travel between ranks (`weft_wire_format_t`); training.h states the error a
/// compressed wire adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Wire {
    /// In their own dtype, reduced as `weft_allreduce` / `weft_reduce_scatter` reduce.
    #[default]
    Native,
    /// bfloat16 on the wire, summed in float32 (float32 gradients only).
    Bf16,
    /// FP8 E4M3 with one float32 scale per [`sys::WEFT_WIRE_FP8_BLOCK`] elements (float32
    /// gradients only).
    Fp8E4M3,
    /// A CODEC plugin's wire format by its id (>= `WEFT_PLUGIN_ID_BASE`, the codec entries' `id`).
    Custom(sys::weft_wire_format_t),
}

impl Wire {
    /// The C value (`weft_wire_format_t`).
    pub fn raw(self) -> sys::weft_wire_format_t {
        match self {
            Wire::Native => sys::WEFT_WIRE_NATIVE,
            Wire::Bf16 => sys::WEFT_WIRE_BF16,
            Wire::Fp8E4M3 => sys::WEFT_WIRE_FP8_E4M3,
            Wire::Custom(id) => id,
        }
    }
}

/// Megatron's region operations (`weft_region_t`); each has a forward and a backward:
///
/// | region | forward | backward |
/// | --- | --- | --- |
/// | `Copy` | identity | all-reduce (sum) |
/// | `Reduce` | all-reduce (sum) | identity |
/// | `Scatter` | keep this rank's chunk | all-gather |
/// | `Gather` | all-gather | keep this rank's chunk |
/// | `SeqGather` | all-gather | reduce-scatter (sum) |
/// | `SeqReduceScatter` | reduce-scatter (sum) | all-gather |
///
/// Chunks are along the tensor dim `split_dim` and follow torch.chunk's rule over the mesh dim's
/// size (chunk = ceil(n / size); the last ones may be short or empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Region {
    /// Identity forward, all-reduce backward (Megatron's f).
    Copy,
    /// All-reduce forward, identity backward (Megatron's g).
    Reduce,
    /// Keep this rank's slice forward, all-gather backward.
    Scatter,
    /// All-gather forward, keep this rank's slice backward.
    Gather,
    /// Sequence parallelism: all-gather forward, reduce-scatter backward.
    SeqGather,
    /// Sequence parallelism: reduce-scatter forward, all-gather backward.
    SeqReduceScatter,
}

impl Region {
    /// The C value (`weft_region_t`).
    pub fn raw(self) -> sys::weft_region_t {
        match self {
            Region::Copy => sys::WEFT_REGION_COPY,
            Region::Reduce => sys::WEFT_REGION_REDUCE,
            Region::Scatter => sys::WEFT_REGION_SCATTER,
            Region::Gather => sys::WEFT_REGION_GATHER,
            Region::SeqGather => sys::WEFT_REGION_SEQ_GATHER,
            Region::SeqReduceScatter => sys::WEFT_REGION_SEQ_REDUCE_SCATTER,
        }
    }
}

/// C strings for optional per-item names (`what`: "gradient", "parameter"), checked to be one
/// per item; the pointers stay valid while the returned CStrings live.
pub(crate) fn c_names(
    names: Option<&[String]>,
    count: usize,
    what: &str,
) -> Result<(Vec<CString>, Vec<*const std::ffi::c_char>)> {
    let Some(names) = names else { return Ok((Vec::new(), Vec::new())) };
    if names.len() != count {
        return Err(Error::invalid(format!("{} {what} names for {count} {what}s", names.len())));
    }
    let owned = names
        .iter()
        .map(|n| CString::new(n.as_str()).map_err(|_| Error::invalid(format!("{what} name {n:?} contains a NUL byte"))))
        .collect::<Result<Vec<_>>>()?;
    let ptrs = owned.iter().map(|c| c.as_ptr()).collect();
    Ok((owned, ptrs))
}

fn dim_c(dim: &str) -> Result<CString> {
    CString::new(dim).map_err(|_| Error::invalid(format!("mesh dim name {dim:?} contains a NUL byte")))
}

/// Arguments of one `weft_region_apply` call; `output` None = in place.
struct RegionArgs<'x> {
    mesh: &'x Mesh,
    dim: &'x str,
    region: Region,
    backward: bool,
    split_dim: usize,
}

fn region_raw(
    a: RegionArgs<'_>,
    input: &TensorView<'_>,
    output: Option<&TensorView<'_>>,
    stream: *mut c_void,
    req: *mut sys::weft_request_t,
) -> Result<()> {
    let out = output.unwrap_or(input);
    if !out.is_writable() {
        return Err(Error::invalid("region_apply: the output view is read-only"));
    }
    let d = dim_c(a.dim)?;
    let split = to_c_int(a.split_dim, "split_dim")?;
    let (vin, vout) = (input.raw(), out.raw());
    // SAFETY: the mesh is live; both views' memory is borrowed (shared for input, mutably for
    // output) for the call, or for the scope holding the request; the structs live for the call.
    check(unsafe {
        sys::weft_region_apply(
            a.mesh.as_raw(),
            d.as_ptr(),
            a.region.raw(),
            a.backward as c_int,
            split,
            &vin,
            &vout,
            stream,
            req,
        )
    })
}

/// `weft_region_apply`: runs `region`'s forward (`backward` false) or backward over this rank's
/// group along mesh dim `dim`, reading `input` and writing `output` (strided views allowed; host
/// memory, or CUDA memory through [`TensorView::from_raw_parts`]). Their shapes must be what the
/// operation makes: the whole extent or this rank's chunk along tensor dim `split_dim`, the other
/// dims equal (`split_dim` is ignored by the identity and all-reduce cases). Collective over the
/// dim's group; members of `mesh` only.
///
/// ```no_run
/// # fn f(mesh: &weft::Mesh) -> weft::Result<()> {
/// use weft::{Region, TensorView};
/// let tp = mesh.shape()[mesh.dim_index("tp")?];
/// let full = vec![1.0f32; 8 * 4];
/// let mut mine = vec![0.0f32; 8usize.div_ceil(tp) * 4]; // 8 divides by tp here
/// let input = TensorView::read_only(&full, &[8, 4], None)?;
/// let mut output = TensorView::contiguous(&mut mine, &[8 / tp, 4])?;
/// weft::region_apply(mesh, "tp", Region::Scatter, false, 0, &input, &mut output)?;
/// # Ok(()) }
/// ```
pub fn region_apply(
    mesh: &Mesh,
    dim: &str,
    region: Region,
    backward: bool,
    split_dim: usize,
    input: &TensorView<'_>,
    output: &mut TensorView<'_>,
) -> Result<()> {
    let a = RegionArgs { mesh, dim, region, backward, split_dim };
    region_raw(a, input, Some(output), ptr::null_mut(), ptr::null_mut())
}

/// [`region_apply`] with `in == out` (one view), for the directions that keep the shape: the
/// identity and the all-reduce (`Copy` and `Reduce`, either direction).
pub fn region_apply_in_place(
    mesh: &Mesh,
    dim: &str,
    region: Region,
    backward: bool,
    buf: &mut TensorView<'_>,
) -> Result<()> {
    let a = RegionArgs { mesh, dim, region, backward, split_dim: 0 };
    region_raw(a, buf, None, ptr::null_mut(), ptr::null_mut())
}

/// [`region_apply`] queued on a CUDA `stream` (device memory on both sides).
///
/// # Safety
/// `stream` must be a valid `cudaStream_t` of the mesh's GPU, and both views' memory must stay
/// valid, and untouched except by work ordered after it on `stream`, until the queued work has
/// completed: the borrows end when the call returns, not when the GPU is done.
#[allow(clippy::too_many_arguments)]
pub unsafe fn region_apply_on_stream(
    mesh: &Mesh,
    dim: &str,
    region: Region,
    backward: bool,
    split_dim: usize,
    input: &TensorView<'_>,
    output: &mut TensorView<'_>,
    stream: *mut c_void,
) -> Result<()> {
    let a = RegionArgs { mesh, dim, region, backward, split_dim };
    region_raw(a, input, Some(output), stream, ptr::null_mut())
}

fn ring_raw(
    mesh: &Mesh,
    dim: &str,
    shift: i32,
    send: &TensorView<'_>,
    recv: &TensorView<'_>,
    stream: *mut c_void,
    req: *mut sys::weft_request_t,
) -> Result<()> {
    if !recv.is_writable() {
        return Err(Error::invalid("ring_shift: the recv view is read-only"));
    }
    let d = dim_c(dim)?;
    let (s, r) = (send.raw(), recv.raw());
    // SAFETY: the mesh is live; send is borrowed shared and recv mutably for the call or the
    // scope holding the request.
    check(unsafe { sys::weft_ring_shift(mesh.as_raw(), d.as_ptr(), shift as c_int, &s, &r, stream, req) })
}

fn flat<'v, T: WeftType>(send: &'v [T]) -> Result<TensorView<'v>> {
    TensorView::read_only(send, &[send.len()], None)
}

/// `weft_ring_shift`: one step of a ring over mesh dim `dim` (context parallelism's key/value
/// rotation): sends `send` to the rank `shift` places further along the dim (wrapping) and
/// receives `recv` from the rank `shift` places before, as one point-to-point batch. `recv` must
/// be as long as what that rank sends. Asynchronously (to overlap with the current block's
/// compute): [`Scope::ring_shift`].
pub fn ring_shift<T: WeftType>(mesh: &Mesh, dim: &str, shift: i32, send: &[T], recv: &mut [T]) -> Result<()> {
    let s = flat(send)?;
    let n = recv.len();
    let r = TensorView::contiguous(recv, &[n])?;
    ring_raw(mesh, dim, shift, &s, &r, ptr::null_mut(), ptr::null_mut())
}

/// [`ring_shift`] over views (contiguous ones: e.g. CUDA memory from
/// [`TensorView::from_raw_parts`]), optionally queued on a CUDA `stream` (null: blocking).
///
/// # Safety
/// With a non-null `stream`: it must be a valid `cudaStream_t` of the mesh's GPU, and both views'
/// memory must stay valid, and untouched except by work ordered after it on `stream`, until the
/// queued work has completed.
pub unsafe fn ring_shift_on_stream(
    mesh: &Mesh,
    dim: &str,
    shift: i32,
    send: &TensorView<'_>,
    recv: &mut TensorView<'_>,
    stream: *mut c_void,
) -> Result<()> {
    ring_raw(mesh, dim, shift, send, recv, stream, ptr::null_mut())
}

impl<'scope> Scope<'scope, '_> {
    /// [`region_apply`] as one request; the mesh and both views are borrowed for the scope. It
    /// communicates over the mesh dim's group (not this scope's communicator, which only bounds
    /// the request's life).
    #[allow(clippy::too_many_arguments)]
    pub fn region_apply(
        &'scope self,
        mesh: &'scope Mesh,
        dim: &str,
        region: Region,
        backward: bool,
        split_dim: usize,
        input: &'scope TensorView<'_>,
        output: &'scope mut TensorView<'_>,
    ) -> Result<Request<'scope>> {
        let a = RegionArgs { mesh, dim, region, backward, split_dim };
        self.start(|r| region_raw(a, input, Some(output), ptr::null_mut(), r))
    }

    /// [`ring_shift`] as one request (ring attention's overlap): `send` and `recv` are borrowed
    /// for the scope.
    pub fn ring_shift<T: WeftType>(
        &'scope self,
        mesh: &'scope Mesh,
        dim: &str,
        shift: i32,
        send: &'scope [T],
        recv: &'scope mut [T],
    ) -> Result<Request<'scope>> {
        let s = flat(send)?;
        let n = recv.len();
        let rv = TensorView::contiguous(recv, &[n])?;
        self.start(|r| ring_raw(mesh, dim, shift, &s, &rv, ptr::null_mut(), r))
    }
}
