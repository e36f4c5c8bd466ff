"""Device meshes and placements (weft/mesh.h, first half): weft.Mesh, weft.Shard,
weft.Replicate, weft.Partial, weft.Layout, weft.local_shape()."""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Mapping, Optional, Sequence, Tuple, Union

from ._handle import Handle
from . import _errors, _lib
from ._comm import Comm, Op, OpLike, as_op
from ._errors import InvalidArgument

_REPLICATE, _SHARD, _PARTIAL = 0, 1, 2  # weft_placement_kind_t


# ------------------------------------------------------------------ placements

class Placement:
    """One mesh dim's placement of a tensor: Shard(dim), Replicate() or Partial(op).
    Immutable, hashable, compared by value."""

    __slots__ = ()
    kind = None

    def _c(self):
        raise NotImplementedError

    @staticmethod
    def _from_c(p):
        if p.kind == _SHARD:
            return Shard(p.dim)
        if p.kind == _PARTIAL and p.op in Op._value2member_map_:
            return Partial(as_op(p.op))
        if p.kind == _REPLICATE:
            return Replicate()
        return _Unknown(p.kind, p.dim, p.op)

    def __setattr__(self, name, value):
        raise AttributeError("placements are immutable")

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq


class Shard(Placement):
    """Tensor dim `dim` is split into chunks along the mesh dim (torch.chunk's rule: chunks of
    ceil(n / k) elements, trailing ones smaller or empty; never padded)."""

    __slots__ = ("dim",)
    kind = _SHARD

    def __init__(self, dim: int) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise InvalidArgument("Shard(dim=%r): expected a tensor dim >= 0" % (dim,))
        object.__setattr__(self, "dim", int(dim))

    def _c(self):
        return _lib.weft_placement_t(_SHARD, self.dim, int(Op.SUM))

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim if isinstance(other, Placement) else NotImplemented

    def __hash__(self):
        return hash(("S", self.dim))

    def __repr__(self):
        return "Shard(%d)" % self.dim


class Replicate(Placement):
    """Every rank along the mesh dim holds the same values."""

    __slots__ = ()
    kind = _REPLICATE

    def _c(self):
        return _lib.weft_placement_t(_REPLICATE, 0, int(Op.SUM))

    def __eq__(self, other):
        return isinstance(other, Replicate) if isinstance(other, Placement) else NotImplemented

    def __hash__(self):
        return hash("R")

    def __repr__(self):
        return "Replicate()"


class Partial(Placement):
    """Each rank along the mesh dim holds a term; the value is their reduction by `op` ("sum",
    "avg", "min", "max" or a weft.Op; PROD is refused by the library)."""

    __slots__ = ("op",)
    kind = _PARTIAL

    def __init__(self, op: OpLike = "sum") -> None:
        object.__setattr__(self, "op", as_op(op))

    def _c(self):
        return _lib.weft_placement_t(_PARTIAL, 0, int(self.op))

    def __eq__(self, other):
        return isinstance(other, Partial) and other.op == self.op if isinstance(other, Placement) else NotImplemented

    def __hash__(self):
        return hash(("P", int(self.op)))

    def __repr__(self):
        return "Partial(%r)" % (self.op.name.lower() if isinstance(self.op, Op) else int(self.op))


class _Unknown(Placement):
    """A placement kind this binding does not know (from a newer library's plan)."""

    __slots__ = ("raw",)

    def __init__(self, kind, dim, op):
        object.__setattr__(self, "raw", (kind, dim, op))

    def _c(self):
        return _lib.weft_placement_t(*self.raw)

    def __eq__(self, other):
        return isinstance(other, _Unknown) and other.raw == self.raw if isinstance(other, Placement) \
            else NotImplemented

    def __hash__(self):
        return hash(self.raw)

    def __repr__(self):
        return "Placement(kind=%d, dim=%d, op=%d)" % self.raw


class Layout(tuple):
    """A layout: one Placement per mesh dim, in mesh-dim order.

        weft.Layout([weft.Shard(0), weft.Replicate()])
        weft.Layout(weft.Shard(0), weft.Replicate())
        weft.Layout({"tp": weft.Shard(1)}, mesh=mesh)   # by dim name; missing dims Replicate()

    Anywhere a layout is taken, a plain list or tuple of placements (or such a dict, given the
    mesh) is accepted too."""

    def __new__(cls, *placements: Union[Placement, LayoutLike], mesh: Optional[Mesh] = None) -> Layout:
        if len(placements) == 1 and not isinstance(placements[0], Placement):
            placements = placements[0]
        if isinstance(placements, dict):
            if mesh is None:
                raise InvalidArgument("a layout given as a dict {mesh dim: placement} needs the mesh")
            out = [Replicate()] * mesh.ndim
            for key, p in placements.items():
                out[mesh.dim_index(key) if isinstance(key, str) else _mesh_dim(mesh, key)] = p
            placements = out
        placements = tuple(placements)
        for i, p in enumerate(placements):
            if not isinstance(p, Placement):
                raise InvalidArgument("layout entry %d is %r; expected weft.Shard(d), weft.Replicate() or "
                                      "weft.Partial(op)" % (i, p))
        return super().__new__(cls, placements)

    def __repr__(self):
        return "Layout(%s)" % ", ".join(repr(p) for p in self)

    def _c(self):
        arr = (_lib.weft_placement_t * max(1, len(self)))()
        for i, p in enumerate(self):
            arr[i] = p._c()
        return arr


# A mesh dim: its name ("tp") or its index.
MeshDim = Union[str, int]
# What a layout argument takes: a Layout, a sequence of placements, a dict {mesh dim: placement}
# (missing dims Replicate()), or one placement for a 1-d mesh.
LayoutLike = Union[Layout, Sequence[Placement], Mapping[MeshDim, Placement], Placement]


def as_layout(layout: LayoutLike, mesh: Mesh) -> Layout:
    """A Layout for `mesh` from a Layout, a list/tuple of placements, a dict {dim name or index:
    placement}, or a single placement (for a 1-d mesh). Its length must equal mesh.ndim."""
    if isinstance(layout, Placement):
        layout = (layout,)
    lay = layout if isinstance(layout, Layout) else Layout(layout, mesh=mesh)
    if len(lay) != mesh.ndim:
        raise InvalidArgument("the layout %r has %d placements; the mesh has %d dims %s: give one per mesh dim"
                              % (lay, len(lay), mesh.ndim, mesh.names))
    return lay


def _mesh_dim(mesh, d):
    if isinstance(d, str):
        return mesh.dim_index(d)
    if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < mesh.ndim:
        raise InvalidArgument("mesh dim %r: expected a dim name of %s or an index 0..%d" % (d, mesh.names,
                                                                                           mesh.ndim - 1))
    return d


def _shape64(shape, what):
    try:
        dims = [int(n) for n in shape]
    except TypeError:
        raise InvalidArgument("%s=%r: expected a sequence of sizes" % (what, shape)) from None
    if any(n < 0 for n in dims):
        raise InvalidArgument("%s=%r has a negative size" % (what, tuple(shape)))
    if len(dims) > _lib.TENSOR_MAX_DIMS:
        raise InvalidArgument("%s=%r has %d dims; weft takes at most %d" % (what, tuple(shape), len(dims),
                                                                            _lib.TENSOR_MAX_DIMS))
    return dims, (ctypes.c_int64 * max(1, len(dims)))(*dims)


# ------------------------------------------------------------------ meshes

_live_meshes = weakref.WeakSet()


class Mesh(Handle):
    """A device mesh (weft_mesh_t): the ranks of `comm` (or `ranks` of it, in mesh order) in an
    n-d grid of `shape` with named dims.

        mesh = weft.Mesh(comm, (2, 2), ("dp", "tp"))
        tp = mesh.comm("tp")            # this rank's tp group (a borrowed weft.Comm)

    Creating one is collective over every rank of `comm`, members or not. A rank outside
    `ranks` gets a descriptor mesh: it answers every query about the grid (and can describe the
    other side of a redistribution) but has no coordinates and no communicators
    (``is_member`` is False, ``coords`` and ``mesh_rank`` are None). The mesh keeps its own
    reference to comm's connections, so comm may be closed first. close() (also on collection
    and at exit) frees the mesh, its communicators, and closes the ShardedTensors made on it;
    it is not collective."""

    def __init__(self, comm: Comm, shape: Union[int, Sequence[int]], names: Union[str, Sequence[str], None] = None,
                 ranks: Optional[Sequence[int]] = None) -> None:
        if not isinstance(comm, Comm):
            raise InvalidArgument("Mesh(comm=...): expected a weft.Comm, got %r" % (comm,))
        if isinstance(shape, int) and not isinstance(shape, bool):
            shape = (shape,)
        shape = [int(n) for n in shape]
        if not 1 <= len(shape) <= _lib.MESH_MAX_DIMS:
            raise InvalidArgument("Mesh shape %r: expected 1..%d dims" % (tuple(shape), _lib.MESH_MAX_DIMS))
        c_shape = (ctypes.c_int * len(shape))(*shape)
        c_names = None
        if names is not None:
            if isinstance(names, str):
                names = (names,)
            names = [str(n) for n in names]
            if len(names) != len(shape):
                raise InvalidArgument("Mesh: %d names %s for %d dims" % (len(names), names, len(shape)))
            c_names = (ctypes.c_char_p * len(names))(*[n.encode("utf-8") for n in names])
        cfg = None
        if ranks is not None:
            ranks = [int(r) for r in ranks]
            c_ranks = (ctypes.c_int * max(1, len(ranks)))(*ranks)
            cfg = _lib.weft_mesh_config_t(ctypes.sizeof(_lib.weft_mesh_config_t),
                                          ctypes.cast(c_ranks, ctypes.POINTER(ctypes.c_int)), len(ranks))
        out = ctypes.c_void_p()
        self._handle = None
        self._lock = threading.RLock()
        with comm._lock:
            _errors.check(_lib.fn("weft_mesh_create")(comm._h(), len(shape), c_shape, c_names,
                                                      ctypes.byref(cfg) if cfg is not None else None,
                                                      ctypes.byref(out)))
        self._handle = out.value
        self._comms = {}
        self._tensors = weakref.WeakSet()
        try:
            self._query()
        except BaseException:
            self.close()
            raise
        _live_meshes.add(self)

    def _query(self):
        h = self._handle
        nd = ctypes.c_int()
        _errors.check(_lib.fn("weft_mesh_shape")(h, ctypes.byref(nd), None))
        dims = (ctypes.c_int * max(1, nd.value))()
        _errors.check(_lib.fn("weft_mesh_shape")(h, ctypes.byref(nd), dims))
        self._shape = tuple(dims[i] for i in range(nd.value))
        names = []
        for i in range(nd.value):
            p = ctypes.c_char_p()
            _errors.check(_lib.fn("weft_mesh_dim_name")(h, i, ctypes.byref(p)))
            names.append(p.value.decode("utf-8", "replace"))
        self._names = tuple(names)
        member = ctypes.c_int()
        _errors.check(_lib.fn("weft_mesh_is_member")(h, ctypes.byref(member)))
        self._member = bool(member.value)
        self._coords, self._mesh_rank = None, None
        if self._member:
            coords = (ctypes.c_int * nd.value)()
            mr = ctypes.c_int()
            _errors.check(_lib.fn("weft_mesh_coords")(h, coords, ctypes.byref(mr)))
            self._coords, self._mesh_rank = tuple(coords), mr.value

    # -------------------------------------------------------------- queries (no communication)

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidArgument("the mesh is closed")
        return h

    @property
    def shape(self) -> Tuple[int, ...]:
        """Sizes of the mesh dims (a tuple)."""
        return self._shape

    @property
    def names(self) -> Tuple[str, ...]:
        """Names of the mesh dims (a tuple; "d0", "d1", ... when none were given)."""
        return self._names

    @property
    def ndim(self) -> int:
        """Number of mesh dims."""
        return len(self._shape)

    @property
    def size(self) -> int:
        """Number of member ranks (the product of the shape)."""
        n = 1
        for s in self._shape:
            n *= s
        return n

    def dim_index(self, name: str) -> int:
        """weft_mesh_dim_index(): the index of the dim called `name` (weft.InvalidArgument if none)."""
        out = ctypes.c_int()
        _errors.check(_lib.fn("weft_mesh_dim_index")(self._h(), str(name).encode("utf-8"), ctypes.byref(out)))
        return out.value

    @property
    def is_member(self) -> bool:
        """Whether this rank is one of the mesh's ranks (False on a descriptor mesh)."""
        return self._member

    @property
    def coords(self) -> Optional[Tuple[int, ...]]:
        """This rank's coordinates in the mesh (a tuple), None when not a member."""
        return self._coords

    @property
    def mesh_rank(self) -> Optional[int]:
        """This rank's position in mesh order (row-major over the shape), None when not a member."""
        return self._mesh_rank

    def parent_rank(self, mesh_rank: int) -> int:
        """weft_mesh_parent_rank(): the rank, in the communicator the mesh was made from, of the
        member at mesh position `mesh_rank` (0 .. size-1). Works on every rank."""
        out = ctypes.c_int()
        _errors.check(_lib.fn("weft_mesh_parent_rank")(self._h(), int(mesh_rank), ctypes.byref(out)))
        return out.value

    @property
    def parent_ranks(self) -> Tuple[int, ...]:
        """Every member's rank in the parent communicator, in mesh order."""
        return tuple(self.parent_rank(i) for i in range(self.size))

    def comm(self, *dims: Union[MeshDim, Sequence[MeshDim]]) -> Comm:
        """weft_mesh_comm(): the communicator over the given mesh dims (names or indices, in
        increasing mesh order; none = every dim, i.e. the whole mesh), members only. Its ranks
        share this rank's coordinates on every other dim, ordered row-major over the chosen dims.

        The communicator belongs to the mesh: use it freely (collectives, split, dup), but do not
        expect close() to free it; it stops working (weft.InvalidArgument "closed") when the mesh
        is closed. The same object is returned for the same dims."""
        if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
            dims = tuple(dims[0])
        idx = tuple(_mesh_dim(self, d) for d in dims) if dims else tuple(range(self.ndim))
        with self._lock:
            c = self._comms.get(idx)
            if c is not None and not c.closed:
                return c
            arr = (ctypes.c_int * max(1, len(idx)))(*idx)
            out = ctypes.c_void_p()
            _errors.check(_lib.fn("weft_mesh_comm")(self._h(), arr, len(idx), ctypes.byref(out)))
            c = Comm._borrow(out, self)
            self._comms[idx] = c
            return c

    def local_shape(self, layout: LayoutLike, global_shape: Sequence[int], mesh_rank: int = -1) -> Tuple[int, ...]:
        """See weft.local_shape()."""
        return local_shape(self, layout, global_shape, mesh_rank)

    def local_box(self, layout: LayoutLike, global_shape: Sequence[int],
                  mesh_rank: int = -1) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
        """See weft.local_box()."""
        return local_box(self, layout, global_shape, mesh_rank)

    # -------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """weft_mesh_destroy(): closes the ShardedTensors made on this mesh, detaches the
        communicators from comm(), then frees the mesh. Not collective; idempotent."""
        with self._lock:
            if self._handle is None:
                return
            for t in list(getattr(self, "_tensors", ())):
                t.close()
            for c in getattr(self, "_comms", {}).values():
                c.close()  # borrowed: detaches only
            h, self._handle = self._handle, None
            _errors.check(_lib.fn("weft_mesh_destroy")(h))

    def __repr__(self):
        if self.closed:
            return "<weft.Mesh closed>"
        grid = " x ".join("%s=%d" % (n, s) for n, s in zip(self._names, self._shape))
        where = "coords %s" % (self._coords,) if self._member else "not a member"
        return "<weft.Mesh %s, %s>" % (grid, where)


# ------------------------------------------------------------------ local shapes

def local_box(mesh: Mesh, layout: LayoutLike, global_shape: Sequence[int],
              mesh_rank: int = -1) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """weft_mesh_local_shape(): (local_shape, global_offset), two tuples: the shape of the local
    piece of mesh member `mesh_rank` (-1: this rank, members only) of a tensor of
    `global_shape` laid out on `mesh` by `layout`, and the global index of its first element.
    No data, no communication."""
    lay = as_layout(layout, mesh)
    dims, c_global = _shape64(global_shape, "global_shape")
    n = len(dims)
    c_local = (ctypes.c_int64 * max(1, n))()
    c_off = (ctypes.c_int64 * max(1, n))()
    _errors.check(_lib.fn("weft_mesh_local_shape")(mesh._h(), lay._c(), n, c_global, int(mesh_rank), c_local, c_off))
    return tuple(c_local[i] for i in range(n)), tuple(c_off[i] for i in range(n))


def local_shape(mesh: Mesh, layout: LayoutLike, global_shape: Sequence[int], mesh_rank: int = -1) -> Tuple[int, ...]:
    """The shape (a tuple) of mesh member `mesh_rank`'s local piece (-1: this rank) of a tensor
    of `global_shape` laid out on `mesh` by `layout` (see local_box for its offset)."""
    return local_box(mesh, layout, global_shape, mesh_rank)[0]


def _close_all():
    for m in list(_live_meshes):
        try:
            m.close()
        except Exception:
            pass
