"""What every handle class shares: `with` support, `closed`, and closing on garbage collection.

A subclass keeps its C handle in `self._handle` (None once closed) and defines close().
"""

from __future__ import annotations

from typing import Any, TypeVar

_H = TypeVar("_H", bound="Handle")


class Handle:
    """A C handle with `with` support: closed on leaving the block or when collected."""

    @property
    def closed(self) -> bool:
        """True once close() ran (the C handle is gone)."""
        return self._handle is None

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self):
        # An object whose __init__ failed has no _handle; a close() error during interpreter
        # shutdown has nowhere to go.
        if getattr(self, "_handle", None) is not None:
            try:
                self.close()
            except Exception:
                pass
