"""The reduction operators (weft_op_t) and the type aliases of the public API's annotations (PEP 484),
shared by the binding's modules."""

from __future__ import annotations

import datetime
import enum
from typing import Any, Union

from ._buffers import DType


class Op(enum.IntEnum):
    """weft_op_t."""

    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4


# What the collectives take: anything exposing the buffer protocol or __array_interface__ (numpy
# arrays, torch CPU tensors, bytearray, ctypes arrays); checked at run time by as_buffer.
BufferLike = Any
# A reduction: an Op, its name ("sum") or value, or a registered / plugin operator's id.
OpLike = Union[Op, str, int]
# Element type override: a DType, its name ("float32"), or None for the buffer's own.
DTypeLike = Union[DType, str, None]
# Seconds, a datetime.timedelta, or None for WEFT_TIMEOUT / 300 s.
TimeoutLike = Union[float, datetime.timedelta, None]
# A blocking call returns its result buffer (or None); with async_op=True, a Request.
Result = Any
