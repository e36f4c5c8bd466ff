//! Device meshes and placements (`weft/mesh.h`, first part): [`Mesh`], [`MeshComm`],
//! [`Placement`] and [`LocalBox`].
use std::cell::Cell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::ptr;

use weft_sys as sys;

use crate::comm::Comm;
use crate::error::{check, Error, Result};
use crate::types::{to_c_int, Op};

/// One mesh dim's placement of a tensor (`weft_placement_t`). A layout is one placement per
/// mesh dim, in mesh-dim order (`&[Placement]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// Every rank along the mesh dim holds the same values.
    Replicate,
    /// Tensor dim `d` is split into chunks along the mesh dim (torch.chunk's rule: chunks of
    /// `ceil(n / k)` elements, trailing ones smaller or empty; never padded).
    Shard(usize),
    /// Each rank along the mesh dim holds a term; the value is their reduction (`Sum`, `Avg`,
    /// `Min` or `Max`; the library refuses `Prod`).
    Partial(Op),
}

pub(crate) fn op_from_raw(op: sys::weft_op_t) -> Option<Op> {
    Some(match op {
        sys::WEFT_SUM => Op::Sum,
        sys::WEFT_PROD => Op::Prod,
        sys::WEFT_MIN => Op::Min,
        sys::WEFT_MAX => Op::Max,
        sys::WEFT_AVG => Op::Avg,
        id if id >= sys::WEFT_PLUGIN_ID_BASE => Op::Custom(id),
        _ => return None,
    })
}

impl Placement {
    /// The C value (`Shard`'s dim must fit a C int).
    pub fn raw(self) -> Result<sys::weft_placement_t> {
        Ok(match self {
            Placement::Replicate => sys::WEFT_PLACEMENT_REPLICATE_INIT,
            Placement::Shard(d) => {
                sys::weft_placement_t { kind: sys::WEFT_SHARD, dim: to_c_int(d, "Shard dim")?, op: sys::WEFT_SUM }
            }
            Placement::Partial(op) => sys::weft_placement_t { kind: sys::WEFT_PARTIAL, dim: 0, op: op.raw() },
        })
    }

    /// From the C value; `None` for a kind or op this binding does not know.
    pub fn from_raw(p: &sys::weft_placement_t) -> Option<Placement> {
        match p.kind {
            sys::WEFT_REPLICATE => Some(Placement::Replicate),
            sys::WEFT_SHARD => usize::try_from(p.dim).ok().map(Placement::Shard),
            sys::WEFT_PARTIAL => op_from_raw(p.op).map(Placement::Partial),
            _ => None,
        }
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Replicate => f.write_str("Replicate"),
            Placement::Shard(d) => write!(f, "Shard({d})"),
            Placement::Partial(op) => write!(f, "Partial({op:?})"),
        }
    }
}

pub(crate) fn raw_layout(layout: &[Placement]) -> Result<Vec<sys::weft_placement_t>> {
    layout.iter().map(|p| p.raw()).collect()
}

pub(crate) fn shape_i64(shape: &[usize], what: &str) -> Result<Vec<i64>> {
    if shape.len() > sys::WEFT_TENSOR_MAX_DIMS {
        return Err(Error::invalid(format!(
            "{what} {shape:?} has {} dims; weft takes at most {}",
            shape.len(),
            sys::WEFT_TENSOR_MAX_DIMS
        )));
    }
    shape
        .iter()
        .map(|&n| i64::try_from(n).map_err(|_| Error::invalid(format!("{what} {shape:?}: too large"))))
        .collect()
}

/// The local piece of one mesh member: its shape and the global index of its first element.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LocalBox {
    /// The extent of the local piece in each dim.
    pub shape: Vec<usize>,
    /// Where the local piece starts in the global tensor, per dim.
    pub offset: Vec<usize>,
}

impl LocalBox {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    /// True when the local piece has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A device mesh (`weft_mesh_t`): ranks of a communicator in an n-d grid with named dims.
/// Dropping it calls `weft_mesh_destroy` (not collective); [`Mesh::destroy`] reports errors.
///
/// ```no_run
/// # fn f(comm: &weft::Comm) -> weft::Result<()> {
/// let mesh = weft::Mesh::new(comm, &[2, comm.size() / 2], &["dp", "tp"])?;
/// let tp = mesh.comm_by_names(&["tp"])?; // this rank's tp group, a borrowed Comm
/// let mut x = [1.0f32];
/// tp.allreduce_in_place(&mut x, weft::Op::Sum)?;
/// # Ok(()) }
/// ```
///
/// A rank outside the mesh's ranks gets a descriptor mesh: every query about the grid works
/// (and it can describe the other side of a redistribution), but it has no coordinates and no
/// communicators. The mesh keeps its own reference to the communicator's connections, so it
/// does not borrow the [`Comm`]. Like a communicator, a mesh is used by one thread at a time
/// (`Send`, not `Sync`): redistributions communicate over its communicators.
pub struct Mesh {
    raw: sys::weft_mesh_t,
    shape: Vec<usize>,
    names: Vec<String>,
    coords: Option<Vec<usize>>,
    mesh_rank: Option<usize>,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: a mesh may move between threads (one thread at a time uses its communicators).
unsafe impl Send for Mesh {}

impl Mesh {
    /// `weft_mesh_create` over every rank of `comm` in rank order; collective over `comm`.
    /// `names` gives one name per dim, or none (`&[]`) for "d0", "d1", ...
    pub fn new(comm: &Comm, shape: &[usize], names: &[&str]) -> Result<Mesh> {
        Mesh::create(comm, shape, names, None)
    }

    /// `weft_mesh_create` over `ranks` of `comm`, in mesh order (row-major over `shape`, the
    /// last dim fastest). Collective over every rank of `comm`, members or not.
    pub fn with_ranks(comm: &Comm, shape: &[usize], names: &[&str], ranks: &[usize]) -> Result<Mesh> {
        Mesh::create(comm, shape, names, Some(ranks))
    }

    fn create(comm: &Comm, shape: &[usize], names: &[&str], ranks: Option<&[usize]>) -> Result<Mesh> {
        if shape.is_empty() || shape.len() > sys::WEFT_MESH_MAX_DIMS {
            return Err(Error::invalid(format!("mesh shape {shape:?}: expected 1..{} dims", sys::WEFT_MESH_MAX_DIMS)));
        }
        if !names.is_empty() && names.len() != shape.len() {
            return Err(Error::invalid(format!("mesh: {} names {names:?} for {} dims", names.len(), shape.len())));
        }
        let c_shape = shape.iter().map(|&n| to_c_int(n, "mesh shape")).collect::<Result<Vec<_>>>()?;
        let c_names = names
            .iter()
            .map(|n| CString::new(*n).map_err(|_| Error::invalid(format!("mesh dim name {n:?} contains a NUL byte"))))
            .collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<*const c_char> = c_names.iter().map(|n| n.as_ptr()).collect();
        let c_ranks = match ranks {
            Some(r) => Some(r.iter().map(|&x| to_c_int(x, "mesh rank")).collect::<Result<Vec<_>>>()?),
            None => None,
        };
        let mut cfg = sys::WEFT_MESH_CONFIG_INIT;
        if let Some(r) = &c_ranks {
            cfg.ranks = if r.is_empty() { ptr::null() } else { r.as_ptr() };
            cfg.nranks = r.len();
        }
        let mut raw: sys::weft_mesh_t = ptr::null_mut();
        // SAFETY: every pointer is valid for the call; names and ranks outlive it.
        check(unsafe {
            sys::weft_mesh_create(
                comm.as_raw(),
                c_shape.len() as c_int,
                c_shape.as_ptr(),
                if names.is_empty() { ptr::null() } else { name_ptrs.as_ptr() },
                &cfg,
                &mut raw,
            )
        })?;
        // SAFETY: raw was just made by weft and is owned by us.
        unsafe { Mesh::from_raw(raw) }
    }

    /// Takes ownership of a raw mesh (destroyed when the `Mesh` drops, or at once if reading
    /// its shape fails).
    ///
    /// # Safety
    /// `raw` must be a live mesh from libweft, owned by nobody else.
    pub unsafe fn from_raw(raw: sys::weft_mesh_t) -> Result<Mesh> {
        let mut mesh =
            Mesh { raw, shape: Vec::new(), names: Vec::new(), coords: None, mesh_rank: None, _not_sync: PhantomData };
        mesh.query()?; // on error, dropping `mesh` destroys raw
        Ok(mesh)
    }

    fn query(&mut self) -> Result<()> {
        let mut nd: c_int = 0;
        // SAFETY: self.raw is live; out-pointers valid (shape may be null to ask for ndims).
        check(unsafe { sys::weft_mesh_shape(self.raw, &mut nd, ptr::null_mut()) })?;
        let mut dims = vec![0 as c_int; nd.max(0) as usize];
        check(unsafe { sys::weft_mesh_shape(self.raw, &mut nd, dims.as_mut_ptr()) })?;
        self.shape = dims.iter().map(|&d| d.max(0) as usize).collect();
        self.names = (0..nd)
            .map(|i| {
                let mut p: *const c_char = ptr::null();
                // SAFETY: the name is owned by the mesh and copied at once.
                check(unsafe { sys::weft_mesh_dim_name(self.raw, i, &mut p) })?;
                Ok(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            })
            .collect::<Result<Vec<_>>>()?;
        let mut member: c_int = 0;
        check(unsafe { sys::weft_mesh_is_member(self.raw, &mut member) })?;
        if member != 0 {
            let mut coords = vec![0 as c_int; dims.len()];
            let mut mr: c_int = -1;
            check(unsafe { sys::weft_mesh_coords(self.raw, coords.as_mut_ptr(), &mut mr) })?;
            self.coords = Some(coords.iter().map(|&c| c.max(0) as usize).collect());
            self.mesh_rank = Some(mr.max(0) as usize);
        }
        Ok(())
    }

    /// The raw handle (still owned by `self`).
    pub fn as_raw(&self) -> sys::weft_mesh_t {
        self.raw
    }

    /// Number of dims.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }
    /// Size of each dim (`weft_mesh_shape`, read at creation).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Number of member ranks (the product of the shape).
    pub fn size(&self) -> usize {
        self.shape.iter().product()
    }
    /// Name of each dim (`weft_mesh_dim_name`, read at creation).
    pub fn names(&self) -> &[String] {
        &self.names
    }
    /// `weft_mesh_dim_index`: the index of the dim called `name`.
    pub fn dim_index(&self, name: &str) -> Result<usize> {
        let c = CString::new(name).map_err(|_| Error::invalid("mesh dim name contains a NUL byte"))?;
        let mut d: c_int = -1;
        // SAFETY: self.raw is live; valid pointers.
        check(unsafe { sys::weft_mesh_dim_index(self.raw, c.as_ptr(), &mut d) })?;
        Ok(d.max(0) as usize)
    }
    /// Whether this rank is a member (`weft_mesh_is_member`); `false` on a descriptor mesh.
    pub fn is_member(&self) -> bool {
        self.coords.is_some()
    }
    /// This rank's coordinates (`weft_mesh_coords`); `None` when not a member.
    pub fn coords(&self) -> Option<&[usize]> {
        self.coords.as_deref()
    }
    /// This rank's position in mesh order (row-major); `None` when not a member.
    pub fn mesh_rank(&self) -> Option<usize> {
        self.mesh_rank
    }
    /// `weft_mesh_parent_rank`: the rank, in the communicator the mesh was made from, of the
    /// member at mesh position `mesh_rank`. Works on every rank.
    pub fn parent_rank(&self, mesh_rank: usize) -> Result<usize> {
        let mut r: c_int = -1;
        // SAFETY: self.raw is live; r a valid out-pointer.
        check(unsafe { sys::weft_mesh_parent_rank(self.raw, to_c_int(mesh_rank, "mesh_rank")?, &mut r) })?;
        Ok(r.max(0) as usize)
    }

    /// `weft_mesh_comm`: the communicator over mesh dims `dims` (distinct, increasing; all dims
    /// for the whole mesh), members only. Its ranks share this rank's coordinates on every other
    /// dim, ordered row-major over the chosen dims. It belongs to the mesh: the [`MeshComm`]
    /// borrows the mesh, derefs to a [`Comm`] for every operation, and never destroys it.
    pub fn comm(&self, dims: &[usize]) -> Result<MeshComm<'_>> {
        let c_dims = dims.iter().map(|&d| to_c_int(d, "mesh dim")).collect::<Result<Vec<_>>>()?;
        let mut raw: sys::weft_comm_t = ptr::null_mut();
        // SAFETY: self.raw is live; dims valid for the call.
        check(unsafe {
            sys::weft_mesh_comm(
                self.raw,
                if c_dims.is_empty() { ptr::null() } else { c_dims.as_ptr() },
                c_dims.len() as c_int,
                &mut raw,
            )
        })?;
        // SAFETY: raw is a live communicator owned by the mesh; ManuallyDrop keeps the Comm
        // from destroying it (if from_raw fails it calls weft_comm_destroy, which the library
        // refuses for a mesh's communicator).
        let comm = unsafe { Comm::from_raw(raw) }?;
        Ok(MeshComm { comm: ManuallyDrop::new(comm), _mesh: PhantomData })
    }

    /// [`Mesh::comm`] with dims given by name.
    pub fn comm_by_names(&self, names: &[&str]) -> Result<MeshComm<'_>> {
        let dims = names.iter().map(|n| self.dim_index(n)).collect::<Result<Vec<_>>>()?;
        self.comm(&dims)
    }

    /// `weft_mesh_local_shape`, without data or communication: the local piece of mesh member
    /// `mesh_rank` (`None`: this rank, members only) of a tensor of `global_shape` laid out by
    /// `layout` (one placement per mesh dim).
    pub fn local_box(
        &self,
        layout: &[Placement],
        global_shape: &[usize],
        mesh_rank: Option<usize>,
    ) -> Result<LocalBox> {
        self.check_layout(layout)?;
        let pl = raw_layout(layout)?;
        let g = shape_i64(global_shape, "global shape")?;
        let mr = match mesh_rank {
            Some(r) => to_c_int(r, "mesh_rank")?,
            None => -1,
        };
        let (mut shape, mut offset) = (vec![0i64; g.len()], vec![0i64; g.len()]);
        // SAFETY: self.raw is live; arrays of the right lengths.
        check(unsafe {
            sys::weft_mesh_local_shape(
                self.raw,
                pl.as_ptr(),
                g.len() as c_int,
                g.as_ptr(),
                mr,
                shape.as_mut_ptr(),
                offset.as_mut_ptr(),
            )
        })?;
        Ok(LocalBox {
            shape: shape.iter().map(|&v| v.max(0) as usize).collect(),
            offset: offset.iter().map(|&v| v.max(0) as usize).collect(),
        })
    }

    /// The shape of this rank's local piece (see [`Mesh::local_box`]).
    pub fn local_shape(&self, layout: &[Placement], global_shape: &[usize]) -> Result<Vec<usize>> {
        Ok(self.local_box(layout, global_shape, None)?.shape)
    }

    pub(crate) fn check_layout(&self, layout: &[Placement]) -> Result<()> {
        if layout.len() != self.ndim() {
            return Err(Error::invalid(format!(
                "the layout {layout:?} has {} placements; the mesh has {} dims {:?}",
                layout.len(),
                self.ndim(),
                self.names
            )));
        }
        Ok(())
    }

    /// `weft_mesh_destroy`, reporting errors (dropping does the same silently).
    pub fn destroy(self) -> Result<()> {
        let raw = self.raw;
        std::mem::forget(self);
        // SAFETY: raw is live and ours; not used again.
        check(unsafe { sys::weft_mesh_destroy(raw) })
    }
}

impl Drop for Mesh {
    fn drop(&mut self) {
        // SAFETY: self.raw is live and ours (the borrows of MeshComm and ShardedTensor have ended).
        unsafe { sys::weft_mesh_destroy(self.raw) };
    }
}

impl fmt::Debug for Mesh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mesh")
            .field("shape", &self.shape)
            .field("names", &self.names)
            .field("coords", &self.coords)
            .finish()
    }
}

/// A communicator that belongs to a [`Mesh`] (`weft_mesh_comm`): use it as a [`Comm`]
/// (it derefs to one); it is never destroyed here and cannot outlive its mesh.
pub struct MeshComm<'m> {
    comm: ManuallyDrop<Comm>,
    _mesh: PhantomData<&'m Mesh>,
}

impl Deref for MeshComm<'_> {
    type Target = Comm;
    fn deref(&self) -> &Comm {
        &self.comm
    }
}

impl fmt::Debug for MeshComm<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("MeshComm").field(&*self.comm).finish()
    }
}
