"""Reduction operators written in Python (weft_op_create): a function of numpy arrays becomes a
weft_op_t usable as op= in allreduce, reduce and reduce_scatter on host memory.

    def absmax(dst, a, b):                      # dst may be a or b exactly
        np.maximum(np.abs(a), np.abs(b), out=dst)
    op = weft.register_op(absmax, name="absmax", dtypes=["float32", "float64"])
    comm.allreduce(x, op=op)
    weft.destroy_op(op)

weft calls the function once per chunk of a collective (not per element), from the thread that
runs the collective; every rank must register its operators in the same order (the ids must
agree) and the function must be associative and commutative (weft/plugin.h).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Iterable, Optional, Union

import numpy as np

from . import _errors, _lib
from ._buffers import DType, as_dtype
from ._errors import InvalidArgument, Status, WeftError

# The numpy type fn sees per weft dtype; FLOAT16, BFLOAT16 and both FP8 types reach fn as FLOAT32
# (weft reduces them in float32), so they need no entry.
_NUMPY = {DType.FLOAT64: np.float64, DType.FLOAT32: np.float32, DType.INT8: np.int8, DType.UINT8: np.uint8,
          DType.INT32: np.int32, DType.UINT32: np.uint32, DType.INT64: np.int64, DType.UINT64: np.uint64}

_lock = threading.Lock()
_registered = {}  # id -> UserOp: the ctypes trampoline must live while weft may call it


class UserOp(int):
    """A registered operator: an int (its weft_op_t, >= 64) with name, dtypes, fn, and
    `exception`/`failures`: the last exception fn raised and how many calls failed (a failing
    call fails the collective on this rank with the operator's name)."""

    @property
    def id(self) -> int:
        """The operator's weft_op_t value (>= 64), as a plain int."""
        return int(self)

    def _call(self, dst, a, b, count, dtype, _user_data):
        try:
            if not count:
                return int(Status.OK)
            np_type = _NUMPY[DType(dtype)]
            nbytes = count * np.dtype(np_type).itemsize
            view = lambda p: np.frombuffer((ctypes.c_char * nbytes).from_address(p), np_type)  # noqa: E731
            d = view(dst)
            x = d if a == dst else view(a)
            y = d if b == dst else view(b)
            if x is not d:
                x.flags.writeable = False
            if y is not d:
                y.flags.writeable = False
            out = self.fn(d, x, y)
            if out is not None and out is not d:
                d[...] = out  # fn returned the result instead of writing dst
            return int(Status.OK)
        except BaseException as e:  # nothing may unwind through C
            self.exception = e
            self.failures += 1
            return int(e.status) if isinstance(e, WeftError) and isinstance(e.status, Status) else \
                int(Status.INVALID_ARGUMENT)

    def __repr__(self):
        return "<weft.UserOp %d %r %s>" % (int(self), self.name, [d.name.lower() for d in self.dtypes])


def register_op(fn: Callable[..., Any], name: Optional[str] = None,
                dtypes: Iterable[Union[DType, str, Any]] = ("float32",)) -> UserOp:
    """weft_op_create(): fn(dst, a, b) gets numpy arrays (dst writable; a and b may be dst) and
    writes dst = a op b elementwise (or returns the result). dtypes: the element types it takes
    (weft.DType, names or numpy dtypes). Returns a UserOp to pass as op=."""
    if not callable(fn):
        raise InvalidArgument("register_op(fn=%r): expected a callable" % (fn,))
    name = getattr(fn, "__name__", "python_op") if name is None else str(name)
    types = tuple(as_dtype(d) for d in dtypes)
    if not types:
        raise InvalidArgument("register_op(%r): dtypes is empty; expected at least one element type" % name)
    cell = []  # the trampoline exists before the op (and its id) does
    trampoline = _lib.REDUCE_FN(lambda *args: cell[0]._call(*args))
    c_types = (ctypes.c_int * len(types))(*[int(d) for d in types])
    cfg = _lib.weft_op_config_t(ctypes.sizeof(_lib.weft_op_config_t), name.encode("utf-8"), trampoline, None,
                                ctypes.cast(c_types, ctypes.POINTER(ctypes.c_int)), len(types))
    out = ctypes.c_int()
    with _lock:
        _errors.check(_lib.fn("weft_op_create")(ctypes.byref(cfg), ctypes.byref(out)))
        op = UserOp(out.value)
        op.fn, op.name, op.dtypes, op.exception, op.failures = fn, name, types, None, 0
        op._trampoline = trampoline
        cell.append(op)
        _registered[out.value] = op
    return op


def destroy_op(op: Union[UserOp, int]) -> None:
    """weft_op_destroy(): unregisters a register_op() operator (a later collective with it
    fails); its id is not reused. Must not race with a collective using it."""
    ident = int(getattr(op, "id", op))
    with _lock:
        _errors.check(_lib.fn("weft_op_destroy")(ident))
        _registered.pop(ident, None)


def with_op_error(op: Any, issue: Callable[[], Any]) -> Any:
    """issue() (a blocking or asynchronous collective); when it fails because a weft.register_op
    operator raised, the error says so and is chained to that exception (weft only knows that the
    operator failed)."""
    before = getattr(op, "failures", None)
    try:
        return issue()
    except _errors.WeftError as e:
        exc = getattr(op, "exception", None)
        if before is None or exc is None or op.failures == before:
            raise
        raise _errors.error_for(e.status, "%s (the Python operator %r raised %s: %s)"
                                % (e.message, op.name, type(exc).__name__, exc)) from exc
