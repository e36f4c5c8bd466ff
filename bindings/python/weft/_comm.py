"""Communicators, requests and collectives over weft.h."""

from __future__ import annotations

import ctypes
import datetime
import os
import threading
import weakref

from ._handle import Handle
from . import _errors, _lib
from ._buffers import DType, as_buffer
from ._errors import InvalidArgument, Status, Unsupported
from ._plugin_ids import extension_id, names_extension
from ._user_ops import with_op_error as _with_op_error
from ._request import _P2P_KINDS, P2POp, Request, _release, wait_all  # noqa: F401 (re-exported)
from ._types import BufferLike, DTypeLike, Op, OpLike, Result, TimeoutLike  # noqa: F401 (re-exported)

from typing import Optional, Sequence, Tuple, Union


SUM, PROD, MIN, MAX, AVG = Op.SUM, Op.PROD, Op.MIN, Op.MAX, Op.AVG

_OP_NAMES = {"sum": Op.SUM, "prod": Op.PROD, "product": Op.PROD, "min": Op.MIN, "max": Op.MAX,
             "avg": Op.AVG, "mean": Op.AVG, "average": Op.AVG}


def as_op(op: OpLike) -> Union[Op, int]:
    """Op from an Op, its value or name; a register_op / plugin REDUCE_OP entry / id >= 64 as its int."""
    if isinstance(op, Op):
        return op
    if names_extension(op):
        return extension_id(op, "op")
    if isinstance(op, str) and op.lower() in _OP_NAMES:
        return _OP_NAMES[op.lower()]
    if isinstance(op, int) and not isinstance(op, bool):
        try:
            return Op(op)
        except ValueError:
            pass
    raise InvalidArgument("op=%r: expected a weft.Op, one of %s, or a weft.register_op / plugin operator"
                          % (op, ", ".join(sorted(_OP_NAMES))))


class _InPlace:
    __slots__ = ()

    def __repr__(self):
        return "weft.IN_PLACE"


IN_PLACE = _InPlace()
"""Pass as sendbuf where weft.h defines an in-place form (as MPI_IN_PLACE): the data is
already at this rank's place in the receive buffer."""

SPLIT_NOCOLOR = -1


def _in_place(x):
    return x is None or x is IN_PLACE


class UniqueId(bytes):
    """The 128 opaque bytes of a weft_unique_id_t: send them to every rank by any means
    (they pickle as bytes) and pass them to Comm(unique_id, rank, size)."""

    def __new__(cls, data: bytes) -> UniqueId:
        data = bytes(data)
        if len(data) != _lib.UNIQUE_ID_BYTES:
            raise InvalidArgument("a unique id is %d bytes, got %d" % (_lib.UNIQUE_ID_BYTES, len(data)))
        return super().__new__(cls, data)

    def __repr__(self):
        return "weft.UniqueId(<%d bytes>)" % len(self)

    def _c(self):
        uid = _lib.weft_unique_id_t()
        ctypes.memmove(ctypes.byref(uid), self, _lib.UNIQUE_ID_BYTES)
        return uid


_env_lock = threading.Lock()


def get_unique_id(port: Optional[int] = None) -> UniqueId:
    """weft_get_unique_id(): starts a rendezvous store in this process and describes it.

    port=None or 0: the library's choice (WEFT_UNIQUE_ID_PORT if set, else any free port);
    port=N binds port N, handed to the library through WEFT_UNIQUE_ID_PORT for the call only."""
    uid = _lib.weft_unique_id_t()
    lib = _lib.lib()
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535):
        raise InvalidArgument("port=%r: expected 0 (any free port) or 1..65535" % (port,))
    if not port:
        _errors.check(lib.weft_get_unique_id(ctypes.byref(uid)))
    else:
        with _env_lock:
            old = os.environ.get("WEFT_UNIQUE_ID_PORT")
            os.environ["WEFT_UNIQUE_ID_PORT"] = str(port)
            try:
                _errors.check(lib.weft_get_unique_id(ctypes.byref(uid)))
            finally:
                if old is None:
                    os.environ.pop("WEFT_UNIQUE_ID_PORT", None)
                else:
                    os.environ["WEFT_UNIQUE_ID_PORT"] = old
    return UniqueId(ctypes.string_at(ctypes.addressof(uid), _lib.UNIQUE_ID_BYTES))


def _timeout_ms(timeout):
    if timeout is None:
        return 0
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidArgument("timeout=%r: expected seconds (a number) or a datetime.timedelta" % (timeout,))
    if not timeout > 0:
        raise InvalidArgument("timeout=%r: expected more than 0 seconds (None = WEFT_TIMEOUT or 300 s)" % (timeout,))
    return max(1, int(round(timeout * 1000)))


def _config(timeout=None, name=None, check=False):
    cfg = _lib.weft_comm_config_t()
    cfg.struct_size = ctypes.sizeof(_lib.weft_comm_config_t)
    cfg.timeout_ms = _timeout_ms(timeout)
    cfg.transport = 0
    cfg.name = None if name is None else str(name).encode("utf-8")
    cfg.check_collectives = 1 if check else 0
    return cfg


def version() -> Tuple[int, int]:
    """(version_code, abi_version) of the loaded library, e.g. (100, 1) for 0.1.0."""
    code, abi = ctypes.c_int(), ctypes.c_int()
    _errors.check(_lib.lib().weft_version(ctypes.byref(code), ctypes.byref(abi)))
    return code.value, abi.value


def _size_array(values, n, what):
    values = [int(v) for v in values]
    if len(values) != n:
        raise InvalidArgument("%s has %d entries; expected one per rank (%d)" % (what, len(values), n))
    if any(v < 0 for v in values):
        raise InvalidArgument("%s has a negative entry: %s" % (what, values))
    return values


def _c_sizes(values):
    return (ctypes.c_size_t * max(1, len(values)))(*values)


def _prefix(counts):
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out


def _same_kind(a, b, what_a, what_b):
    if a.dtype != b.dtype or a.itemsize != b.itemsize or (a.dtype is None and a.storage != b.storage):
        raise InvalidArgument("%s holds %s but %s holds %s; they must have the same dtype"
                              % (what_a, _kind(a), what_b, _kind(b)))


def _kind(b):
    return b.dtype.name.lower() if b.dtype is not None else b.storage


def _typed(b, what):
    if b.dtype is None:
        raise Unsupported("%s holds %s, which weft cannot reduce (it reduces %s); a dtype= argument can "
                          "reinterpret integer or byte storage" % (what, b.storage,
                                                                  ", ".join(d.name.lower() for d in DType)))
    return int(b.dtype), 1


def _wire(b):
    """(dtype, scale) to move b: its own dtype, or untyped data as bytes (counts * itemsize)."""
    if b.dtype is not None:
        return int(b.dtype), 1
    return int(DType.UINT8), b.itemsize


def _need(b, elements, what, why):
    if b.count < elements:
        raise InvalidArgument("%s holds %d elements; %s needs at least %d" % (what, b.count, why, elements))


_live_comms = weakref.WeakSet()


class Comm(Handle):
    """A weft communicator (weft_comm_t).

    One thread at a time may use a communicator, as in NCCL; the binding serialises calls on a
    communicator (and its requests) with a lock, except abort(), which any thread may call at
    any time. Close it with close() or a with-block; collected communicators are closed too.
    """

    def __init__(self, unique_id: UniqueId, rank: int, size: int, timeout: TimeoutLike = None,
                 name: Optional[str] = None, check: bool = False) -> None:
        uid = unique_id if isinstance(unique_id, UniqueId) else UniqueId(unique_id)
        cfg = _config(timeout, name, check)
        handle = ctypes.c_void_p()
        self._handle = None
        _errors.check(_lib.lib().weft_comm_init(ctypes.byref(handle), ctypes.byref(uid._c()), int(rank), int(size),
                                                ctypes.byref(cfg)))
        self._setup(handle)

    @classmethod
    def from_env(cls, timeout: TimeoutLike = None, name: Optional[str] = None, check: bool = False) -> Comm:
        """weft_comm_init_from_env(): rank, size and store from the launcher's environment
        (weftrun's WEFT_*, torchrun's, Open MPI's, PMI's or Slurm's). timeout: seconds or a
        timedelta for every blocking wait (None = WEFT_TIMEOUT or 300 s); check=True compares
        op/dtype/count/root across ranks before each collective."""
        cfg = _config(timeout, name, check)
        handle = ctypes.c_void_p()
        _errors.check(_lib.lib().weft_comm_init_from_env(ctypes.byref(handle), ctypes.byref(cfg)))
        return cls._adopt(handle)

    @classmethod
    def _adopt(cls, handle):
        self = cls.__new__(cls)
        self._handle = None
        self._setup(handle)
        return self

    @classmethod
    def _borrow(cls, handle, owner):
        """A communicator that belongs to `owner` (a Mesh): close() only detaches this object,
        the owner frees the handle (weft_comm_destroy refuses it)."""
        self = cls.__new__(cls)
        self._handle = None
        self._owner = owner
        self._setup(handle)
        return self

    _owner = None  # the Mesh a borrowed communicator belongs to; None: this object owns the handle

    @property
    def borrowed(self) -> bool:
        """True for a communicator that belongs to a Mesh (Mesh.comm()): never destroyed here."""
        return self._owner is not None

    def _setup(self, handle):
        self._lock = threading.RLock()
        self._handle = handle.value
        lib = _lib.lib()
        out = ctypes.c_int()
        props = []
        try:
            for fn in (lib.weft_comm_rank, lib.weft_comm_size, lib.weft_comm_local_rank, lib.weft_comm_local_size):
                _errors.check(fn(self._handle, ctypes.byref(out)))
                props.append(out.value)
        except BaseException:
            if self._owner is None:
                lib.weft_comm_destroy(self._handle)
            self._handle = None
            raise
        self._rank, self._size, self._local_rank, self._local_size = props
        _live_comms.add(self)

    # -------------------------------------------------------------- lifecycle and queries

    @property
    def rank(self) -> int:
        """This process's rank in the communicator, 0 .. size - 1."""
        return self._rank

    @property
    def size(self) -> int:
        """Number of ranks in the communicator."""
        return self._size

    @property
    def local_rank(self) -> int:
        """Rank among this communicator's processes on this host."""
        return self._local_rank

    @property
    def local_size(self) -> int:
        """Number of this communicator's processes on this host."""
        return self._local_size

    def _h(self):
        h = self._handle
        if h is None:
            raise InvalidArgument("the communicator is closed")
        return h

    def abort(self) -> None:
        """weft_comm_abort(): every pending and later operation fails with weft.Aborted. Any
        thread, any time; the communicator must still be closed."""
        h = self._handle
        if h is not None:
            _errors.check(_lib.lib().weft_comm_abort(h))

    def close(self) -> None:
        """weft_comm_destroy(): waits for this rank's outstanding operations (within the deadline),
        then frees the communicator. Not collective; idempotent. On a communicator borrowed from
        a Mesh (Mesh.comm()) it only detaches this object: the mesh frees the handle."""
        with self._lock:
            h, self._handle = self._handle, None
            if h is not None and self._owner is None:
                _errors.check(_lib.lib().weft_comm_destroy(h))

    def __repr__(self):
        return "<weft.Comm rank %d of %d%s%s>" % (self._rank, self._size, " of a mesh" if self.borrowed else "",
                                                 " closed" if self.closed else "")

    def split(self, color: int, key: int = 0, timeout: TimeoutLike = None, name: Optional[str] = None,
              check: Optional[bool] = None) -> Optional[Comm]:
        """weft_comm_split() (collective): ranks with the same color >= 0 form a new communicator
        ordered by (key, rank); color < 0 (SPLIT_NOCOLOR) returns None. Options left at None are
        inherited from this communicator; giving any builds a fresh config (the rest default)."""
        cfg = None
        if timeout is not None or name is not None or check is not None:
            cfg = ctypes.byref(_config(timeout, name, bool(check)))
        out = ctypes.c_void_p()
        with self._lock:
            _errors.check(_lib.lib().weft_comm_split(self._h(), int(color), int(key), ctypes.byref(out), cfg))
        return Comm._adopt(out) if out.value else None

    def dup(self) -> Comm:
        """weft_comm_dup() (collective): same ranks, own message space."""
        out = ctypes.c_void_p()
        with self._lock:
            _errors.check(_lib.lib().weft_comm_dup(self._h(), ctypes.byref(out)))
        return Comm._adopt(out)

    def shrink(self) -> Comm:
        """weft_comm_shrink() (collective over the survivors): after ranks died (an operation
        raised RemoteError, say), the survivors agree on who is gone and get a new Comm without
        them: the same membership on every survivor, in the survivors' order. This comm may be
        broken and must still be closed; on a healthy comm it equals dup(). A rank the
        survivors took for dead gets RemoteError. If a rank dies during the shrink, the new
        Comm may still hold it: its first operation fails, and the survivors shrink again."""
        out = ctypes.c_void_p()
        with self._lock:
            _errors.check(_lib.lib().weft_comm_shrink(self._h(), ctypes.byref(out)))
        return Comm._adopt(out)

    # -------------------------------------------------------------- issuing

    def _issue(self, what, fn, args, keep, result, async_op):
        """Calls fn(*args, comm, stream=NULL, request), blocking or async."""
        lib = _lib.lib()
        try:
            with self._lock:
                h = self._h()
                if async_op:
                    req = ctypes.c_void_p()
                    st = fn(*args, h, None, ctypes.byref(req))
                    if st == Status.OK:
                        request = Request(self, req.value, keep, result, what)
                        keep = ()
                        return request
                else:
                    st = fn(*args, h, None, None)
                if st != Status.OK:
                    _errors.check(st)  # reads weft_last_error() on this thread at once
                return result
        finally:
            _release(keep)

    def _buf(self, obj, what, writable=False, dtype=None):
        return as_buffer(obj, what, writable, dtype)

    # -------------------------------------------------------------- collectives

    def allreduce(self, sendbuf: BufferLike, recvbuf: BufferLike = None, op: OpLike = Op.SUM,
                  dtype: DTypeLike = None, async_op: bool = False) -> Result:
        """Reduces sendbuf across ranks into recvbuf (recvbuf=None: in place in sendbuf).
        Returns the buffer holding the result (a Request with async_op=True)."""
        user_op, op = op, as_op(op)
        keep = []
        try:
            inplace = recvbuf is None or recvbuf is sendbuf
            send = self._buf(sendbuf, "sendbuf", writable=inplace, dtype=dtype)
            keep.append(send)
            dt, _ = _typed(send, "sendbuf")
            if inplace:
                recv, result = send, sendbuf
            else:
                recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
                keep.append(recv)
                _same_kind(send, recv, "sendbuf", "recvbuf")
                _need(recv, send.count, "recvbuf", "allreduce of %d elements" % send.count)
                result = recvbuf
        except BaseException:
            _release(keep)
            raise
        return _with_op_error(user_op, lambda: self._issue(
            "allreduce", _lib.lib().weft_allreduce, (send.ptr, recv.ptr, send.count, dt, int(op)),
            keep, result, async_op))

    def broadcast(self, buf: BufferLike, root: int = 0, dtype: DTypeLike = None, async_op: bool = False) -> Result:
        """Root's buf is sent; every other rank receives into its buf."""
        b = self._buf(buf, "buf", writable=self._rank != root, dtype=dtype)
        dt, scale = _wire(b)
        return self._issue("broadcast", _lib.lib().weft_broadcast, (b.ptr, b.count * scale, dt, int(root)),
                           [b], buf, async_op)

    def reduce(self, sendbuf: BufferLike, recvbuf: BufferLike = None, op: OpLike = Op.SUM, root: int = 0,
               dtype: DTypeLike = None, async_op: bool = False) -> Result:
        """Reduces sendbuf to root's recvbuf (root with recvbuf=None: in place in sendbuf).
        recvbuf is ignored elsewhere. Returns the result buffer at root, None elsewhere."""
        user_op, op = op, as_op(op)
        keep = []
        is_root = self._rank == root
        try:
            inplace = is_root and (recvbuf is None or recvbuf is sendbuf)
            send = self._buf(sendbuf, "sendbuf", writable=inplace, dtype=dtype)
            keep.append(send)
            dt, _ = _typed(send, "sendbuf")
            recv_ptr, result = None, None
            if inplace:
                recv_ptr, result = send.ptr, sendbuf
            elif is_root:
                recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
                keep.append(recv)
                _same_kind(send, recv, "sendbuf", "recvbuf")
                _need(recv, send.count, "recvbuf", "reduce of %d elements" % send.count)
                recv_ptr, result = recv.ptr, recvbuf
        except BaseException:
            _release(keep)
            raise
        return _with_op_error(user_op, lambda: self._issue(
            "reduce", _lib.lib().weft_reduce, (send.ptr, recv_ptr, send.count, dt, int(op), int(root)),
            keep, result, async_op))

    def allgather(self, sendbuf: BufferLike, recvbuf: BufferLike, dtype: DTypeLike = None,
                  async_op: bool = False) -> Result:
        """recvbuf gets every rank's sendbuf, rank i's at block i (size * count elements).
        sendbuf=IN_PLACE (or None): this rank's block of recvbuf is its contribution."""
        keep = []
        try:
            recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
            keep.append(recv)
            if _in_place(sendbuf):
                if recv.count % self._size:
                    raise InvalidArgument("in-place allgather: recvbuf's %d elements do not split into %d equal "
                                          "blocks" % (recv.count, self._size))
                count = recv.count // self._size
                send_ptr = recv.offset(count * self._rank)
            else:
                send = self._buf(sendbuf, "sendbuf", dtype=dtype)
                keep.append(send)
                _same_kind(send, recv, "sendbuf", "recvbuf")
                count = send.count
                _need(recv, self._size * count, "recvbuf", "allgather of %d ranks x %d elements" % (self._size, count))
                send_ptr = send.ptr
            dt, scale = _wire(recv)
        except BaseException:
            _release(keep)
            raise
        return self._issue("allgather", _lib.lib().weft_allgather,
                           (send_ptr, recv.ptr, count * scale, dt), keep, recvbuf, async_op)

    def allgatherv(self, sendbuf: BufferLike, recvbuf: BufferLike, recvcounts: Sequence[int],
                   displs: Optional[Sequence[int]] = None, dtype: DTypeLike = None, async_op: bool = False) -> Result:
        """Rank i's recvcounts[i] elements land at displs[i] (default: packed in rank order).
        sendbuf=IN_PLACE (or None): the contribution is already at displs[rank] in recvbuf."""
        n = self._size
        counts = _size_array(recvcounts, n, "recvcounts")
        offs = _prefix(counts) if displs is None else _size_array(displs, n, "displs")
        keep = []
        try:
            recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
            keep.append(recv)
            end = max((o + c for o, c in zip(offs, counts)), default=0)
            _need(recv, end, "recvbuf", "allgatherv with these counts and displacements")
            if _in_place(sendbuf):
                send_ptr, send_count = recv.offset(offs[self._rank]), counts[self._rank]
            else:
                send = self._buf(sendbuf, "sendbuf", dtype=dtype)
                keep.append(send)
                _same_kind(send, recv, "sendbuf", "recvbuf")
                send_ptr, send_count = send.ptr, send.count
            dt, scale = _wire(recv)
            c_counts = _c_sizes([c * scale for c in counts])
            c_displs = _c_sizes([o * scale for o in offs])
            keep += [c_counts, c_displs]
        except BaseException:
            _release(keep)
            raise
        return self._issue("allgatherv", _lib.lib().weft_allgatherv,
                           (send_ptr, send_count * scale, recv.ptr, c_counts, c_displs, dt), keep, recvbuf, async_op)

    def reduce_scatter(self, sendbuf: BufferLike, recvbuf: BufferLike = None, op: OpLike = Op.SUM,
                       dtype: DTypeLike = None, async_op: bool = False) -> Result:
        """sendbuf holds size equal blocks; rank i receives the reduction of block i.
        recvbuf=None: in place (the result lands in block `rank` of sendbuf)."""
        user_op, op = op, as_op(op)
        keep = []
        try:
            inplace = recvbuf is None or recvbuf is IN_PLACE
            send = self._buf(sendbuf, "sendbuf", writable=inplace, dtype=dtype)
            keep.append(send)
            dt, _ = _typed(send, "sendbuf")
            if send.count % self._size:
                raise InvalidArgument("reduce_scatter: sendbuf's %d elements do not split into %d equal blocks"
                                      % (send.count, self._size))
            count = send.count // self._size
            if inplace:
                recv_ptr, result = send.offset(count * self._rank), sendbuf
            else:
                recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
                keep.append(recv)
                _same_kind(send, recv, "sendbuf", "recvbuf")
                _need(recv, count, "recvbuf", "reduce_scatter of %d-element blocks" % count)
                recv_ptr, result = recv.ptr, recvbuf
        except BaseException:
            _release(keep)
            raise
        return _with_op_error(user_op, lambda: self._issue(
            "reduce_scatter", _lib.lib().weft_reduce_scatter, (send.ptr, recv_ptr, count, dt, int(op)),
            keep, result, async_op))

    def alltoall(self, sendbuf: BufferLike, recvbuf: BufferLike = None, dtype: DTypeLike = None,
                 async_op: bool = False) -> Result:
        """Block j of sendbuf goes to rank j; block i of recvbuf comes from rank i.
        recvbuf=None: in place in sendbuf."""
        keep = []
        try:
            inplace = recvbuf is None or recvbuf is sendbuf
            send = self._buf(sendbuf, "sendbuf", writable=inplace, dtype=dtype)
            keep.append(send)
            if send.count % self._size:
                raise InvalidArgument("alltoall: sendbuf's %d elements do not split into %d equal blocks"
                                      % (send.count, self._size))
            count = send.count // self._size
            if inplace:
                recv, result = send, sendbuf
            else:
                recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
                keep.append(recv)
                _same_kind(send, recv, "sendbuf", "recvbuf")
                _need(recv, send.count, "recvbuf", "alltoall of %d ranks x %d elements" % (self._size, count))
                result = recvbuf
            dt, scale = _wire(send)
        except BaseException:
            _release(keep)
            raise
        return self._issue("alltoall", _lib.lib().weft_alltoall,
                           (send.ptr, recv.ptr, count * scale, dt), keep, result, async_op)

    def alltoallv(self, sendbuf: BufferLike, sendcounts: Sequence[int], recvbuf: BufferLike,
                  recvcounts: Sequence[int], sdispls: Optional[Sequence[int]] = None,
                  rdispls: Optional[Sequence[int]] = None, dtype: DTypeLike = None,
                  async_op: bool = False) -> Result:
        """sendcounts[j] elements at sdispls[j] go to rank j; recvcounts[i] elements from rank i
        land at rdispls[i] (displacements default to packed in rank order). recvbuf=None: in
        place in sendbuf."""
        n = self._size
        scounts = _size_array(sendcounts, n, "sendcounts")
        rcounts = _size_array(recvcounts, n, "recvcounts")
        soffs = _prefix(scounts) if sdispls is None else _size_array(sdispls, n, "sdispls")
        roffs = _prefix(rcounts) if rdispls is None else _size_array(rdispls, n, "rdispls")
        keep = []
        try:
            inplace = recvbuf is None or recvbuf is sendbuf
            send = self._buf(sendbuf, "sendbuf", writable=inplace, dtype=dtype)
            keep.append(send)
            _need(send, max((o + c for o, c in zip(soffs, scounts)), default=0), "sendbuf",
                  "alltoallv with these send counts and displacements")
            if inplace:
                recv, result = send, sendbuf
            else:
                recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
                keep.append(recv)
                _same_kind(send, recv, "sendbuf", "recvbuf")
                result = recvbuf
            _need(recv, max((o + c for o, c in zip(roffs, rcounts)), default=0),
                  "recvbuf" if not inplace else "sendbuf (in place)",
                  "alltoallv with these receive counts and displacements")
            dt, scale = _wire(send)
            arrays = [_c_sizes([v * scale for v in a]) for a in (scounts, soffs, rcounts, roffs)]
            keep += arrays
        except BaseException:
            _release(keep)
            raise
        return self._issue("alltoallv", _lib.lib().weft_alltoallv,
                           (send.ptr, arrays[0], arrays[1], recv.ptr, arrays[2], arrays[3], dt), keep, result,
                           async_op)

    def gather(self, sendbuf: BufferLike, recvbuf: BufferLike = None, root: int = 0, dtype: DTypeLike = None,
               async_op: bool = False) -> Result:
        """Root's recvbuf gets every rank's sendbuf, rank i's at block i. At root,
        sendbuf=IN_PLACE (or None) means the root's block of recvbuf is its contribution.
        Returns recvbuf at root, None elsewhere."""
        keep = []
        is_root = self._rank == root
        try:
            recv_ptr, result = None, None
            if is_root:
                recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
                keep.append(recv)
                recv_ptr, result = recv.ptr, recvbuf
                if _in_place(sendbuf):
                    if recv.count % self._size:
                        raise InvalidArgument("in-place gather: recvbuf's %d elements do not split into %d equal "
                                              "blocks" % (recv.count, self._size))
                    count = recv.count // self._size
                    send_ptr = recv.offset(count * root)
                    dt, scale = _wire(recv)
                else:
                    send = self._buf(sendbuf, "sendbuf", dtype=dtype)
                    keep.append(send)
                    _same_kind(send, recv, "sendbuf", "recvbuf")
                    count, send_ptr = send.count, send.ptr
                    _need(recv, self._size * count, "recvbuf", "gather of %d ranks x %d elements" % (self._size, count))
                    dt, scale = _wire(send)
            else:
                send = self._buf(sendbuf, "sendbuf", dtype=dtype)
                keep.append(send)
                count, send_ptr = send.count, send.ptr
                dt, scale = _wire(send)
        except BaseException:
            _release(keep)
            raise
        return self._issue("gather", _lib.lib().weft_gather,
                           (send_ptr, recv_ptr, count * scale, dt, int(root)), keep, result, async_op)

    def scatter(self, sendbuf: BufferLike, recvbuf: BufferLike, root: int = 0, dtype: DTypeLike = None,
                async_op: bool = False) -> Result:
        """Root's sendbuf holds size equal blocks; rank i receives block i into recvbuf. At
        root, recvbuf=IN_PLACE (or None) leaves the root's block where it is in sendbuf.
        sendbuf is ignored on other ranks."""
        keep = []
        is_root = self._rank == root
        try:
            send_ptr = None
            if is_root:
                send = self._buf(sendbuf, "sendbuf", dtype=dtype)
                keep.append(send)
                if send.count % self._size:
                    raise InvalidArgument("scatter: sendbuf's %d elements do not split into %d equal blocks"
                                          % (send.count, self._size))
                count, send_ptr = send.count // self._size, send.ptr
                dt, scale = _wire(send)
                if _in_place(recvbuf):
                    recv_ptr, result = send.offset(count * root), sendbuf
                else:
                    recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
                    keep.append(recv)
                    _same_kind(send, recv, "sendbuf", "recvbuf")
                    _need(recv, count, "recvbuf", "scatter of %d-element blocks" % count)
                    recv_ptr, result = recv.ptr, recvbuf
            else:
                recv = self._buf(recvbuf, "recvbuf", writable=True, dtype=dtype)
                keep.append(recv)
                count, recv_ptr, result = recv.count, recv.ptr, recvbuf
                dt, scale = _wire(recv)
        except BaseException:
            _release(keep)
            raise
        return self._issue("scatter", _lib.lib().weft_scatter,
                           (send_ptr, recv_ptr, count * scale, dt, int(root)), keep, result, async_op)

    def barrier(self, async_op: bool = False) -> Optional[Request]:
        """Returns once every rank has called it (a Request with async_op=True)."""
        return self._issue("barrier", _lib.lib().weft_barrier, (), [], None, async_op)

    def send(self, buf: BufferLike, peer: int, dtype: DTypeLike = None, async_op: bool = False) -> Optional[Request]:
        """Sends buf to peer. Messages between a pair of ranks match in issue order; the
        receiver's count must equal the sender's (else weft.Mismatch)."""
        b = self._buf(buf, "buf", dtype=dtype)
        dt, scale = _wire(b)
        return self._issue("send", _lib.lib().weft_send, (b.ptr, b.count * scale, dt, int(peer)), [b], None,
                           async_op)

    def recv(self, buf: BufferLike, peer: int, dtype: DTypeLike = None, async_op: bool = False) -> Result:
        """Receives from peer into buf (its whole size). Returns buf."""
        b = self._buf(buf, "buf", writable=True, dtype=dtype)
        dt, scale = _wire(b)
        return self._issue("recv", _lib.lib().weft_recv, (b.ptr, b.count * scale, dt, int(peer)), [b], buf,
                           async_op)

    def p2p_batch(self, ops: Sequence[Union[P2POp, Tuple[str, BufferLike, int]]],
                  async_op: bool = False) -> Optional[Request]:
        """Posts every operation of ops (P2POp.send / P2POp.recv, or ("send"|"recv", buf, peer)
        tuples) together, as torch's batch_isend_irecv; returns when all have completed (a
        Request with async_op=True). Matching with the peers' sends and receives (batched or
        not) is in issue order per pair and direction. Use it for exchanges in which a rank both
        sends and receives."""
        ops = [o if isinstance(o, P2POp) else P2POp(*o) for o in ops]
        keep = []
        try:
            arr = (_lib.weft_p2p_op_t * max(1, len(ops)))()
            for i, o in enumerate(ops):
                b = self._buf(o.buf, "ops[%d].buf" % i, writable=o.kind == "recv", dtype=o.dtype)
                keep.append(b)
                dt, scale = _wire(b)
                arr[i] = _lib.weft_p2p_op_t(_P2P_KINDS[o.kind], b.ptr, b.count * scale, dt, int(o.peer))
        except BaseException:
            _release(keep)
            raise
        return self._issue("p2p_batch", _lib.lib().weft_p2p_batch, (arr, len(ops)), keep, None, async_op)


def _close_all():
    for c in list(_live_comms):
        try:
            c.close()
        except Exception:
            pass
