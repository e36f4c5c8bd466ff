"""Sharded tensors and redistribution (weft/mesh.h, second half): weft.ShardedTensor,
weft.redistribute(), weft.plan(), weft.full().

A ShardedTensor describes this rank's piece of a global tensor laid out on a mesh. Its memory is
the caller's: a numpy array (any strides that are whole elements, not negative) or a torch
tensor (any device, described as DLPack would: data_ptr(), shape, stride(), device). The
binding keeps a reference to the array so its memory outlives the handle.
"""

from __future__ import annotations

import ctypes
import enum
import sys
from typing import Any, NamedTuple, Optional, Sequence, Tuple, Union

from ._handle import Handle
from . import _errors, _lib
from ._buffers import DType, as_dtype
from ._comm import BufferLike, DTypeLike, Request, Result
from ._errors import InvalidArgument
from ._mesh import Layout, LayoutLike, Mesh, Placement, Replicate, _shape64, as_layout, local_box

# ------------------------------------------------------------------ tensor views

# numpy typestr kind + itemsize -> weft dtype ('f2' float16, 'i1' int8, ...)
_NP_KINDS = {("f", 8): DType.FLOAT64, ("f", 4): DType.FLOAT32, ("f", 2): DType.FLOAT16,
             ("i", 1): DType.INT8, ("u", 1): DType.UINT8, ("i", 4): DType.INT32, ("u", 4): DType.UINT32,
             ("i", 8): DType.INT64, ("u", 8): DType.UINT64}
_DEVICES = {"cpu": _lib.DEVICE_CPU, "cuda": _lib.DEVICE_CUDA}


class _View:
    """A weft_tensor_t over a numpy array or torch tensor, and what it was made from."""

    __slots__ = ("obj", "kind", "ptr", "shape", "strides", "dtype", "itemsize", "readonly", "device_type",
                 "device_id", "c", "_keep")

    def make_c(self):
        # A dim of size 1 is never stepped over and an empty tensor reaches no element: their
        # strides mean nothing (numpy gives 0 for empty arrays), so describe them as contiguous.
        if 0 in self.shape or 1 in self.shape:
            acc, out = 1, []
            for n, st in zip(reversed(self.shape), reversed(self.strides)):
                out.append(acc if (n <= 1 or 0 in self.shape) else st)
                acc *= max(n, 1)
            self.strides = tuple(reversed(out))
        n = len(self.shape)
        shape = (ctypes.c_int64 * max(1, n))(*self.shape)
        strides = (ctypes.c_int64 * max(1, n))(*self.strides)
        self._keep = (shape, strides)
        self.c = _lib.weft_tensor_t(self.ptr or None, self.device_type, self.device_id, n, int(self.dtype),
                                    ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                                    ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)), 0)
        return self


def _is_torch(obj):
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "data_ptr") and hasattr(obj, "stride")


def _reinterpret(natural, is_int_storage, itemsize, want, storage, what):
    """The dtype to tell the library: `want` (dtype=) when given and allowed, else natural."""
    if want is None:
        if natural is None:
            raise InvalidArgument("%s: %s elements are not a weft dtype; pass dtype= to reinterpret integer storage "
                                  "(bfloat16 in uint16/int16, fp8 in uint8)" % (what, storage))
        return natural
    want = as_dtype(want)
    if want == natural or (is_int_storage and itemsize == want.itemsize):
        return want
    raise InvalidArgument("%s: dtype=%s cannot reinterpret %s elements; give %s data or integer storage of %d-byte "
                          "items" % (what, want.name.lower(), storage, want.name.lower(), want.itemsize))


def _view(obj, dtype, what):
    v = _View()
    v.obj = obj
    if _is_torch(obj):
        v.kind = "torch"
        t = obj
        v.shape = tuple(int(n) for n in t.shape)
        v.strides = tuple(int(s) for s in t.stride())
        v.ptr = int(t.data_ptr())  # already includes the storage offset
        v.itemsize = int(t.element_size())
        dev = t.device
        if dev.type not in _DEVICES:
            raise _errors.Unsupported("%s: the torch tensor lives on device '%s'; weft describes cpu and cuda memory"
                                      % (what, dev.type))
        v.device_type = _DEVICES[dev.type]
        v.device_id = dev.index or 0
        if dev.type == "cpu":
            try:
                if t.is_pinned():
                    v.device_type = _lib.DEVICE_CUDA_HOST
            except RuntimeError:  # a torch without CUDA support
                pass
        v.readonly = False
        storage = str(t.dtype).replace("torch.", "")
        is_int = not (t.dtype.is_floating_point or t.dtype.is_complex) and storage != "bool"
        try:
            natural = as_dtype(t.dtype)
        except InvalidArgument:
            natural = None
        v.dtype = _reinterpret(natural, is_int, v.itemsize, dtype, storage, what)
        return v.make_c()
    ai = getattr(obj, "__array_interface__", None)
    if ai is None:
        raise InvalidArgument("%s: a %s.%s is neither a numpy array nor a torch tensor" %
                              (what, type(obj).__module__, type(obj).__qualname__))
    v.kind = "numpy"
    typestr = ai["typestr"]
    order, kind, itemsize = typestr[0], typestr[1], int(typestr[2:])
    if order == (">" if sys.byteorder == "little" else "<"):
        raise InvalidArgument("%s: big-endian data (%s); pass a native-endian copy (arr.astype(arr.dtype.newbyteorder"
                              "('=')))" % (what, typestr))
    if kind not in "fiu" or len(ai.get("descr") or ()) > 1:
        raise InvalidArgument("%s: numpy arrays of %s items cannot be sharded" % (what, typestr))
    v.itemsize = itemsize
    v.shape = tuple(int(n) for n in ai["shape"])
    ptr, readonly = ai["data"]
    v.ptr, v.readonly = int(ptr or 0), bool(readonly)
    byte_strides = ai.get("strides")
    if byte_strides is None:
        strides, acc = [], 1
        for n in reversed(v.shape):
            strides.append(acc)
            acc *= n
        v.strides = tuple(reversed(strides))
    else:
        out = []
        for k, s in enumerate(byte_strides):
            if s < 0:
                raise InvalidArgument("%s: stride %d of dim %d is negative (a reversed view); weft takes non-negative "
                                      "strides: pass numpy.ascontiguousarray(...)" % (what, s, k))
            if s % itemsize:
                raise InvalidArgument("%s: stride %d bytes of dim %d is not a multiple of the %d-byte item size; pass "
                                      "numpy.ascontiguousarray(...)" % (what, s, k, itemsize))
            out.append(s // itemsize)
        v.strides = tuple(out)
    v.device_type, v.device_id = _lib.DEVICE_CPU, 0
    natural = _NP_KINDS.get((kind, itemsize))
    v.dtype = _reinterpret(natural, kind in "iu", itemsize, dtype, "%s%d" % ({"f": "float", "i": "int", "u": "uint"}
                                                                            .get(kind, kind), 8 * itemsize), what)
    return v.make_c()


# numpy / torch storage for a weft dtype (bfloat16 and fp8 as integer storage in numpy)
_NP_STORAGE = {DType.FLOAT64: "float64", DType.FLOAT32: "float32", DType.FLOAT16: "float16", DType.BFLOAT16: "uint16",
               DType.FP8_E4M3: "uint8", DType.FP8_E5M2: "uint8", DType.INT8: "int8", DType.UINT8: "uint8",
               DType.INT32: "int32", DType.UINT32: "uint32", DType.INT64: "int64", DType.UINT64: "uint64"}
_TORCH_STORAGE = {DType.FLOAT64: "float64", DType.FLOAT32: "float32", DType.FLOAT16: "float16",
                  DType.BFLOAT16: "bfloat16", DType.FP8_E4M3: "uint8", DType.FP8_E5M2: "uint8", DType.INT8: "int8",
                  DType.UINT8: "uint8", DType.INT32: "int32", DType.INT64: "int64"}


def _zeros(shape, dtype, like):
    """A zero-filled array of `shape` holding `dtype`: numpy (like "numpy" or a numpy array) or
    torch (like "torch" or a torch tensor, on the same device)."""
    if isinstance(like, str) and like not in ("numpy", "torch"):
        raise InvalidArgument("like=%r: expected \"numpy\", \"torch\" or an array" % (like,))
    if (isinstance(like, str) and like == "torch") or _is_torch(like):
        import torch
        name = _TORCH_STORAGE.get(dtype)
        if name is None:
            raise _errors.Unsupported("torch has no %s tensors; use numpy" % dtype.name.lower())
        if _is_torch(like):
            return torch.zeros(tuple(shape), dtype=like.dtype, device=like.device)
        return torch.zeros(tuple(shape), dtype=getattr(torch, name))
    import numpy as np
    if like is not None and not isinstance(like, str) and hasattr(like, "dtype"):
        return np.zeros(tuple(shape), dtype=np.dtype(like.dtype).newbyteorder("="))
    return np.zeros(tuple(shape), dtype=_NP_STORAGE[dtype])


# ------------------------------------------------------------------ sharded tensors


class TensorView(NamedTuple):
    """weft_sharded_local(): the view the library holds (strides in elements; data None on a
    descriptor)."""

    data: Optional[int]
    device_type: int
    device_id: int
    dtype: Union[DType, int]
    shape: Tuple[int, ...]
    strides: Optional[Tuple[int, ...]]
    byte_offset: int


class ShardedTensor(Handle):
    """A tensor of `global_shape` laid out on `mesh` by `layout`, with this rank's piece in
    `local` (weft_sharded_t).

        mesh = weft.Mesh(comm, (comm.size,), ("dp",))
        shape = weft.local_shape(mesh, [weft.Shard(0)], (10, 4))
        x = weft.ShardedTensor(mesh, (10, 4), [weft.Shard(0)], np.zeros(shape, np.float32))

    `local` is a numpy array or a torch tensor whose shape is weft.local_shape(...) for this
    rank; strides are free (whole elements, not negative). `dtype` reinterprets integer storage
    (bfloat16 in uint16, fp8 in uint8); by default it is the array's own. On a rank that is not
    a member of the mesh, `local` is None and `dtype` is required: the tensor describes the
    other side of a redistribution. The handle keeps a reference to `local` (so the memory
    outlives it) and a copy of its view, not of its data. close() frees the handle (not
    collective; also on collection, and when the mesh is closed)."""

    def __init__(self, mesh: Mesh, global_shape: Sequence[int], layout: LayoutLike, local: BufferLike,
                 dtype: DTypeLike = None, name: Optional[str] = None) -> None:
        if not isinstance(mesh, Mesh):
            raise InvalidArgument("ShardedTensor(mesh=...): expected a weft.Mesh, got %r" % (mesh,))
        self._handle = None
        self._mesh = mesh
        self._layout = as_layout(layout, mesh)
        dims, c_global = _shape64(global_shape, "global_shape")
        self._global_shape = tuple(dims)
        self._name = None if name is None else str(name)
        if local is None:
            if dtype is None:
                raise InvalidArgument("ShardedTensor without local memory (a descriptor for a rank outside the mesh) "
                                      "needs dtype=")
            self._view = None
            self._dtype = as_dtype(dtype)
        else:
            self._view = _view(local, dtype, "local")
            self._dtype = self._view.dtype
        cfg = _lib.weft_sharded_config_t(ctypes.sizeof(_lib.weft_sharded_config_t),
                                         None if name is None else self._name.encode("utf-8"))
        out = ctypes.c_void_p()
        _errors.check(_lib.fn("weft_sharded_create")(
            mesh._h(), len(dims), c_global, int(self._dtype), self._layout._c(),
            ctypes.byref(self._view.c) if self._view is not None else None, ctypes.byref(cfg), ctypes.byref(out)))
        self._handle = out.value
        mesh._tensors.add(self)

    @classmethod
    def zeros(cls, mesh: Mesh, global_shape: Sequence[int], layout: LayoutLike, dtype: Union[DType, str, Any],
              name: Optional[str] = None, like: Any = "numpy") -> ShardedTensor:
        """A ShardedTensor over a new zero-filled local piece of the right shape: a numpy array
        (like="numpy"; bfloat16/fp8 in integer storage) or a torch tensor (like="torch", or a
        torch tensor whose dtype and device to copy). A descriptor on ranks outside the mesh."""
        d = as_dtype(dtype)
        local = None
        if mesh.is_member:
            local = _zeros(local_box(mesh, layout, global_shape)[0], d, like)
        return cls(mesh, global_shape, layout, local, dtype=d, name=name)

    # -------------------------------------------------------------- queries

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidArgument("the sharded tensor%s is closed" % (" '%s'" % self._name if self._name else ""))
        return h

    @property
    def mesh(self) -> Mesh:
        """The mesh the tensor is laid out on."""
        return self._mesh

    @property
    def global_shape(self) -> Tuple[int, ...]:
        """Shape of the whole tensor."""
        return self._global_shape

    @property
    def layout(self) -> Layout:
        """One Placement per mesh dim."""
        return self._layout

    @property
    def dtype(self) -> DType:
        """The weft.DType the library is told."""
        return self._dtype

    @property
    def name(self) -> Optional[str]:
        """The name given (used in error messages and checkpoints), or None."""
        return self._name

    @property
    def local(self) -> Any:
        """This rank's piece: the array or tensor given (None on a descriptor)."""
        return self._view.obj if self._view is not None else None

    @property
    def local_shape(self) -> Tuple[int, ...]:
        """Shape of this rank's piece (from the mesh and layout; members only)."""
        if self._view is not None:
            return self._view.shape
        return local_box(self._mesh, self._layout, self._global_shape)[0]

    @property
    def global_offset(self) -> Tuple[int, ...]:
        """Global index of this rank's first element (members only)."""
        return local_box(self._mesh, self._layout, self._global_shape)[1]

    def local_view(self) -> TensorView:
        """weft_sharded_local(): the view the library holds, as a TensorView."""
        t = _lib.weft_tensor_t()
        _errors.check(_lib.fn("weft_sharded_local")(self._h(), ctypes.byref(t)))
        n = t.ndim
        return TensorView(t.data, t.device_type, t.device_id, DType(t.dtype) if 0 <= t.dtype < len(DType) else t.dtype,
                          tuple(t.shape[i] for i in range(n)) if t.shape else (),
                          tuple(t.strides[i] for i in range(n)) if t.strides else None, t.byte_offset)

    def set_local(self, local: BufferLike) -> None:
        """weft_sharded_set_local(): points the handle at other memory of the same local shape
        and dtype (e.g. the next step's buffer); `local` is referenced from now on."""
        v = _view(local, self._dtype, "local")
        _errors.check(_lib.fn("weft_sharded_set_local")(self._h(), ctypes.byref(v.c)))
        self._view = v

    # -------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """weft_sharded_destroy(): frees the handle; the data is the caller's and untouched."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_sharded_destroy")(h))

    def __repr__(self):
        local = "local %s" % (self._view.shape,) if self._view is not None else "descriptor"
        return "<weft.ShardedTensor%s %s %s on %s, %s, %s%s>" % (
            " '%s'" % self._name if self._name else "", self._dtype.name.lower(), self._global_shape,
            "x".join(map(str, self._mesh.shape)), self._layout, local, " closed" if self.closed else "")


def _writable(t, what):
    if t._view is not None and t._view.readonly:
        raise InvalidArgument("%s: the local array of %r is read-only, but this call writes into it" % (what, t))


class _Locks:
    """The locks of the meshes an operation uses (one mesh or two), as one context manager
    with the `_lock` attribute Request expects."""

    def __init__(self, *meshes):
        uniq = []
        for m in meshes:
            if all(m is not u for u in uniq):
                uniq.append(m)
        self._meshes = sorted(uniq, key=id)
        self._lock = self

    def __enter__(self):
        for m in self._meshes:
            m._lock.acquire()

    def __exit__(self, *exc):
        for m in reversed(self._meshes):
            m._lock.release()


def _stream(stream):
    """A cudaStream_t (an int, or None) from None, an int or an object with .cuda_stream (torch.cuda.Stream)."""
    if stream is None:
        return None
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream or None
    s = getattr(stream, "cuda_stream", None)
    if isinstance(s, int):
        return s or None
    raise InvalidArgument("stream=%r: expected None, a cudaStream_t as an int, or a torch.cuda.Stream" % (stream,))


def redistribute(src: ShardedTensor, dst: ShardedTensor, async_op: bool = False, stream: Any = None) -> Result:
    """weft_redistribute(): writes into dst's local memory the values of src laid out as dst
    says. Collective over the members of src's mesh and dst's mesh (a rank in both takes part
    once); on the same mesh or between two meshes made from one communicator. src and dst have
    the same global shape and dtype, and their memory must not overlap.

    Memory: on each rank both pieces are host memory (numpy, CPU tensors; stream must be None)
    or both CUDA memory of the communicators' GPU (torch CUDA tensors), the same kind on every
    rank. For device memory, `stream` (a torch.cuda.Stream or a cudaStream_t as an int) orders
    every step on that stream, and the call may return before the data has moved, as comm.h's
    stream-ordered collectives do; stream=None uses weft's own stream and returns when dst is
    written.

    Returns dst.local (None on a rank outside dst's mesh); with async_op=True a weft.Request
    whose wait() returns it. The request keeps both tensors (and their arrays) alive."""
    for t, what in ((src, "src"), (dst, "dst")):
        if not isinstance(t, ShardedTensor):
            raise InvalidArgument("redistribute: %s is %r, not a weft.ShardedTensor" % (what, t))
    _writable(dst, "redistribute: dst")
    st = _stream(stream)
    locks = _Locks(src._mesh, dst._mesh)
    f = _lib.fn("weft_redistribute")
    with locks:
        if async_op:
            req = ctypes.c_void_p()
            _errors.check(f(src._h(), dst._h(), st, ctypes.byref(req)))
            return Request(locks, req.value, [src, dst], dst.local, "redistribute")
        _errors.check(f(src._h(), dst._h(), st, None))
    return dst.local


class StepKind(enum.IntEnum):
    """weft_redistribute_kind_t."""

    LOCAL = 0
    ALLGATHER = 1
    ALLREDUCE = 2
    REDUCE_SCATTER = 3
    ALLTOALL = 4
    EXCHANGE = 5


_STEP_WORDS = {StepKind.LOCAL: "local copy/slice", StepKind.ALLGATHER: "all-gather",
               StepKind.ALLREDUCE: "all-reduce", StepKind.REDUCE_SCATTER: "reduce-scatter",
               StepKind.ALLTOALL: "all-to-all", StepKind.EXCHANGE: "point-to-point exchange"}


def _bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


class _StepFields(NamedTuple):
    kind: Union[StepKind, int]
    mesh_dim: Optional[int]
    dim_name: Optional[str]
    before: Placement
    after: Placement
    bytes_sent: int
    max_bytes_sent: int


class Step(_StepFields):
    """One step of a redistribution (weft_redistribute_step_t): kind (StepKind), the mesh dim
    changed (None for an exchange or the final copy) and its name, the placements on it before
    and after, bytes this rank sends and the most any rank sends. str() reads as a sentence."""

    __slots__ = ()

    def __str__(self):
        words = _STEP_WORDS.get(self.kind, "step %s" % (self.kind,))
        where = ""
        if self.mesh_dim is not None:
            where = " over mesh dim %d%s: %r -> %r" % (self.mesh_dim, " (%s)" % self.dim_name if self.dim_name else "",
                                                       self.before, self.after)
        return "%s%s; sends %s (at most %s by one rank)" % (words, where, _bytes(self.bytes_sent),
                                                            _bytes(self.max_bytes_sent))


class Plan(list):
    """The steps weft_redistribute would run, in order (a list of Step); str() lists them."""

    def __str__(self):
        if not self:
            return "nothing to do"
        return "\n".join("%d. %s" % (i + 1, s) for i, s in enumerate(self))

    @property
    def bytes_sent(self) -> int:
        """Bytes this rank sends over the whole redistribution."""
        return sum(s.bytes_sent for s in self)


def plan(src: ShardedTensor, dst: ShardedTensor) -> Plan:
    """weft_redistribute_plan(): the steps redistribute(src, dst) would run, without
    communicating (any rank involved). Returns a Plan (a list of Step)."""
    f = _lib.fn("weft_redistribute_plan")
    n = ctypes.c_size_t()
    _errors.check(f(src._h(), dst._h(), None, 0, ctypes.byref(n)))
    cap = n.value
    arr = (_lib.weft_redistribute_step_t * max(1, cap))()
    _errors.check(f(src._h(), dst._h(), arr, cap, ctypes.byref(n)))
    names = src._mesh.names
    out = Plan()
    for i in range(min(cap, n.value)):
        s = arr[i]
        kind = StepKind(s.kind) if s.kind in StepKind._value2member_map_ else s.kind
        md = s.mesh_dim if s.mesh_dim >= 0 else None
        out.append(Step(kind, md, names[md] if md is not None and md < len(names) else None,
                        Placement._from_c(s.from_), Placement._from_c(s.to), s.bytes_sent, s.max_bytes_sent))
    return out


def full(sharded: ShardedTensor, like: Any = None) -> Any:
    """The whole global tensor on every member rank of sharded's mesh: a new numpy array (or
    torch tensor, following sharded.local) of sharded.global_shape, filled by redistributing to
    an all-Replicate() layout. Collective over the mesh's members; returns None on other ranks.
    `like` overrides the kind of array made ("numpy", "torch", or an array to copy)."""
    mesh = sharded._mesh
    if not mesh.is_member:
        return None
    out = _zeros(sharded._global_shape, sharded._dtype, like if like is not None else sharded.local)
    rep = ShardedTensor(mesh, sharded._global_shape, [Replicate()] * mesh.ndim, out, dtype=sharded._dtype,
                        name=(sharded._name or "tensor") + " (full)")
    try:
        redistribute(sharded, rep)
    finally:
        rep.close()
    return out

