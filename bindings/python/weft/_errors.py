"""weft_status_t as exceptions: every failed call raises a WeftError subclass whose message is
weft_last_error() (read on the failing thread, right after the call)."""

from __future__ import annotations

import enum
from typing import Union

from . import _lib


class Status(enum.IntEnum):
    """weft_status_t."""

    OK = 0
    INVALID_ARGUMENT = 1
    UNSUPPORTED = 2
    OUT_OF_MEMORY = 3
    TIMEOUT = 4
    REMOTE = 5
    ABORTED = 6
    MISMATCH = 7
    TRANSPORT = 8
    INTERNAL = 9
    IN_PROGRESS = 10


class WeftError(Exception):
    """A weft call failed. ``status`` is the Status, ``message`` the library's explanation
    (weft_last_error()) or, for checks made in Python before calling the library, ours."""

    status = None  # set per subclass; WeftError itself is used for unknown codes

    def __init__(self, message: str, status: Union[Status, int, None] = None) -> None:
        if status is not None:
            self.status = status
        self.message = message
        super().__init__(message)

    def __str__(self):
        name = self.status.name if isinstance(self.status, Status) else str(self.status)
        return "[%s] %s" % (name, self.message)


class InvalidArgument(WeftError, ValueError, TypeError):
    """WEFT_ERR_INVALID_ARGUMENT: a bad argument (also raised by the binding's own checks of
    buffers, dtypes and sizes). Also a ValueError and a TypeError."""

    status = Status.INVALID_ARGUMENT


class Unsupported(WeftError):
    """WEFT_ERR_UNSUPPORTED: a valid request this build or transport cannot do."""

    status = Status.UNSUPPORTED


class OutOfMemory(WeftError, MemoryError):
    """WEFT_ERR_OUT_OF_MEMORY."""

    status = Status.OUT_OF_MEMORY


class Timeout(WeftError):
    """WEFT_ERR_TIMEOUT: a deadline expired (the message names the silent ranks)."""

    status = Status.TIMEOUT


class RemoteError(WeftError):
    """WEFT_ERR_REMOTE: a peer failed or disappeared (the message names its rank)."""

    status = Status.REMOTE


class Aborted(WeftError):
    """WEFT_ERR_ABORTED: Comm.abort() was called on this communicator."""

    status = Status.ABORTED


class Mismatch(WeftError):
    """WEFT_ERR_MISMATCH: ranks disagree (version; op/count/dtype/root in check mode;
    send/receive counts)."""

    status = Status.MISMATCH


class TransportError(WeftError):
    """WEFT_ERR_TRANSPORT: the network/transport layer failed."""

    status = Status.TRANSPORT


class InternalError(WeftError):
    """WEFT_ERR_INTERNAL: a bug in weft; please report it with the message."""

    status = Status.INTERNAL


_BY_STATUS = {c.status: c for c in (InvalidArgument, Unsupported, OutOfMemory, Timeout, RemoteError,
                                    Aborted, Mismatch, TransportError, InternalError)}


def error_for(status: int, message: str) -> WeftError:
    """The exception for a status code (an int from the library)."""
    try:
        st = Status(status)
    except ValueError:
        return WeftError(message or "unknown weft status %d" % status, status)
    cls = _BY_STATUS.get(st, WeftError)
    return cls(message, st) if cls is WeftError else cls(message)


def status_string(status: Union[Status, int]) -> str:
    """weft_status_string(): the library's name and short explanation of a status."""
    return _lib.lib().weft_status_string(int(status)).decode("utf-8", "replace")


def check(status: int) -> None:
    """Raise the matching exception for a non-OK status (reads weft_last_error() at once)."""
    if status == Status.OK:
        return
    raw = _lib.lib().weft_last_error()
    message = raw.decode("utf-8", "replace") if raw else ""
    if not message:
        message = status_string(status)
    raise error_for(status, message)
