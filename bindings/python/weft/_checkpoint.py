"""Distributed checkpoints (weft/mesh.h, last part): weft.save(), weft.load(), weft.Checkpoint.

A checkpoint is a directory: one data file per writing rank per save and an index,
``index.weft``. Save on one mesh, load on another (any layout, any number of ranks)."""

from __future__ import annotations

import ctypes
import os
from typing import Iterable, Iterator, List, Mapping, NamedTuple, Tuple, Union

from ._handle import Handle
from . import _errors, _lib
from ._buffers import DType
from ._comm import Comm
from ._errors import InvalidArgument
from ._sharded import ShardedTensor, _Locks, _writable

# A directory or file name.
PathLike = Union[str, bytes, os.PathLike]
# {name: ShardedTensor}, or (name, ShardedTensor) pairs.
NamedTensors = Union[Mapping[str, ShardedTensor], Iterable[Tuple[str, ShardedTensor]]]


def _path(p, what):
    try:
        return os.fsencode(os.fspath(p))
    except TypeError:
        raise InvalidArgument("%s=%r: expected a path" % (what, p)) from None


def _config(fsync):
    return _lib.weft_checkpoint_config_t(ctypes.sizeof(_lib.weft_checkpoint_config_t), 1 if fsync else 0)


def _pairs(tensors, what):
    """(names array, handles array, count, tensors) from {name: ShardedTensor} or (name, t) pairs."""
    items = list(tensors.items()) if isinstance(tensors, dict) else list(tensors)
    names, handles, objs = [], [], []
    for i, item in enumerate(items):
        try:
            name, t = item
        except (TypeError, ValueError):
            raise InvalidArgument("%s: entry %d is %r; expected (name, weft.ShardedTensor)" % (what, i, item)) from None
        if not isinstance(t, ShardedTensor):
            raise InvalidArgument("%s: %r is %r, not a weft.ShardedTensor" % (what, name, t))
        names.append(str(name).encode("utf-8"))
        handles.append(t._h())
        objs.append(t)
    n = len(names)
    c_names = (ctypes.c_char_p * max(1, n))(*names)
    c_handles = (ctypes.c_void_p * max(1, n))(*handles)
    return c_names, c_handles, n, objs


def save(comm: Comm, dir: PathLike, tensors: NamedTensors, fsync: bool = True) -> None:
    """weft_checkpoint_save(): writes the sharded tensors this rank holds ({name: ShardedTensor},
    or (name, tensor) pairs; the set may differ by rank, a tensor held by several ranks has the
    same name, global shape and dtype on each) into directory `dir` (created when missing).
    Collective over `comm`, the communicator the tensors' meshes were made from. Atomic: an
    interrupted save leaves the previous checkpoint loadable. fsync=False skips fsync (tests,
    tmpfs)."""
    if not isinstance(comm, Comm):
        raise InvalidArgument("save(comm=...): expected a weft.Comm, got %r" % (comm,))
    c_dir = _path(dir, "dir")
    names, handles, n, objs = _pairs(tensors, "save")
    cfg = _config(fsync)
    with comm._lock, _Locks(*[t.mesh for t in objs]):
        _errors.check(_lib.fn("weft_checkpoint_save")(comm._h(), c_dir, names, handles, n, ctypes.byref(cfg)))


def load(dir: PathLike, tensors: NamedTensors) -> NamedTensors:
    """weft_checkpoint_load(): fills each tensor's local memory ({name: ShardedTensor}, any
    layout, any mesh) with the values stored under its name, reading only the boxes this rank
    needs. Not collective. Errors name the file and tensor (missing tensor, other shape or
    dtype, corrupt index, truncated file, checksum mismatch). Returns `tensors`."""
    c_dir = _path(dir, "dir")
    names, handles, n, objs = _pairs(tensors, "load")
    for t in objs:
        _writable(t, "load")
    cfg = _config(True)
    _errors.check(_lib.fn("weft_checkpoint_load")(c_dir, names, handles, n, ctypes.byref(cfg)))
    return tensors


class CheckpointTensor(NamedTuple):
    """One tensor of a checkpoint: name, weft.DType, global shape (tuple), stored shards."""

    name: str
    dtype: Union[DType, int]
    shape: Tuple[int, ...]
    nshards: int


class Checkpoint(Handle):
    """An opened checkpoint index, for inspection (weft_checkpoint_open):

        with weft.Checkpoint(dir) as ck:
            for t in ck:                       # CheckpointTensor(name, dtype, shape, nshards)
                print(t.name, t.shape)
            ck.verify()                        # reads every shard, checks lengths and CRC-32C
            ck.export_safetensors("model.safetensors")

    len(ck) is the number of tensors; ck[i] or ck["name"] is one of them."""

    def __init__(self, dir: PathLike) -> None:
        self._handle = None
        self._dir = os.fspath(dir)
        out = ctypes.c_void_p()
        _errors.check(_lib.fn("weft_checkpoint_open")(_path(dir, "dir"), ctypes.byref(out)))
        self._handle = out.value

    @classmethod
    def open(cls, dir: PathLike) -> Checkpoint:
        """The same as Checkpoint(dir)."""
        return cls(dir)

    def _h(self):
        if self._handle is None:
            raise InvalidArgument("the checkpoint %s is closed" % self._dir)
        return self._handle

    @property
    def count(self) -> int:
        """weft_checkpoint_count(): number of tensors."""
        n = ctypes.c_size_t()
        _errors.check(_lib.fn("weft_checkpoint_count")(self._h(), ctypes.byref(n)))
        return n.value

    def __len__(self):
        return self.count

    def tensor(self, i: int) -> CheckpointTensor:
        """weft_checkpoint_tensor(): tensor i as a CheckpointTensor."""
        name = ctypes.c_char_p()
        dtype, ndim = ctypes.c_int(), ctypes.c_int()
        shape = (ctypes.c_int64 * _lib.TENSOR_MAX_DIMS)()
        nshards = ctypes.c_size_t()
        _errors.check(_lib.fn("weft_checkpoint_tensor")(self._h(), int(i), ctypes.byref(name), ctypes.byref(dtype),
                                                         ctypes.byref(ndim), shape, ctypes.byref(nshards)))
        d = DType(dtype.value) if 0 <= dtype.value < len(DType) else dtype.value
        return CheckpointTensor(name.value.decode("utf-8", "replace"), d, tuple(shape[k] for k in range(ndim.value)),
                                nshards.value)

    def tensors(self) -> List[CheckpointTensor]:
        """Every tensor, in index order (a list of CheckpointTensor)."""
        return [self.tensor(i) for i in range(self.count)]

    def __iter__(self) -> Iterator[CheckpointTensor]:
        return iter(self.tensors())

    def __getitem__(self, key):
        if isinstance(key, str):
            for t in self:
                if t.name == key:
                    return t
            raise KeyError(key)
        n = self.count
        if isinstance(key, bool) or not isinstance(key, int) or not -n <= key < n:
            raise IndexError("checkpoint tensor index %r out of range (%d tensors)" % (key, n))
        return self.tensor(key % n if n else key)

    def __contains__(self, name):
        return any(t.name == name for t in self)

    def names(self) -> List[str]:
        """The tensors' names, in index order."""
        return [t.name for t in self]

    def verify(self) -> None:
        """weft_checkpoint_verify(): reads every shard and checks its length and CRC-32C; raises
        (naming file and tensor) at the first failure."""
        _errors.check(_lib.fn("weft_checkpoint_verify")(self._h()))

    def export_safetensors(self, path: PathLike) -> None:
        """weft_checkpoint_export_safetensors(): the whole checkpoint as one safetensors file."""
        _errors.check(_lib.fn("weft_checkpoint_export_safetensors")(self._h(), _path(path, "path")))

    def close(self) -> None:
        """weft_checkpoint_close(); idempotent."""
        h, self._handle = self._handle, None
        if h is not None:
            _errors.check(_lib.fn("weft_checkpoint_close")(h))

    def __repr__(self):
        if self.closed:
            return "<weft.Checkpoint %s closed>" % self._dir
        return "<weft.Checkpoint %s, %d tensors>" % (self._dir, self.count)
