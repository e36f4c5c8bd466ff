"""What every handle class shares: `with` support, `closed`, and closing on garbage collection.

A subclass keeps its C handle in `self._handle` (None once closed) and defines close().
"""


class Handle:
    @property
    def closed(self):
        return self._handle is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        # An object whose __init__ failed has no _handle; a close() error during interpreter
        # shutdown has nowhere to go.
        if getattr(self, "_handle", None) is not None:
            try:
                self.close()
            except Exception:
                pass
