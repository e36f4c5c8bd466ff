"""Tensor, sequence and context parallel communication (weft/training.h): weft.region_apply
(Megatron's regions over one mesh dim) and weft.ring_shift (context parallelism's key/value
rotation). weft.torch_parallel builds torch.autograd.Functions and ring attention on them."""

from __future__ import annotations

import ctypes
import enum
from typing import Any, Optional, Sequence, Tuple, Union

from . import _errors, _lib
from ._comm import BufferLike, DTypeLike, Request, Result
from ._errors import InvalidArgument
from ._mesh import Mesh, MeshDim, _mesh_dim
from ._sharded import _is_torch, _stream, _view


class Region(enum.IntEnum):
    """weft_region_t: forward / backward communication.

    COPY: identity / all-reduce (sum). REDUCE: all-reduce / identity. SCATTER: keep this rank's
    chunk / all-gather. GATHER: all-gather / keep the chunk. SEQ_GATHER: all-gather /
    reduce-scatter (sum). SEQ_REDUCE_SCATTER: reduce-scatter (sum) / all-gather."""

    COPY = 0
    REDUCE = 1
    SCATTER = 2
    GATHER = 3
    SEQ_GATHER = 4
    SEQ_REDUCE_SCATTER = 5


# A Region, its int value or its name ("copy", "seq_gather", ...).
RegionLike = Union[Region, int, str]


# What each direction does to the extent along split_dim: "same", "chunk" (the whole -> this
# rank's chunk) or "whole" (a chunk -> the whole extent).
_IDENT, _ALLREDUCE, _KEEP, _ALLGATHER, _REDUCE_SCATTER = "identity", "all-reduce", "keep", "all-gather", \
    "reduce-scatter"
_OPS = {Region.COPY: (_IDENT, _ALLREDUCE), Region.REDUCE: (_ALLREDUCE, _IDENT),
        Region.SCATTER: (_KEEP, _ALLGATHER), Region.GATHER: (_ALLGATHER, _KEEP),
        Region.SEQ_GATHER: (_ALLGATHER, _REDUCE_SCATTER), Region.SEQ_REDUCE_SCATTER: (_REDUCE_SCATTER, _ALLGATHER)}


def as_region(region: RegionLike) -> Region:
    """Region from a Region, its int value or a name ("copy", "seq_gather", ...)."""
    if isinstance(region, Region):
        return region
    if isinstance(region, int) and not isinstance(region, bool) and region in Region._value2member_map_:
        return Region(region)
    if isinstance(region, str) and region.upper() in Region.__members__:
        return Region[region.upper()]
    raise InvalidArgument("region=%r: expected one of %s (or a weft.Region)"
                          % (region, ", ".join(r.name.lower() for r in Region)))


def region_op(region: RegionLike, backward: bool) -> str:
    """The communication one direction of a region makes: "identity", "all-reduce", "keep",
    "all-gather" or "reduce-scatter"."""
    return _OPS[as_region(region)][1 if backward else 0]


def chunk_range(n: int, parts: int, index: int) -> Tuple[int, int]:
    """torch.chunk's rule, as training.h states it: [start, stop) of chunk `index` of an extent
    n split in `parts` (chunk = ceil(n / parts); trailing chunks may be short or empty)."""
    c = -(-n // parts) if parts else 0
    return min(index * c, n), min((index + 1) * c, n)


def dim_group(mesh: Mesh, dim: MeshDim) -> Tuple[int, int]:
    """(size, coordinate) of this rank's group along mesh dim `dim` (a name or an index)."""
    if not isinstance(mesh, Mesh):
        raise InvalidArgument("expected a weft.Mesh, got %r" % (mesh,))
    if not mesh.is_member:
        raise InvalidArgument("this rank is not a member of the mesh, so it has no group along a mesh dim")
    d = _mesh_dim(mesh, dim)
    return mesh.shape[d], mesh.coords[d]


def _dim_name(mesh, dim):
    if isinstance(dim, str):
        return dim
    return mesh.names[_mesh_dim(mesh, dim)]


def out_shape(mesh: Mesh, dim: MeshDim, region: RegionLike, backward: bool, split_dim: int,
              in_shape: Sequence[int], extent: Optional[int] = None) -> Tuple[int, ...]:
    """The shape region_apply's output has on this rank for an input of in_shape. `extent` is
    the whole extent along split_dim for an all-gather (None: the input's times the group size,
    right when the chunks are even; give it for uneven chunks)."""
    size, coord = dim_group(mesh, dim)
    op = region_op(region, backward)
    shape = list(in_shape)
    if op in (_IDENT, _ALLREDUCE):
        return tuple(shape)
    k = split_dim + len(shape) if split_dim < 0 else split_dim
    if not 0 <= k < len(shape):
        raise InvalidArgument("split_dim %d is not a dim of a %d-d tensor" % (split_dim, len(shape)))
    if op == _ALLGATHER:
        shape[k] = int(extent) if extent is not None else shape[k] * size
    else:
        lo, hi = chunk_range(shape[k], size, coord)
        shape[k] = hi - lo
    return tuple(shape)


def _alloc(like, shape):
    if _is_torch(like):
        import torch
        return torch.empty(shape, dtype=like.dtype, device=like.device)
    import numpy as np
    return np.empty(shape, dtype=like.dtype)


def region_apply(mesh: Mesh, dim: MeshDim, region: RegionLike, backward: bool, split_dim: int,
                 input: BufferLike, out: BufferLike = None, extent: Optional[int] = None, dtype: DTypeLike = None,
                 async_op: bool = False, stream: Any = None) -> Result:
    """weft_region_apply(): one direction of a Megatron region over this rank's group along mesh
    dim `dim` (a name; an index is turned into its name). region: a weft.Region or a name
    ("copy", "reduce", "scatter", "gather", "seq_gather", "seq_reduce_scatter"); backward: False
    runs its forward, True its backward. Chunks are along tensor dim `split_dim` (negative counts
    from the end), torch.chunk's rule over the group.

    input and out: numpy arrays or torch tensors (strided views allowed; CUDA tensors with
    `stream`), the same dtype (`dtype` reinterprets integer storage, e.g. bfloat16 in uint16).
    out None: a new array like input of out_shape(...) (`extent`: the whole extent for an
    all-gather of uneven chunks). out may be input itself for identity and all-reduce.
    Collective over the group. Returns out; async_op=True returns a weft.Request whose wait()
    returns it."""
    r = as_region(region)
    name = _dim_name(mesh, dim)
    shape = tuple(int(n) for n in (input.shape))
    nd = len(shape)
    sd = int(split_dim)
    if sd < 0 and nd:
        sd += nd
    if out is None:
        out = _alloc(input, out_shape(mesh, name, r, backward, sd, shape, extent))
    vin = _view(input, dtype, "in")
    vout = vin if out is input else _view(out, dtype, "out")
    if vout.readonly:
        raise InvalidArgument("region_apply: out is read-only, but the call writes into it")
    f = _lib.fn("weft_region_apply")
    st = _stream(stream)
    with mesh._lock:
        if async_op:
            req = ctypes.c_void_p()
            _errors.check(f(mesh._h(), name.encode("utf-8"), int(r), 1 if backward else 0, sd, ctypes.byref(vin.c),
                            ctypes.byref(vout.c), st, ctypes.byref(req)))
            return Request(mesh, req.value, [vin, vout], out, "region_apply")
        _errors.check(f(mesh._h(), name.encode("utf-8"), int(r), 1 if backward else 0, sd, ctypes.byref(vin.c),
                        ctypes.byref(vout.c), st, None))
    return out


def ring_shift(mesh: Mesh, dim: MeshDim, shift: int, send: BufferLike, recv: BufferLike = None,
               dtype: DTypeLike = None, async_op: bool = False, stream: Any = None) -> Result:
    """weft_ring_shift(): sends `send` to the rank `shift` places further along mesh dim `dim`
    (wrapping; negative shifts go the other way) and receives `recv` from the rank `shift`
    places before, as one point-to-point batch. send and recv: contiguous numpy arrays or torch
    tensors of one dtype that do not overlap; recv must hold what that rank sends (recv None: a
    new array like send, for rings whose blocks are all the same size). Collective over the
    group. Returns recv; async_op=True returns a weft.Request whose wait() returns it, so the
    transfer runs while the caller computes on the current block (ring attention's overlap);
    send must not be written and recv not read until then."""
    name = _dim_name(mesh, dim)
    if recv is None:
        recv = _alloc(send, tuple(int(n) for n in send.shape))
    vs = _view(send, dtype, "send")
    vr = _view(recv, dtype, "recv")
    if vr.readonly:
        raise InvalidArgument("ring_shift: recv is read-only, but the call writes into it")
    f = _lib.fn("weft_ring_shift")
    st = _stream(stream)
    with mesh._lock:
        if async_op:
            req = ctypes.c_void_p()
            _errors.check(f(mesh._h(), name.encode("utf-8"), int(shift), ctypes.byref(vs.c), ctypes.byref(vr.c), st,
                            ctypes.byref(req)))
            return Request(mesh, req.value, [vs, vr], recv, "ring_shift")
        _errors.check(f(mesh._h(), name.encode("utf-8"), int(shift), ctypes.byref(vs.c), ctypes.byref(vr.c), st,
                        None))
    return recv
