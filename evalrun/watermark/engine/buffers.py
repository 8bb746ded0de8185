"""Step buffers reused across decoding steps (generation's hot loop)."""

from __future__ import annotations

from typing import Any

from evalrun.kernels.backend import Ops


class Workspace:
    """Output buffers a sampler reuses from step to step, by name, backend, device, shape and
    dtype. A fresh ``[B, V]`` array per step means fresh pages from the allocator, and on CPU
    the page faults cost as much as the arithmetic; a buffer stays mapped. Results handed to
    callers are never views of these buffers."""

    def __init__(self, limit: int = 16) -> None:
        self.limit = limit
        self._buffers: dict[tuple[Any, ...], Any] = {}

    def get(self, ops: Ops, name: str, like: Any, dtype: str | None = None) -> Any:
        """A buffer shaped like ``like``, of its dtype (or float64 with ``dtype="f64"``)."""
        # hashable as they are (no string formatting: this runs every decoding step)
        key = (name, ops.name, getattr(ops, "device", None), like.shape, dtype, like.dtype)
        buf = self._buffers.get(key)
        if buf is None:
            shape = tuple(int(d) for d in like.shape)
            if len(self._buffers) >= self.limit:
                self._buffers.clear()
            buf = ops.zeros(shape) if dtype == "f64" else ops.cast_like(ops.zeros(shape), like)
            self._buffers[key] = buf
        return buf
