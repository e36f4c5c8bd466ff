"""Requests of operations started with async_op=True, and the operations of a point-to-point
batch (Comm.p2p_batch)."""

from __future__ import annotations

import ctypes
from typing import Any, Iterable, List

from . import _errors, _lib
from ._buffers import Buffer
from ._errors import InvalidArgument, Status
from ._types import BufferLike, DTypeLike


def _release(keep):
    for k in keep:
        if isinstance(k, Buffer):
            k.release()


class Request:
    """An operation started with async_op=True. wait() blocks until it completes (raising its
    error, if any) and returns what the blocking call would have returned; test() says whether
    it has completed. The buffers stay referenced (and exported) until completion."""

    def __init__(self, comm, handle, keep, result, what):
        self._comm = comm
        self._handle = handle
        self._keep = keep
        self._result = result
        self._what = what
        self._error = None

    @property
    def done(self) -> bool:
        """True once the operation has completed (wait() or test() saw it finish)."""
        return self._handle is None

    def _finish(self, status):
        raw = _lib.lib().weft_last_error() if status != Status.OK else None
        err = None
        if status != Status.OK:
            message = raw.decode("utf-8", "replace") if raw else _errors.status_string(status)
            err = _errors.error_for(status, message)
        _lib.lib().weft_request_free(self._handle)
        self._handle = None
        _release(self._keep)
        self._keep = ()
        self._error = err

    def wait(self) -> Any:
        """Blocks until complete; raises the operation's error, else returns its result."""
        with self._comm._lock:
            if self._handle is not None:
                self._finish(_lib.lib().weft_wait(self._handle))
        if self._error is not None:
            raise self._error
        return self._result

    def test(self) -> bool:
        """True when complete (raising the operation's error, if it failed), False if not yet."""
        with self._comm._lock:
            if self._handle is not None:
                done = ctypes.c_int(0)
                st = _lib.lib().weft_test(self._handle, ctypes.byref(done))
                if st == Status.IN_PROGRESS:
                    return False
                self._finish(st)
        if self._error is not None:
            raise self._error
        return True

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h is None:
            return
        try:
            with self._comm._lock:
                if self._handle is not None:
                    _lib.lib().weft_request_free(self._handle)  # waits for a pending operation
                    self._handle = None
                    _release(self._keep)
        except Exception:
            pass

    def __repr__(self):
        return "<weft.Request %s %s>" % (self._what, "done" if self.done else "pending")


def wait_all(requests: Iterable[Request]) -> List[Any]:
    """Waits for every request; returns their results in order (the first error is raised after
    all have been waited for)."""
    results, first = [], None
    for r in requests:
        try:
            results.append(r.wait())
        except _errors.WeftError as e:
            results.append(None)
            first = first or e
    if first is not None:
        raise first
    return results


_P2P_KINDS = {"send": 0, "recv": 1}  # WEFT_P2P_SEND, WEFT_P2P_RECV


class P2POp:
    """One operation of Comm.p2p_batch: kind "send" (buf is read) or "recv" (buf is written,
    its whole size), to or from rank peer; dtype reinterprets buf as for send/recv."""

    __slots__ = ("kind", "buf", "peer", "dtype")

    def __init__(self, kind: str, buf: BufferLike, peer: int, dtype: DTypeLike = None) -> None:
        if kind not in _P2P_KINDS:
            raise InvalidArgument("P2POp kind %r is not \"send\" or \"recv\"" % (kind,))
        self.kind, self.buf, self.peer, self.dtype = kind, buf, peer, dtype

    @classmethod
    def send(cls, buf: BufferLike, peer: int, dtype: DTypeLike = None) -> P2POp:
        """A send of buf to rank peer."""
        return cls("send", buf, peer, dtype)

    @classmethod
    def recv(cls, buf: BufferLike, peer: int, dtype: DTypeLike = None) -> P2POp:
        """A receive into buf (its whole size) from rank peer."""
        return cls("recv", buf, peer, dtype)

    def __repr__(self):
        return "P2POp(%r, <%s>, peer=%r)" % (self.kind, type(self.buf).__name__, self.peer)
