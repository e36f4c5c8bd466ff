"""Training parallelism (weft/training.h), first part: wire formats, views of weft-owned memory,
and the gradient bucketer (weft.Bucketer). ZeRO is in _zero.py, the tensor/sequence/context
parallel communication in _regions.py.

Arrays handed to weft are numpy arrays or CPU torch tensors, described as weft_tensor_t views
(_sharded._view: numpy's __array_interface__, torch's data_ptr()/shape/stride()). Memory weft
owns (bucket shards, ZeRO parameters) comes back as numpy arrays over that memory (bfloat16 as
uint16 storage, fp8 as uint8) or, with like="torch", torch tensors over it (bfloat16 as
torch.bfloat16); such a view keeps the Python handle object alive, but the memory is only valid
as long as training.h says (until the next finish/step/release or close).
"""

from __future__ import annotations

import ctypes
import enum
import sys
import weakref
from typing import Any, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import _errors, _lib
from ._buffers import DType
from ._comm import BufferLike, Comm, Op, OpLike, as_op
from ._errors import InvalidArgument
from ._handle import Handle
from ._plugin_ids import extension_id, names_extension
from ._sharded import _is_torch, _view


class Wire(enum.IntEnum):
    """weft_wire_format_t: how gradients travel (training.h states the error each adds)."""

    NATIVE = 0
    BF16 = 1
    FP8_E4M3 = 2


# A Wire, its int value or name ("native", "bf16", "fp8_e4m3"), or a plugin codec (its id >= 64 or its
# entry of a loaded plugin).
WireLike = Union[Wire, int, str, Any]
# A gradient's registration index or its name.
GradRef = Union[int, str]

WIRE_FP8_BLOCK = 256  # WEFT_WIRE_FP8_BLOCK: elements per float32 scale on the FP8_E4M3 wire

_WIRE_NAMES = {"native": Wire.NATIVE, "bf16": Wire.BF16, "bfloat16": Wire.BF16, "fp8_e4m3": Wire.FP8_E4M3,
               "fp8": Wire.FP8_E4M3, "e4m3": Wire.FP8_E4M3}


def as_wire(wire: WireLike) -> Union[Wire, int]:
    """Wire from a Wire, its int value or a name ("native", "bf16", "fp8_e4m3"); a plugin codec's
    wire format (an id >= 64, or the codec's entry of a loaded plugin) as its int."""
    if isinstance(wire, Wire):
        return wire
    if names_extension(wire):
        return extension_id(wire, "wire")
    if isinstance(wire, int) and not isinstance(wire, bool) and wire in Wire._value2member_map_:
        return Wire(wire)
    if isinstance(wire, str) and wire.lower() in _WIRE_NAMES:
        return _WIRE_NAMES[wire.lower()]
    raise InvalidArgument("wire=%r: expected \"native\", \"bf16\" or \"fp8_e4m3\" (or a weft.Wire)" % (wire,))


def _sum_or_avg(op, what):
    o = as_op(op)
    if o not in (Op.SUM, Op.AVG):
        raise InvalidArgument("%s=%r: expected weft.SUM or weft.AVG (\"sum\" / \"avg\")" % (what, op))
    return o


def _names_array(names, n, what):
    """(list of str, C array of char*) for optional per-item names; (None, None) when names is None."""
    if names is None:
        return None, None
    names = [str(x) for x in names]
    if len(names) != n:
        raise InvalidArgument("%s: %d names for %d items" % (what, len(names), n))
    arr = (ctypes.c_char_p * n)(*[x.encode("utf-8") for x in names])
    return names, arr


def _items(tensors, what):
    """(list of arrays, names or None) from a list/tuple of arrays or a dict {name: array}."""
    if isinstance(tensors, dict):
        return list(tensors.values()), [str(k) for k in tensors]
    if _is_torch(tensors) or hasattr(tensors, "__array_interface__"):
        raise InvalidArgument("%s: expected a list (or dict) of arrays, got a single array" % what)
    return list(tensors), None


def _data_ptr(obj, what):
    """The address of obj's first element now (numpy: __array_interface__, torch: data_ptr())."""
    if _is_torch(obj):
        return int(obj.data_ptr())
    ai = getattr(obj, "__array_interface__", None)
    if ai is None:
        raise InvalidArgument("%s: a %s.%s is neither a numpy array nor a torch tensor"
                              % (what, type(obj).__module__, type(obj).__qualname__))
    return int(ai["data"][0] or 0)


# ------------------------------------------------------------------ views of weft's memory

_TYPESTR = {DType.FLOAT64: "f8", DType.FLOAT32: "f4", DType.FLOAT16: "f2", DType.BFLOAT16: "u2",
            DType.FP8_E4M3: "u1", DType.FP8_E5M2: "u1", DType.INT8: "i1", DType.UINT8: "u1",
            DType.INT32: "i4", DType.UINT32: "u4", DType.INT64: "i8", DType.UINT64: "u8"}


class _WeftMemory:
    """weft-owned memory as numpy sees it (__array_interface__); `owner` (the handle object)
    stays alive as long as an array made from it."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, ptr, shape, dtype, readonly, owner):
        endian = "<" if sys.byteorder == "little" else ">"
        self.__array_interface__ = {"data": (int(ptr), bool(readonly)), "shape": tuple(shape),
                                    "typestr": endian + _TYPESTR[dtype], "version": 3}
        self.owner = owner


def _memory_view(ptr, shape, dtype, owner, like="numpy", readonly=False):
    """An array over weft memory at ptr: numpy (bfloat16 as uint16, fp8 as uint8 storage) or,
    like="torch", a CPU torch tensor (bfloat16 as torch.bfloat16). Read-only numpy arrays when
    readonly (torch tensors cannot be marked read-only)."""
    import numpy as np
    if like not in ("numpy", "torch"):
        raise InvalidArgument("like=%r: expected \"numpy\" or \"torch\"" % (like,))
    dtype = DType(dtype)
    n = 1
    for s in shape:
        n *= int(s)
    if n == 0 or not ptr:
        arr = np.zeros(tuple(shape), dtype=_TYPESTR[dtype])
    else:
        arr = np.asarray(_WeftMemory(ptr, shape, dtype, readonly and like == "numpy", owner))
    if like == "numpy":
        return arr
    import torch
    if dtype in (DType.UINT32, DType.UINT64):
        raise _errors.Unsupported("torch has no %s tensors; use like=\"numpy\"" % dtype.name.lower())
    if dtype == DType.BFLOAT16:  # torch.from_numpy takes no uint16: go through int16 storage
        return torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(arr)


def _tensor_views(arrays, what, dtype=None):
    """(list of _View, C array of weft_tensor_t) for a list of numpy arrays / torch tensors."""
    views = []
    for i, a in enumerate(arrays):
        views.append(_view(a, dtype(a) if callable(dtype) else dtype, "%s[%d]" % (what, i)))
    arr = (_lib.weft_tensor_t * max(1, len(views)))(*[v.c for v in views])
    return views, arr


# ------------------------------------------------------------------ bucketer

class Reduction(enum.IntEnum):
    """weft_bucket_reduction_t."""

    ALLREDUCE = 0
    REDUCE_SCATTER = 1


_REDUCTION_NAMES = {"allreduce": Reduction.ALLREDUCE, "all_reduce": Reduction.ALLREDUCE,
                    "reduce_scatter": Reduction.REDUCE_SCATTER, "reducescatter": Reduction.REDUCE_SCATTER}


class BucketerStats(NamedTuple):
    """weft_bucketer_stats_t: finish() calls so far; for the last step the bytes this rank's
    reductions moved in the wire format, the nanoseconds finish() waited for communication, and
    the buckets ready before an earlier bucket."""

    steps: int
    wire_bytes: int
    exposed_ns: int
    launched_late: int


_live = weakref.WeakSet()  # bucketers and ZeRO handles, closed at exit before meshes and communicators


def _close_all():
    for h in list(_live):
        try:
            h.close()
        except Exception:
            pass


class Bucketer(Handle):
    """Gradient buckets for data parallelism (weft_bucketer_t), as DDP's reducer does.

        grads = [p.grad for p in reversed(list(model.parameters()))]   # backward's order
        b = weft.Bucketer(comm, grads, bucket_bytes=1 << 20)
        ... backward; as each gradient is final: b.mark_ready(i)
        b.finish()                      # all-reduced (averaged) into the gradients

    Collective over `comm`. `grads`: a list of contiguous floating-point numpy arrays or CPU
    torch tensors (or a dict {name: array}, its keys becoming the names), in the order backward
    produces them; the memory stays the caller's and must stay at the same address: the
    bucketer keeps references to the arrays. Every rank registers the same shapes and dtypes.

    bucket_bytes (None = 25 MiB) or bucket_of (a bucket index per gradient) forms the buckets;
    op "avg" (mean over the ranks) or "sum"; wire "native", "bf16" or "fp8_e4m3" (float32
    gradients only; see training.h for the error bound); reduction "allreduce" (results in the
    gradients) or "reduce_scatter" (each rank gets a chunk of each bucket: shard()); names for
    error messages ("grad[i]" otherwise); error_feedback=True keeps what a compressed wire lost and
    adds it to the next step's gradients (training.h). One thread at a time; calls are serialised with the
    communicator's other calls. close() (also `with`, collection and exit) frees it."""

    def __init__(self, comm: Comm, grads: Union[Sequence[BufferLike], Mapping[str, BufferLike]],
                 bucket_bytes: Optional[int] = None, op: OpLike = "avg", wire: WireLike = "native",
                 reduction: Union[Reduction, int, str] = "allreduce", names: Optional[Sequence[str]] = None,
                 bucket_of: Optional[Sequence[int]] = None, error_feedback: bool = False) -> None:
        self._handle = None
        if not isinstance(comm, Comm):
            raise InvalidArgument("Bucketer(comm=...): expected a weft.Comm, got %r" % (comm,))
        arrays, dict_names = _items(grads, "Bucketer(grads=...)")
        if not arrays:
            raise InvalidArgument("Bucketer: no gradients given; expected at least one")
        if names is None:
            names = dict_names
        self._comm = comm
        self._grads = arrays
        self._views, c_grads = _tensor_views(arrays, "grads")
        self._names, c_names = _names_array(names, len(arrays), "Bucketer(names=...)")
        if isinstance(reduction, str):
            if reduction.lower() not in _REDUCTION_NAMES:
                raise InvalidArgument("reduction=%r: expected \"allreduce\" or \"reduce_scatter\"" % (reduction,))
            reduction = _REDUCTION_NAMES[reduction.lower()]
        self._reduction = Reduction(reduction)
        c_bucket_of = None
        if bucket_of is not None:
            bucket_of = [int(x) for x in bucket_of]
            if len(bucket_of) != len(arrays):
                raise InvalidArgument("Bucketer(bucket_of=...): %d entries for %d gradients"
                                      % (len(bucket_of), len(arrays)))
            c_bucket_of = (ctypes.c_size_t * len(bucket_of))(*bucket_of)
        cfg = _lib.weft_bucketer_config_t(ctypes.sizeof(_lib.weft_bucketer_config_t),
                                          0 if bucket_bytes is None else int(bucket_bytes),
                                          ctypes.cast(c_bucket_of, ctypes.POINTER(ctypes.c_size_t))
                                          if c_bucket_of is not None else None,
                                          int(_sum_or_avg(op, "op")), int(as_wire(wire)), int(self._reduction),
                                          ctypes.cast(c_names, ctypes.POINTER(ctypes.c_char_p))
                                          if c_names is not None else None, 1 if error_feedback else 0)
        out = ctypes.c_void_p()
        with comm._lock:
            _errors.check(_lib.fn("weft_bucketer_create")(comm._h(), c_grads, len(arrays), ctypes.byref(cfg),
                                                          ctypes.byref(out)))
        self._handle = out.value
        self._nbuckets = None
        _live.add(self)

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidArgument("the bucketer is closed")
        return h

    def _index(self, grad):
        if isinstance(grad, str):
            if self._names is None or grad not in self._names:
                raise InvalidArgument("no gradient is named %r" % (grad,))
            return self._names.index(grad)
        i = int(grad)
        if not 0 <= i < len(self._grads):
            raise InvalidArgument("gradient %d: the bucketer has %d gradients" % (i, len(self._grads)))
        return i

    # -------------------------------------------------------------- queries

    @property
    def grads(self) -> Tuple[Any, ...]:
        """The registered gradient arrays, in registration order."""
        return tuple(self._grads)

    @property
    def names(self) -> Optional[Tuple[str, ...]]:
        """The gradients' names, or None when none were given."""
        return tuple(self._names) if self._names is not None else None

    @property
    def reduction(self) -> Reduction:
        """All-reduce into the gradients, or reduce-scatter into shards."""
        return self._reduction

    @property
    def num_buckets(self) -> int:
        """weft_bucketer_num_buckets()."""
        if self._nbuckets is None:
            n = ctypes.c_size_t()
            _errors.check(_lib.fn("weft_bucketer_num_buckets")(self._h(), ctypes.byref(n)))
            self._nbuckets = n.value
        return self._nbuckets

    def bucket_of(self, grad: GradRef) -> Tuple[int, int]:
        """weft_bucketer_bucket_of(): (bucket, element offset in it) of gradient `grad` (an index or
        a name)."""
        b, off = ctypes.c_size_t(), ctypes.c_size_t()
        _errors.check(_lib.fn("weft_bucketer_bucket_of")(self._h(), self._index(grad), ctypes.byref(b),
                                                         ctypes.byref(off)))
        return b.value, off.value

    def stats(self) -> BucketerStats:
        """weft_bucketer_stats() as a BucketerStats."""
        s = _lib.weft_bucketer_stats_t(ctypes.sizeof(_lib.weft_bucketer_stats_t))
        _errors.check(_lib.fn("weft_bucketer_stats")(self._h(), ctypes.byref(s)))
        return BucketerStats(s.steps, s.wire_bytes, s.exposed_ns, s.launched_late)

    # -------------------------------------------------------------- per step

    def mark_ready(self, grad: GradRef, current: BufferLike = None) -> None:
        """weft_bucketer_mark_ready(): gradient `grad` (an index or a name) holds its final value
        for this step. weft is given the address the gradient has now: that of `current` when
        given (e.g. the parameter's .grad at this moment), else of the registered array. A
        framework that reallocated the gradient (a new .grad tensor) is told so with
        weft.InvalidArgument naming it, never reduced from stale memory. May start bucket
        reductions (in bucket order); returns without waiting for them."""
        i = self._index(grad)
        ptr = _data_ptr(self._grads[i] if current is None else current, "mark_ready(current=...)")
        with self._comm._lock:
            _errors.check(_lib.fn("weft_bucketer_mark_ready")(self._h(), i, ptr or None, None))

    def finish(self) -> None:
        """weft_bucketer_finish(): waits for every bucket's reduction and writes the results (into
        the gradients, or the shards with reduction="reduce_scatter"); resets for the next step."""
        with self._comm._lock:
            _errors.check(_lib.fn("weft_bucketer_finish")(self._h(), None))

    def shard(self, bucket: int, like: str = "numpy") -> Tuple[Any, int]:
        """weft_bucketer_shard() (reduction="reduce_scatter", after finish()): (array, offset):
        this rank's reduced chunk of `bucket`, a 1-d view of weft's memory holding the bucket's
        elements [offset, offset + len) (torch.chunk's rule over the ranks). Valid until the next
        finish() or close(); copy it to keep it. like="torch" gives a torch tensor over it."""
        t = _lib.weft_tensor_t()
        off = ctypes.c_size_t()
        _errors.check(_lib.fn("weft_bucketer_shard")(self._h(), int(bucket), ctypes.byref(t), ctypes.byref(off)))
        shape = tuple(t.shape[i] for i in range(t.ndim))
        return _memory_view(t.data, shape, t.dtype, self, like), off.value

    # -------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """weft_bucketer_destroy(); shard views must not be used afterwards. Idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_bucketer_destroy")(h))

    def __repr__(self):
        if self.closed:
            return "<weft.Bucketer closed>"
        return "<weft.Bucketer %d gradients in %d buckets, %s>" % (len(self._grads), self.num_buckets,
                                                                   self._reduction.name.lower())
