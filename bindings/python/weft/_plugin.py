"""Plugins (weft/plugin.h): loading a shared library that extends weft, calling its functions by
name, passing Python functions to it as C function pointers, and Python reduction operators.

    p = weft.load_plugin("build/plugins/libweft_c_reduce.so")
    print(p.name, p.version, [e.name for e in p.entries])
    p.call("add_i64", 2, 40)                                   # 42, converted by the signature
    p.call("apply_twice", weft.Closure(lambda x: x * 3, ret="f64", args=["f64"]), 2.0)   # 18.0
    comm.allreduce(x, op=p.entry("absmax"))                    # a REDUCE_OP entry is an operator
    op = weft.register_op(lambda dst, a, b: np.maximum(a, b, out=dst), name="max", dtypes=["float32"])
    comm.allreduce(x, op=op); weft.destroy_op(op)

Arguments of Plugin.call by the entry's signature: integers and SIZE from Python ints, F32/F64
from numbers, PTR from None, an int address, a buffer (numpy array, bytearray, ctypes array),
TENSOR from a numpy array (a contiguous host weft_tensor_t over it), STRING from str (UTF-8) or
bytes, FN from a weft.Closure, a (callable, ret, args) tuple, or an int address. A plugin runs in
this process: a manifest that lies about a FUNCTION's signature makes the call undefined
behaviour (weft/plugin.h).
"""

from __future__ import annotations

import ctypes
import enum
import os
from typing import Any, Callable, Iterable, List, NamedTuple, Tuple, Union

import numpy as np

from . import _errors, _lib
from ._buffers import DType, as_buffer, as_dtype
from ._errors import InvalidArgument, Status, WeftError
from ._handle import Handle


class ValueType(enum.IntEnum):
    """weft_value_type_t."""

    VOID = 0
    I8 = 1
    U8 = 2
    I16 = 3
    U16 = 4
    I32 = 5
    U32 = 6
    I64 = 7
    U64 = 8
    F32 = 9
    F64 = 10
    PTR = 11
    SIZE = 12
    TENSOR = 13
    STRING = 14
    FN = 15


class PluginKind(enum.IntEnum):
    """weft_plugin_kind_t."""

    FUNCTION = 0
    REDUCE_OP = 1
    CODEC_BYTES = 2
    CODEC_ENCODE = 3
    CODEC_DECODE = 4
    ROUTER = 5
    SCHEDULE = 6
    COST_MODEL = 7


# Integer types: (bits, signed). SIZE is size_t (64-bit on every platform weft builds for).
_INTS = {ValueType.I8: (8, True), ValueType.U8: (8, False), ValueType.I16: (16, True), ValueType.U16: (16, False),
         ValueType.I32: (32, True), ValueType.U32: (32, False), ValueType.I64: (64, True),
         ValueType.U64: (64, False), ValueType.SIZE: (64, False)}
_FLOATS = (ValueType.F32, ValueType.F64)
_TYPE_NAMES = {"int8": ValueType.I8, "uint8": ValueType.U8, "int16": ValueType.I16, "uint16": ValueType.U16,
               "int32": ValueType.I32, "uint32": ValueType.U32, "int64": ValueType.I64, "uint64": ValueType.U64,
               "float": ValueType.F32, "float32": ValueType.F32, "double": ValueType.F64, "float64": ValueType.F64,
               "size_t": ValueType.SIZE, "pointer": ValueType.PTR, "str": ValueType.STRING}


# A ValueType, its int value or a name ("f64", "I32", "double", "size", "ptr").
ValueTypeLike = Union[ValueType, int, str]
# What Plugin.call returns: an int, a float, a str (STRING), an address (PTR, TENSOR, FN) or None.
Value = Union[int, float, str, None]


def as_value_type(t: ValueTypeLike) -> ValueType:
    """ValueType from a ValueType, its int, or a name ("f64", "I32", "double", "size", "ptr")."""
    if isinstance(t, ValueType):
        return t
    if isinstance(t, int) and not isinstance(t, bool) and t in ValueType._value2member_map_:
        return ValueType(t)
    if isinstance(t, str):
        key = t.strip()
        if key.upper() in ValueType.__members__:
            return ValueType[key.upper()]
        if key.lower() in _TYPE_NAMES:
            return _TYPE_NAMES[key.lower()]
    raise InvalidArgument("value type %r: expected a weft.ValueType or one of %s"
                          % (t, ", ".join(m.name.lower() for m in ValueType)))


class _PluginEntryFields(NamedTuple):
    name: str
    kind: Union[PluginKind, int]
    symbol: str
    doc: str
    ret: ValueType
    args: Tuple[ValueType, ...]
    dtypes: Tuple[DType, ...]
    id: int


class PluginEntry(_PluginEntryFields):
    """One entry of a loaded plugin (weft_plugin_entry_t): name, kind (PluginKind), symbol, doc,
    ret (ValueType), args (tuple of ValueType), dtypes (tuple of DType, REDUCE_OP only) and id
    (the extension id a registered kind got: pass the entry as op=, wire=, selector=,
    cost_model= or a schedule kind; -1 for FUNCTION)."""

    __slots__ = ()

    def signature(self) -> str:
        """The C signature as text, e.g. "F64(F64, I32)"."""
        return "%s(%s)" % (self.ret.name, ", ".join(a.name for a in self.args))


def _entry_of(c):
    args = tuple(ValueType(c.args[i]) for i in range(c.nargs))
    dtypes = tuple(DType(c.dtypes[i]) for i in range(c.ndtypes))
    text = lambda b: b.decode("utf-8", "replace") if b else ""  # noqa: E731
    kind = PluginKind(c.kind) if c.kind in PluginKind._value2member_map_ else int(c.kind)
    return PluginEntry(text(c.name), kind, text(c.symbol), text(c.doc), ValueType(c.ret), args, dtypes, int(c.id))


# ------------------------------------------------------------------ values

def _to_c(value, t, what, keep):
    """A weft_value_t of type t from a Python value (keep: what must outlive the call)."""
    v = _lib.weft_value_t(int(t), 0, 0.0, None)
    if t in _INTS:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise InvalidArgument("%s: expected %s (an int), got %s" % (what, t.name, type(value).__name__))
        bits, signed = _INTS[t]
        x = int(value)
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        if not lo <= x <= hi:
            raise InvalidArgument("%s: %d does not fit %s [%d, %d]" % (what, x, t.name, lo, hi))
        v.i = x - (1 << 64) if x >= (1 << 63) else x  # unsigned 64-bit values travel as their bits
    elif t in _FLOATS:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InvalidArgument("%s: expected %s (a number), got %s" % (what, t.name, type(value).__name__))
        v.f = float(value)
    elif t == ValueType.PTR:
        v.p = _address(value, what, keep)
    elif t == ValueType.TENSOR:
        v.p = _tensor(value, what, keep)
    elif t == ValueType.STRING:
        if isinstance(value, str):
            value = value.encode("utf-8")
        if not isinstance(value, (bytes, bytearray)) or b"\0" in value:
            raise InvalidArgument("%s: expected STRING (a str or bytes without NUL), got %r" % (what, value))
        s = ctypes.create_string_buffer(bytes(value))
        keep.append(s)
        v.p = ctypes.addressof(s)
    elif t == ValueType.FN:
        v.p = _function(value, what, keep)
    else:
        raise InvalidArgument("%s: an argument of type %s" % (what, t.name))
    return v


def _address(value, what, keep):
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, ctypes._Pointer) or isinstance(value, ctypes.c_void_p):
        return ctypes.cast(value, ctypes.c_void_p).value
    if isinstance(value, ctypes._SimpleCData) or isinstance(value, (ctypes.Array, ctypes.Structure)):
        keep.append(value)
        return ctypes.addressof(value)
    buf = as_buffer(value, what)
    keep.append(buf)
    return buf.ptr


def _tensor(value, what, keep):
    if isinstance(value, _lib.weft_tensor_t):
        keep.append(value)
        return ctypes.addressof(value)
    if not isinstance(value, np.ndarray):
        raise InvalidArgument("%s: expected TENSOR (a numpy array or a weft_tensor_t), got %s"
                              % (what, type(value).__name__))
    arr = value if value.flags.c_contiguous else np.ascontiguousarray(value)
    try:
        dt = as_dtype(arr.dtype)
    except InvalidArgument:
        raise InvalidArgument("%s: %s elements are not a weft dtype" % (what, arr.dtype)) from None
    shape = (ctypes.c_int64 * max(1, arr.ndim))(*arr.shape)
    t = _lib.weft_tensor_t(arr.ctypes.data if arr.size else None, _lib.DEVICE_CPU, 0, arr.ndim, int(dt),
                           ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)), None, 0)
    keep += [arr, shape, t]
    return ctypes.addressof(t)


def _function(value, what, keep):
    if isinstance(value, Closure):
        if value.closed:
            raise InvalidArgument("%s: the weft.Closure is closed" % what)
        keep.append(value)
        return value.function
    if isinstance(value, tuple) and len(value) in (2, 3) and callable(value[0]):
        c = Closure(*value)  # (fn, ret) or (fn, ret, args); closed after the call
        c._temporary = True
        keep.append(c)
        return c.function
    if isinstance(value, int) and not isinstance(value, bool) and value:
        return value
    if isinstance(value, ctypes._CFuncPtr):
        keep.append(value)
        return ctypes.cast(value, ctypes.c_void_p).value
    if callable(value):
        raise InvalidArgument("%s: a Python callable needs its C signature: pass weft.Closure(fn, ret=..., "
                              "args=[...]) or (fn, ret, args)" % what)
    raise InvalidArgument("%s: expected FN (a weft.Closure, (callable, ret, args) or an address), got %r"
                          % (what, value))


def _from_c(v):
    """The Python value of a weft_value_t (by its own type)."""
    t = ValueType(v.type) if v.type in ValueType._value2member_map_ else None
    if t is None or t == ValueType.VOID:
        return None
    if t in _INTS:
        return v.i & ((1 << 64) - 1) if not _INTS[t][1] else v.i
    if t in _FLOATS:
        return v.f
    if t == ValueType.STRING:
        return ctypes.string_at(v.p).decode("utf-8", "replace") if v.p else None
    return v.p  # PTR, TENSOR, FN: the address (None for NULL)


# ------------------------------------------------------------------ plugins

class Plugin(Handle):
    """A loaded plugin (weft_plugin_t): name, version, path, abi (major, minor), entries,
    entry(name), call(name, *args). close() releases the handle; the library and what it
    registered stay for the life of the process (weft/plugin.h: Lifetime)."""

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        self._handle = None
        out = ctypes.c_void_p()
        _errors.check(_lib.fn("weft_plugin_load")(str(path).encode("utf-8"), ctypes.byref(out)))
        self._handle = out.value
        info = _lib.weft_plugin_info_t(ctypes.sizeof(_lib.weft_plugin_info_t))
        _errors.check(_lib.fn("weft_plugin_info")(self._handle, ctypes.byref(info)))
        self.name = info.name.decode("utf-8", "replace")
        self.version = info.version.decode("utf-8", "replace")
        self.path = info.path.decode("utf-8", "replace")
        self.abi = (info.abi_major, info.abi_minor)
        entries = []
        for i in range(info.nentries):
            c = _lib.weft_plugin_entry_t(ctypes.sizeof(_lib.weft_plugin_entry_t))
            _errors.check(_lib.fn("weft_plugin_entry")(self._handle, i, ctypes.byref(c)))
            entries.append(_entry_of(c))
        self._entries = tuple(entries)
        self._by_name = {e.name: e for e in entries}

    def _h(self):
        if self._handle is None:
            raise InvalidArgument("weft.Plugin %r is closed" % getattr(self, "name", "?"))
        return self._handle

    @property
    def entries(self) -> List[PluginEntry]:
        """Every entry, in manifest order (a list of PluginEntry)."""
        return list(self._entries)

    def entry(self, name: str) -> PluginEntry:
        """The entry named name (weft_plugin_lookup: the error lists the plugin's entries)."""
        c = _lib.weft_plugin_entry_t(ctypes.sizeof(_lib.weft_plugin_entry_t))
        _errors.check(_lib.fn("weft_plugin_lookup")(self._h(), str(name).encode("utf-8"), ctypes.byref(c)))
        return _entry_of(c)

    def call(self, name: str, *args: Any) -> Value:
        """weft_plugin_call(): calls entry `name` with args converted by its signature; returns
        its result (None for VOID). A Python function given as FN that raised re-raises here."""
        e = self._by_name.get(name) or self.entry(name)
        if len(args) != len(e.args):
            raise InvalidArgument("%s of plugin %r takes %d arguments (%s), got %d"
                                  % (e.name, self.name, len(e.args), e.signature(), len(args)))
        keep = []
        try:
            values = [_to_c(a, t, "argument %d of '%s'" % (i, e.name), keep) for i, (a, t) in
                      enumerate(zip(args, e.args))]
            closures = [k for k in keep if isinstance(k, Closure)]
            for c in closures:
                c._call_errors = []
            c_args = (_lib.weft_value_t * max(1, len(values)))(*values)
            result = _lib.weft_value_t(int(e.ret), 0, 0.0, None)
            _errors.check(_lib.fn("weft_plugin_call")(self._h(), e.name.encode("utf-8"), c_args, len(values),
                                                      ctypes.byref(result)))
            for c in closures:
                if c._call_errors:  # the first failure of this call (later ones may follow from it)
                    first = c._call_errors[0]
                    raise WeftError("%s of plugin %r: the Python function passed as FN raised %s: %s (%d failed "
                                    "calls)" % (e.name, self.name, type(first).__name__, first, len(c._call_errors)),
                                    Status.INVALID_ARGUMENT) from first
            return _from_c(result)
        finally:
            for k in keep:
                if isinstance(k, Closure) and k._temporary:
                    k.close()
                elif hasattr(k, "release"):
                    k.release()

    def close(self) -> None:
        """weft_plugin_destroy(). Idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_plugin_destroy")(h))

    def __repr__(self):
        return "<weft.Plugin %s %s (%s): %d entries>" % (self.name, self.version, self.path, len(self._entries))


def load_plugin(path: Union[str, os.PathLike]) -> Plugin:
    """weft_plugin_load(): loads and verifies the plugin at path and registers its extensions."""
    return Plugin(path)


# ------------------------------------------------------------------ closures

class Closure(Handle):
    """A Python function as a C function pointer of a given signature (weft_closure_create):
    Closure(fn, ret="f64", args=["f64"]). fn gets Python values (ints, floats, str for STRING,
    addresses for PTR/TENSOR/FN) and returns the value for ret. `function` is the address (an
    FN argument of Plugin.call takes the Closure itself). An exception in fn makes the C
    function return 0; `failures`, `message` (weft_closure_error) and `exception` (the last
    one) report it. close() frees it: the pointer must not be called after that."""

    def __init__(self, fn: Callable[..., Any], ret: ValueTypeLike = "void", args: Iterable[ValueTypeLike] = ()) -> None:
        self._handle = None
        self._temporary = False
        if not callable(fn):
            raise InvalidArgument("Closure(fn=%r): expected a callable" % (fn,))
        self.fn = fn
        self.ret = as_value_type(ret)
        self.args = tuple(as_value_type(a) for a in args)
        self.exception = None
        self._call_errors = []  # exceptions during the current Plugin.call
        self._trampoline = _lib.CLOSURE_FN(self._call)  # kept alive with the closure
        c_args = (ctypes.c_int * max(1, len(self.args)))(*[int(a) for a in self.args])
        out, function = ctypes.c_void_p(), ctypes.c_void_p()
        _errors.check(_lib.fn("weft_closure_create")(int(self.ret), c_args, len(self.args), self._trampoline, None,
                                                     ctypes.byref(out), ctypes.byref(function)))
        self._handle = out.value
        self.function = function.value

    def _call(self, args, nargs, result, _user_data):
        try:
            values = [_from_c(args[i]) for i in range(nargs)]
            out = self.fn(*values)
            if self.ret != ValueType.VOID:
                v = _to_c(out, self.ret, "the return value of %s" % getattr(self.fn, "__name__", "the closure"), [])
                result[0].i, result[0].f, result[0].p = v.i, v.f, v.p
            return int(Status.OK)
        except BaseException as e:  # nothing may unwind through C
            self.exception = e
            self._call_errors.append(e)
            return int(e.status) if isinstance(e, WeftError) and isinstance(e.status, Status) else \
                int(Status.INVALID_ARGUMENT)

    @property
    def failures(self) -> int:
        """How many calls failed since creation (weft_closure_error)."""
        return self._error()[0]

    @property
    def message(self) -> str:
        """weft's message of the last failure ("" when none)."""
        return self._error()[1]

    def _error(self):
        if self._handle is None:
            raise InvalidArgument("weft.Closure is closed")
        n, msg = ctypes.c_uint64(), ctypes.c_char_p()
        _errors.check(_lib.fn("weft_closure_error")(self._handle, ctypes.byref(n), ctypes.byref(msg)))
        return n.value, (msg.value or b"").decode("utf-8", "replace")

    def close(self) -> None:
        """weft_closure_destroy(). Idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_closure_destroy")(h))

    def __repr__(self):
        return "<weft.Closure %s(%s)%s>" % (self.ret.name, ", ".join(a.name for a in self.args),
                                            " closed" if self.closed else "")
