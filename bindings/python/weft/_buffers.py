"""Turning Python objects into (pointer, size, dtype) views the C ABI takes.

Accepted: objects with the buffer protocol (numpy arrays, bytearray, bytes, memoryview,
array.array) and objects with ``__dlpack__`` (torch tensors on the CPU). A view keeps what it
points at alive (and exported: a bytearray cannot be resized meanwhile) until release().
"""

from __future__ import annotations

import ctypes
import enum
import sys
from typing import Any, Optional, Union

from . import _errors, _lib


class DType(enum.IntEnum):
    """weft_dtype_t."""

    FLOAT64 = 0
    FLOAT32 = 1
    FLOAT16 = 2
    BFLOAT16 = 3
    FP8_E4M3 = 4
    FP8_E5M2 = 5
    INT8 = 6
    UINT8 = 7
    INT32 = 8
    UINT32 = 9
    INT64 = 10
    UINT64 = 11

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _ITEMSIZE[self]

    @property
    def is_floating(self) -> bool:
        """True for the floating-point types (float64 down to fp8)."""
        return self <= DType.FP8_E5M2


_ITEMSIZE = {
    DType.FLOAT64: 8, DType.FLOAT32: 4, DType.FLOAT16: 2, DType.BFLOAT16: 2,
    DType.FP8_E4M3: 1, DType.FP8_E5M2: 1, DType.INT8: 1, DType.UINT8: 1,
    DType.INT32: 4, DType.UINT32: 4, DType.INT64: 8, DType.UINT64: 8,
}

# Names accepted for dtype= (besides DType members, their int values, numpy and torch dtypes).
_NAMES = {
    "float64": DType.FLOAT64, "double": DType.FLOAT64, "f8": DType.FLOAT64,
    "float32": DType.FLOAT32, "float": DType.FLOAT32, "f4": DType.FLOAT32,
    "float16": DType.FLOAT16, "half": DType.FLOAT16, "f2": DType.FLOAT16,
    "bfloat16": DType.BFLOAT16, "bf16": DType.BFLOAT16,
    "fp8_e4m3": DType.FP8_E4M3, "float8_e4m3": DType.FP8_E4M3, "float8_e4m3fn": DType.FP8_E4M3,
    "e4m3": DType.FP8_E4M3,
    "fp8_e5m2": DType.FP8_E5M2, "float8_e5m2": DType.FP8_E5M2, "e5m2": DType.FP8_E5M2,
    "int8": DType.INT8, "i1": DType.INT8, "uint8": DType.UINT8, "u1": DType.UINT8,
    "int32": DType.INT32, "i4": DType.INT32, "int": DType.INT32,
    "uint32": DType.UINT32, "u4": DType.UINT32,
    "int64": DType.INT64, "i8": DType.INT64, "long": DType.INT64,
    "uint64": DType.UINT64, "u8": DType.UINT64,
}


def as_dtype(value: Union[DType, int, str, Any]) -> DType:
    """DType from a DType, its int value, a name ("float32", "bfloat16", "fp8_e4m3"), a numpy
    dtype/type or a torch dtype."""
    if isinstance(value, DType):
        return value
    if isinstance(value, bool):
        raise _errors.InvalidArgument("dtype=%r: expected a weft.DType, a name or a numpy/torch dtype" % (value,))
    if isinstance(value, int):
        try:
            return DType(value)
        except ValueError:
            raise _errors.InvalidArgument("dtype=%d is not a weft dtype (0..%d)" % (value, len(DType) - 1)) from None
    name = value if isinstance(value, str) else None
    if name is None:
        # numpy dtype objects and scalar types have .name (np.float32 is a type: use np.dtype's
        # name through __name__); torch dtypes print as "torch.float32".
        text = str(value)
        if text.startswith("torch."):
            name = text[len("torch."):]
        elif isinstance(value, type):
            name = getattr(value, "__name__", "")
        else:
            name = getattr(value, "name", None) or text
    key = name.lower().lstrip("<=|")
    if key in _NAMES:
        return _NAMES[key]
    raise _errors.InvalidArgument("dtype %r is not one weft can reduce or send as typed data; weft has %s"
                                  % (value, ", ".join(d.name.lower() for d in DType)))


_LITTLE = sys.byteorder == "little"
# buffer-protocol format letter -> (signed?, kind) for the integer letters; sizes come from itemsize.
_SIGNED_INT = set("bhilqn")
_UNSIGNED_INT = set("BHILQN")
_INT_BY_SIZE = {(True, 1): DType.INT8, (True, 4): DType.INT32, (True, 8): DType.INT64,
                (False, 1): DType.UINT8, (False, 4): DType.UINT32, (False, 8): DType.UINT64}


def _dtype_from_format(fmt, itemsize):
    """(DType or None, storage description) for a struct-module format string."""
    body = fmt
    if body and body[0] in "@=<>!":
        if body[0] in ">!" and _LITTLE:
            return None, "big-endian '%s'" % fmt
        body = body[1:]
    if body == "d" and itemsize == 8:
        return DType.FLOAT64, "float64"
    if body == "f" and itemsize == 4:
        return DType.FLOAT32, "float32"
    if body == "e" and itemsize == 2:
        return DType.FLOAT16, "float16"
    if body == "c":
        return DType.UINT8, "char"
    if len(body) == 1 and body in _SIGNED_INT | _UNSIGNED_INT:
        signed = body in _SIGNED_INT
        name = "%sint%d" % ("" if signed else "u", 8 * itemsize)
        return _INT_BY_SIZE.get((signed, itemsize)), name
    if body == "?":
        return None, "bool"
    return None, "format '%s'" % fmt


def _untyped_ok(fmt):
    # Object and pointer items are meaningless in another process: never move them as bytes.
    return "O" not in fmt and "P" not in fmt


# --------------------------------------------------------------------- buffer protocol

class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),  # owned by the buffer; released by PyBuffer_Release
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_PyBUF_WRITABLE = 0x0001
_PyBUF_FORMAT = 0x0004
_PyBUF_C_CONTIGUOUS = 0x0020 | 0x0010 | 0x0008

_api = ctypes.pythonapi
_api.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_api.PyObject_GetBuffer.restype = ctypes.c_int
_api.PyBuffer_Release.argtypes = [ctypes.POINTER(_PyBuffer)]
_api.PyBuffer_Release.restype = None
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int


# --------------------------------------------------------------------- DLPack

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    pass


# The deleter is called with the GIL held (a PYFUNCTYPE): exporters may touch Python objects.
_DLDeleter = ctypes.PYFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [
    ("dl_tensor", _DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", _DLDeleter),
]

_kDLCPU, _kDLCUDAHost = 1, 3
_DL_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm",
                    13: "cuda_managed", 14: "oneapi"}
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_COMPLEX, _DL_BOOL = 0, 1, 2, 4, 5, 6


def _dtype_from_dlpack(dt):
    code, bits = dt.code, dt.bits
    if code == _DL_FLOAT:
        d = {64: DType.FLOAT64, 32: DType.FLOAT32, 16: DType.FLOAT16}.get(bits)
        return d, "float%d" % bits
    if code == _DL_BFLOAT and bits == 16:
        return DType.BFLOAT16, "bfloat16"
    if code in (_DL_INT, _DL_UINT):
        signed = code == _DL_INT
        return _INT_BY_SIZE.get((signed, bits // 8)) if bits % 8 == 0 else None, \
            "%sint%d" % ("" if signed else "u", bits)
    if code == _DL_COMPLEX:
        return None, "complex%d" % bits
    if code == _DL_BOOL:
        return None, "bool"
    return None, "DLPack type code %d, %d bits" % (code, bits)


# --------------------------------------------------------------------- the view

class Buffer:
    """A contiguous host-memory view handed to the C ABI.

    ``ptr`` (int or None), ``nbytes``, ``dtype`` (DType, or None for data weft cannot reduce
    but may move as bytes), ``itemsize`` (bytes per element), ``count`` (elements),
    ``readonly``, ``storage`` (a description for messages). ``release()`` gives back what the
    view holds; it is idempotent and also runs when the view is collected.
    """

    __slots__ = ("ptr", "nbytes", "itemsize", "dtype", "storage", "readonly", "owner", "_pybuf", "_managed",
                 "__weakref__")

    def __init__(self, ptr: Optional[int], nbytes: int, itemsize: int, dtype: Optional[DType], storage: str,
                 readonly: bool, owner: Any) -> None:
        self.ptr = ptr or None
        self.nbytes = nbytes
        self.itemsize = itemsize
        self.dtype = dtype
        self.storage = storage
        self.readonly = readonly
        self.owner = owner
        self._pybuf = None
        self._managed = None

    @property
    def count(self) -> int:
        """Number of elements (nbytes // itemsize)."""
        return self.nbytes // self.itemsize if self.itemsize else 0

    def offset(self, elements: int) -> int:
        """Address of element `elements` (for in-place conventions)."""
        return (self.ptr or 0) + elements * self.itemsize

    def release(self) -> None:
        """Gives back the exported buffer / DLPack tensor the view holds; idempotent."""
        pybuf, self._pybuf = self._pybuf, None
        if pybuf is not None:
            _api.PyBuffer_Release(ctypes.byref(pybuf))
        managed, self._managed = self._managed, None
        if managed is not None and managed.contents.deleter:
            managed.contents.deleter(managed)
        self.owner = None

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown: nothing sensible left to do
            pass

    def __repr__(self):
        return "<weft Buffer %s x %d (%s)%s>" % (self.dtype.name.lower() if self.dtype is not None else "bytes",
                                                 self.count, self.storage, " read-only" if self.readonly else "")


def _describe(obj):
    return type(obj).__module__ + "." + type(obj).__qualname__


def _from_buffer_protocol(obj, mv, what, writable):
    fmt, itemsize = mv.format, mv.itemsize
    if not mv.c_contiguous:
        raise _errors.InvalidArgument("%s: the %s is not C-contiguous; pass a contiguous copy "
                                      "(numpy.ascontiguousarray / tensor.contiguous())" % (what, _describe(obj)))
    if writable and mv.readonly:
        raise _errors.InvalidArgument("%s: the %s is read-only, but this call writes into it" % (what, _describe(obj)))
    dtype, storage = _dtype_from_format(fmt, itemsize)
    pybuf = _PyBuffer()
    flags = _PyBUF_C_CONTIGUOUS | _PyBUF_FORMAT | (_PyBUF_WRITABLE if writable else 0)
    try:
        _api.PyObject_GetBuffer(obj, ctypes.byref(pybuf), flags)
    except BufferError as e:
        raise _errors.InvalidArgument("%s: the %s refused its buffer: %s" % (what, _describe(obj), e)) from None
    buf = Buffer(pybuf.buf, pybuf.len, itemsize, dtype, storage, bool(pybuf.readonly), obj)
    buf._pybuf = pybuf
    if dtype is None and not _untyped_ok(fmt):
        buf.release()
        raise _errors.InvalidArgument("%s: items of %s (%s) are Python objects or pointers; weft moves only plain data"
                                      % (what, _describe(obj), storage))
    return buf


def _from_dlpack(obj, what, writable):
    try:
        capsule = obj.__dlpack__()
    except Exception as e:  # e.g. torch: "Can't export tensors that require gradient"
        raise _errors.InvalidArgument("%s: %s.__dlpack__() failed: %s" % (what, _describe(obj), e)) from None
    if not _api.PyCapsule_IsValid(capsule, b"dltensor"):
        raise _errors.InvalidArgument("%s: %s.__dlpack__() did not return an unused 'dltensor' capsule"
                                      % (what, _describe(obj)))
    addr = _api.PyCapsule_GetPointer(capsule, b"dltensor")
    managed = ctypes.cast(addr, ctypes.POINTER(_DLManagedTensor))
    # Consumed: renaming keeps the capsule's destructor from freeing it; we call the deleter.
    _api.PyCapsule_SetName(capsule, b"used_dltensor")
    t = managed.contents.dl_tensor
    buf = Buffer(None, 0, 1, None, "", False, obj)
    buf._managed = managed
    try:
        dev = t.device.device_type
        if dev not in (_kDLCPU, _kDLCUDAHost):
            raise _errors.Unsupported("%s: the %s lives on device '%s'; this release of weft takes host (CPU) "
                                      "memory only" % (what, _describe(obj), _DL_DEVICE_NAMES.get(dev, dev)))
        if t.dtype.lanes != 1:
            raise _errors.InvalidArgument("%s: vector dtypes (lanes=%d) are not supported" % (what, t.dtype.lanes))
        dtype, storage = _dtype_from_dlpack(t.dtype)
        itemsize = (t.dtype.bits + 7) // 8
        count = 1
        shape = [t.shape[i] for i in range(t.ndim)]
        for n in shape:
            count *= n
        if t.strides and count > 0:
            expected = 1
            for i in reversed(range(t.ndim)):
                if shape[i] != 1 and t.strides[i] != expected:
                    raise _errors.InvalidArgument(
                        "%s: the %s is not C-contiguous (shape %s, strides %s); pass tensor.contiguous()"
                        % (what, _describe(obj), tuple(shape), tuple(t.strides[j] for j in range(t.ndim))))
                expected *= shape[i]
        ptr = (t.data or 0) + t.byte_offset if t.data else None
        buf.ptr, buf.nbytes, buf.itemsize, buf.dtype, buf.storage = ptr, count * itemsize, itemsize, dtype, storage
        return buf
    except BaseException:
        buf.release()
        raise


def as_buffer(obj: Any, what: str = "buffer", writable: bool = False,
              dtype: Union[DType, str, Any, None] = None) -> Buffer:
    """A Buffer over obj (see module doc). ``dtype`` (anything as_dtype takes) reinterprets the
    storage: allowed when it is the storage's own dtype, when the storage is an integer type of
    the same item size (bfloat16 in uint16, fp8 in uint8), or when the storage is bytes
    (uint8/char), whose length must then be a multiple of the dtype's size."""
    if isinstance(obj, Buffer):
        buf = obj
        if writable and buf.readonly:
            raise _errors.InvalidArgument("%s: read-only buffer, but this call writes into it" % what)
    elif obj is None:
        raise _errors.InvalidArgument("%s: None where a buffer is needed" % what)
    else:
        try:
            mv = memoryview(obj)
        except (TypeError, ValueError, BufferError) as e:
            # ValueError/BufferError: an exporter that cannot describe its items (numpy datetime64)
            mv, refused = None, e
        else:
            refused = None
        if mv is not None:
            try:
                buf = _from_buffer_protocol(obj, mv, what, writable)
            finally:
                mv.release()
        elif hasattr(obj, "__dlpack__"):
            buf = _from_dlpack(obj, what, writable)
        elif not isinstance(refused, TypeError):
            raise _errors.InvalidArgument("%s: the %s cannot be used as a buffer: %s"
                                          % (what, _describe(obj), refused)) from None
        else:
            raise _errors.InvalidArgument("%s: a %s is neither a buffer (numpy array, bytearray, memoryview) nor a "
                                          "DLPack tensor (torch.Tensor)" % (what, _describe(obj)))
    if dtype is not None:
        want = as_dtype(dtype)
        if buf.dtype != want:
            size = want.itemsize
            integer_storage = buf.storage.lstrip("u").startswith("int") or buf.storage == "char"
            same_size_int = integer_storage and buf.itemsize == size
            byte_storage = buf.storage in ("uint8", "char") and buf.itemsize == 1
            if not (same_size_int or byte_storage):
                storage = buf.storage
                buf.release() if buf is not obj else None
                raise _errors.InvalidArgument(
                    "%s: dtype=%s cannot reinterpret %s storage; give %s data, integer storage of %d-byte items "
                    "or bytes" % (what, want.name.lower(), storage, want.name.lower(), size))
            if buf.nbytes % size:
                nbytes = buf.nbytes
                buf.release() if buf is not obj else None
                raise _errors.InvalidArgument("%s: %d bytes is not a whole number of %s elements"
                                              % (what, nbytes, want.name.lower()))
            if buf is obj:  # a caller's Buffer: do not change it under them
                buf = Buffer(obj.ptr, obj.nbytes, obj.itemsize, obj.dtype, obj.storage, obj.readonly, obj)
            buf.dtype, buf.itemsize = want, size
    return buf


def dtype_size(dtype: Union[DType, int, str, Any]) -> int:
    """weft_dtype_size(): bytes per element of a weft dtype."""
    d = as_dtype(dtype)
    out = ctypes.c_size_t()
    _errors.check(_lib.lib().weft_dtype_size(int(d), ctypes.byref(out)))
    return out.value
