"""Array backends for the kernels: numpy (CPU) and torch (CPU or GPU), same results.

Every kernel in this package is written once against :class:`Ops`; the two subclasses only
translate primitives. 64-bit hashing runs in ``numpy.uint64`` and in ``torch.int64`` with
two's-complement wraparound; right shifts are made logical in torch by masking, and unsigned
comparisons flip the sign bit, so both backends produce the same bits. Float sums are where
libraries differ (each reduction or scan picks its own association): results that are
scored or stored add floats with :meth:`Ops.ordered_sum` and :meth:`Ops.ordered_cumsum`,
which fix the order of the additions.

Backend choice (:func:`get_ops`): an explicit ``backend`` argument wins, then the environment
variable ``EVALRUN_KERNELS=numpy|torch``, then the inputs: torch when any input is a torch
tensor on a GPU, numpy otherwise.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any, Sequence

import numpy as np

_MASK64 = (1 << 64) - 1
BACKENDS = ("numpy", "torch")


def _torch() -> Any:
    import torch

    return torch


def is_torch(x: Any) -> bool:
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "device")


def resolve_backend(backend: str | None, *arrays: Any) -> str:
    """Name of the backend to use for ``arrays`` (see module docstring)."""
    choice = backend or os.environ.get("EVALRUN_KERNELS") or None
    if choice:
        choice = choice.strip().lower()
        if choice not in BACKENDS:
            raise ValueError(f"EVALRUN_KERNELS/backend must be numpy or torch, got {choice!r}")
        return choice
    for a in arrays:
        if is_torch(a) and a.device.type != "cpu":
            return "torch"
    return "numpy"


def get_ops(backend: str | None = None, *arrays: Any) -> "Ops":
    """The :class:`Ops` for ``backend`` (or chosen from ``arrays``); torch ops use the device of
    the first torch tensor among ``arrays``."""
    name = resolve_backend(backend, *arrays)
    if name == "numpy":
        return NUMPY
    device = next((a.device for a in arrays if is_torch(a)), None)
    return TorchOps(device)


class Ops(ABC):
    """Primitive array operations. ``u64`` arrays hold 64-bit hash words.

    Abstract: a backend that misses an operation cannot be instantiated (it fails loudly
    at construction, not with a None deep inside a kernel)."""

    name: str

    # --- conversion -------------------------------------------------------------------
    @abstractmethod
    def u64(self, x: Any) -> Any: ...
    @abstractmethod
    def i64(self, x: Any) -> Any: ...
    @abstractmethod
    def f64(self, x: Any) -> Any: ...
    @abstractmethod
    def const(self, c: int) -> Any: ...
    @abstractmethod
    def to_numpy(self, x: Any) -> np.ndarray: ...
    @abstractmethod
    def cast_like(self, x: Any, ref: Any) -> Any:
        """``x`` in the dtype of the float array ``ref`` (on its device)."""
        ...
    @abstractmethod
    def copy(self, x: Any) -> Any:
        """An owned copy of ``x`` (not a view into a larger array)."""
        ...

    # --- 64-bit words -----------------------------------------------------------------
    @abstractmethod
    def shr(self, x: Any, s: int, out: Any = None) -> Any:
        """Logical right shift of 64-bit words (into ``out`` when given)."""
        ...

    def below53(self, h: Any, t: int) -> Any:
        """``top53(h) < t`` for ``0 <= t <= 2**53``, as booleans."""
        return self.top53(h) < t

    @abstractmethod
    def top53(self, h: Any) -> Any:
        """The top 53 bits of each word as a non-negative int64."""
        ...

    @abstractmethod
    def umin(self, x: Any, axis: int) -> Any:
        """Unsigned minimum of 64-bit words along ``axis``."""
        ...

    @abstractmethod
    def word_order_key(self, h: Any) -> Any:
        """A signed int64 key that sorts like the unsigned words (for unique/sort)."""
        ...

    # --- generic ----------------------------------------------------------------------
    @abstractmethod
    def arange(self, n: int) -> Any: ...
    @abstractmethod
    def zeros(self, shape: Sequence[int], kind: str = "f64") -> Any: ...
    @abstractmethod
    def full(self, shape: Sequence[int], value: float) -> Any: ...
    @abstractmethod
    def where(self, c: Any, a: Any, b: Any) -> Any: ...
    @abstractmethod
    def log(self, x: Any) -> Any: ...
    @abstractmethod
    def exp(self, x: Any) -> Any: ...
    @abstractmethod
    def softmax(self, x: Any) -> Any:
        """Softmax over the last axis (fused where the backend has it)."""
        ...
    @abstractmethod
    def frexp(self, x: Any) -> tuple[Any, Any]:
        """Mantissa in [0.5, 1) and integer exponent (exact)."""
        ...
    @abstractmethod
    def abs(self, x: Any) -> Any: ...
    @abstractmethod
    def maximum(self, a: Any, b: Any) -> Any: ...
    @abstractmethod
    def cumsum(self, x: Any, axis: int, dtype: str | None = None, out: Any = None) -> Any:
        """Cumulative sum, accumulated in ``dtype`` ("f64") when given, into ``out`` when
        given (a reused buffer of the result's shape and dtype)."""
        ...
    @abstractmethod
    def ordered_cumsum(self, x: Any, axis: int) -> Any:
        """Prefix sums along ``axis`` added strictly in order, ``s[i] = s[i-1] + x[i]`` (the
        order of ``numpy.cumsum``): the same bits on every backend and device. Detection sums
        float evidence with it; :meth:`cumsum` may use a faster parallel scan."""
        ...
    @abstractmethod
    def cummax(self, x: Any, axis: int) -> Any: ...
    @abstractmethod
    def amax(self, x: Any, axis: int) -> Any: ...
    @abstractmethod
    def argmax(self, x: Any, axis: int) -> Any: ...
    def ordered_sum(self, x: Any) -> Any:
        """Float sum over the last axis, added strictly left to right: ``(x0 + x1) + x2 ...``.

        Library reductions each choose their own association (numpy sums pairwise in blocks
        of eight, torch in vector lanes on CPU and in trees on GPUs), so the same floats sum
        to different last bits on the two backends. One elementwise add per entry is the
        same IEEE operation everywhere. Meant for short axes (a token's Huffman path): it
        loops over the entries of the axis."""
        width = int(x.shape[-1])
        if width == 0:
            return self.zeros(tuple(x.shape[:-1]))
        total = self.copy(x[..., 0])
        for k in range(1, width):
            total += x[..., k]
        return total

    @abstractmethod
    def take_along(self, x: Any, idx: Any, axis: int, out: Any = None) -> Any: ...
    @abstractmethod
    def take(self, x: Any, idx: Any, out: Any = None) -> Any:
        """``x[idx]`` for a 1-D ``x`` and 1-D integer ``idx`` (into ``out`` when given).
        With ``out``, indices are not checked: the caller guarantees ``0 <= idx < len(x)``."""
        ...
    @abstractmethod
    def put_along(self, x: Any, idx: Any, values: Any, axis: int) -> Any:
        """Copy of ``x`` with ``values`` scattered at ``idx`` along ``axis``."""
        ...
    @abstractmethod
    def argsort_stable(self, x: Any, axis: int) -> Any: ...
    @abstractmethod
    def searchsorted(self, rows: Any, values: Any) -> Any:
        """Per row of the sorted ``rows [B, N]``: how many entries lie strictly below each of
        ``values [B, K]`` (``[B, K]`` int64)."""
        ...
    @abstractmethod
    def windows(self, x: Any, size: int) -> Any:
        """Sliding windows of ``size`` along the last axis (a view): ``[..., W - size + 1, size]``."""
        ...
    @abstractmethod
    def stack(self, xs: Sequence[Any], axis: int) -> Any: ...
    @abstractmethod
    def concat(self, xs: Sequence[Any], axis: int) -> Any: ...
    @abstractmethod
    def any(self, x: Any) -> bool: ...
    @abstractmethod
    def nonzero(self, x: Any) -> Any: ...
    @abstractmethod
    def count_true(self, x: Any, axis: int) -> Any: ...

    def to_unit(self, h: Any) -> Any:
        """Words -> floats in the open interval (0, 1): ``(top53 + 0.5) / 2**53`` (exact)."""
        return (self.f64(self.top53(h)) + 0.5) * (2.0 ** -53)


class NumpyOps(Ops):
    name = "numpy"

    def u64(self, x: Any) -> np.ndarray:
        if is_torch(x):
            x = x.detach().cpu().numpy()
        if isinstance(x, int):
            x = [x]
        if isinstance(x, (list, tuple)):
            if all(isinstance(v, int) for v in x):
                return np.array([v & _MASK64 for v in x], dtype=np.uint64)
            x = np.array(x, dtype=object)
        a = np.asarray(x)
        if a.dtype == np.uint64:
            return a
        if a.dtype.kind in "iu":
            return a.astype(np.int64).view(np.uint64) if a.dtype.kind == "i" else a.astype(np.uint64)
        if a.dtype == object:
            return np.array([int(v) & _MASK64 for v in a.ravel()], dtype=np.uint64).reshape(a.shape)
        raise TypeError(f"expected integers, got {a.dtype}")

    def i64(self, x: Any) -> np.ndarray:
        if is_torch(x):
            x = x.detach().cpu().numpy()
        return np.asarray(x, dtype=np.int64)

    def f64(self, x: Any) -> np.ndarray:
        if is_torch(x):
            x = x.detach().cpu().double().numpy()
        return np.asarray(x, dtype=np.float64)

    def const(self, c: int) -> np.uint64:
        return np.uint64(c & _MASK64)

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def cast_like(self, x: Any, ref: Any) -> np.ndarray:
        return np.asarray(self.f64(x) if is_torch(x) else x).astype(np.asarray(ref).dtype, copy=False)

    def copy(self, x: Any) -> np.ndarray:
        return np.array(x, copy=True)

    def shr(self, x: np.ndarray, s: int, out: Any = None) -> np.ndarray:
        return np.right_shift(x, np.uint64(s), out=out)

    def below53(self, h: np.ndarray, t: int) -> np.ndarray:
        # floor(h / 2**11) < t  <=>  h < t * 2**11: one comparison, no shifted copy
        if t >= 1 << 53:
            return np.ones(np.shape(h), dtype=bool)
        return h < np.uint64(t << 11)

    def top53(self, h: np.ndarray) -> np.ndarray:
        return (h >> np.uint64(11)).astype(np.int64)

    def umin(self, x: np.ndarray, axis: int) -> np.ndarray:
        return x.min(axis=axis)

    def word_order_key(self, h: np.ndarray) -> np.ndarray:
        return (h ^ np.uint64(1 << 63)).view(np.int64)

    def arange(self, n: int) -> np.ndarray:
        return np.arange(n, dtype=np.int64)

    def zeros(self, shape: Sequence[int], kind: str = "f64") -> np.ndarray:
        return np.zeros(tuple(shape), dtype={"f64": np.float64, "i64": np.int64, "bool": bool}[kind])

    def full(self, shape: Sequence[int], value: float) -> np.ndarray:
        return np.full(tuple(shape), value, dtype=np.float64)

    def where(self, c, a, b):
        return np.where(c, a, b)

    def log(self, x):
        return np.log(x)

    def exp(self, x):
        return np.exp(x)

    def softmax(self, x):
        z = np.exp(x - np.max(x, axis=-1, keepdims=True))
        return z / np.sum(z, axis=-1, keepdims=True)

    def frexp(self, x):
        m, e = np.frexp(x)
        return m, e.astype(np.float64)

    def abs(self, x):
        return np.abs(x)

    def maximum(self, a, b):
        return np.maximum(a, b)

    def cumsum(self, x, axis, dtype=None, out=None):
        return np.cumsum(x, axis=axis, dtype=np.float64 if dtype == "f64" else None, out=out)

    def ordered_cumsum(self, x, axis):
        return np.cumsum(x, axis=axis)

    def cummax(self, x, axis):
        return np.maximum.accumulate(x, axis=axis)

    def amax(self, x, axis):
        return np.max(x, axis=axis)

    def argmax(self, x, axis):
        return np.argmax(x, axis=axis)

    def take_along(self, x, idx, axis, out=None):
        if out is None:
            return np.take_along_axis(x, idx, axis=axis)
        out[...] = np.take_along_axis(x, idx, axis=axis)
        return out

    def take(self, x, idx, out=None):
        if out is None:
            return np.take(x, idx)
        # numpy buffers ``out`` when it checks bounds (mode="raise"): 40% of the time here
        return np.take(x, idx, out=out, mode="wrap")

    def put_along(self, x, idx, values, axis):
        out = x.copy()
        np.put_along_axis(out, idx, values, axis=axis)
        return out

    def argsort_stable(self, x, axis):
        return np.argsort(x, axis=axis, kind="stable")

    def searchsorted(self, rows, values):
        return np.stack([np.searchsorted(r, v, side="left") for r, v in zip(rows, values)])

    def windows(self, x, size):
        return np.lib.stride_tricks.sliding_window_view(x, size, axis=-1)

    def stack(self, xs, axis):
        return np.stack(list(xs), axis=axis)

    def concat(self, xs, axis):
        return np.concatenate(list(xs), axis=axis)

    def any(self, x) -> bool:
        return bool(np.any(x))

    def nonzero(self, x):
        return np.nonzero(x)

    def count_true(self, x, axis):
        return np.sum(x, axis=axis, dtype=np.int64)


#: an accelerator's ordered prefix sums run on the device, one add per step along the axis,
#: when the axis has at most this many steps and each step at least ORDERED_MIN_WIDTH
#: entries (a launch per step then pays off); otherwise on the host, in numpy
ORDERED_STEPS = 4096
ORDERED_MIN_WIDTH = 1024


def ordered_cumsum_steps(x: Any, axis: int) -> Any:
    """numpy's ``cumsum`` of a torch tensor along ``axis``, on its device: ``s[i] = s[i-1] +
    x[i]`` as one elementwise add per step (IEEE addition, the same bits on every device;
    torch's own GPU scans associate in trees). The axis's length in launches, whatever the
    size of the others: the shape of a batch of detection prefixes (texts x keys x offsets
    wide, a few hundred tokens long)."""
    out = x.clone()
    for i in range(1, int(x.shape[axis])):
        out.select(axis, i).add_(out.select(axis, i - 1))
    return out


class TorchOps(Ops):
    name = "torch"

    def __init__(self, device: Any = None) -> None:
        self.torch = _torch()
        self.device = device if device is not None else self.torch.device("cpu")

    def _t(self, x: Any, dtype: Any) -> Any:
        t = self.torch
        if is_torch(x):
            return x.to(device=self.device, dtype=dtype)
        a = np.asarray(x)
        if a.dtype == np.uint64:
            a = a.view(np.int64)
        return t.as_tensor(np.ascontiguousarray(a), device=self.device).to(dtype)

    def u64(self, x: Any) -> Any:
        if not is_torch(x):
            a = x if isinstance(x, np.ndarray) else np.array(x, dtype=object)
            if a.dtype == object or (a.dtype.kind == "u"):
                a = NUMPY.u64(a).view(np.int64)
            return self._t(a, self.torch.int64)
        return self._t(x, self.torch.int64)

    def i64(self, x: Any) -> Any:
        return self._t(x, self.torch.int64)

    def f64(self, x: Any) -> Any:
        return self._t(x, self.torch.float64)

    def const(self, c: int) -> int:
        c &= _MASK64
        return c - (1 << 64) if c >= (1 << 63) else c

    def to_numpy(self, x: Any) -> np.ndarray:
        a = x.detach().cpu().numpy()
        return a

    def cast_like(self, x: Any, ref: Any) -> Any:
        return self._t(x, ref.dtype)

    def copy(self, x: Any) -> Any:
        return x.clone()

    def shr(self, x, s, out=None):
        if s == 0:
            return x if out is None else out.copy_(x)
        t = self.torch
        out = t.bitwise_right_shift(x, s, out=out) if out is not None else x >> s
        return out.bitwise_and_((1 << (64 - s)) - 1)

    def top53(self, h):
        return self.shr(h, 11)

    def umin(self, x, axis):
        flip = self.const(1 << 63)
        return (x ^ flip).amin(dim=axis) ^ flip

    def word_order_key(self, h):
        return h ^ self.const(1 << 63)

    def arange(self, n):
        return self.torch.arange(n, dtype=self.torch.int64, device=self.device)

    def zeros(self, shape, kind="f64"):
        t = self.torch
        return t.zeros(tuple(shape), dtype={"f64": t.float64, "i64": t.int64, "bool": t.bool}[kind],
                       device=self.device)

    def full(self, shape, value):
        return self.torch.full(tuple(shape), value, dtype=self.torch.float64, device=self.device)

    def where(self, c, a, b):
        t = self.torch
        if not is_torch(a):
            a = t.as_tensor(a, device=self.device)
        if not is_torch(b):
            b = t.as_tensor(b, device=self.device)
        return t.where(c, a, b)

    def log(self, x):
        return self.torch.log(x)

    def exp(self, x):
        return self.torch.exp(x)

    def softmax(self, x):
        return self.torch.softmax(x, dim=-1)

    def frexp(self, x):
        m, e = self.torch.frexp(x)
        return m, e.to(self.torch.float64)

    def abs(self, x):
        return self.torch.abs(x)

    def maximum(self, a, b):
        return self.torch.maximum(a, b)

    def cumsum(self, x, axis, dtype=None, out=None):
        dt = self.torch.float64 if dtype == "f64" else None
        if out is None:
            return self.torch.cumsum(x, dim=axis, dtype=dt)
        return self.torch.cumsum(x, dim=axis, dtype=dt, out=out)

    def ordered_cumsum(self, x, axis):
        # torch's CPU kernel is a sequential loop accumulating float64 in float64 (numpy's
        # order; a test pins it); accelerator scans combine partial sums in a tree, so there
        # the floats are added one step at a time on the device (short axes of wide batches:
        # fixed-key prefixes) or summed on the host (long ones: texts laid end to end)
        if self.device.type == "cpu" or not x.is_floating_point():
            return self.torch.cumsum(x, dim=axis)
        steps = int(x.shape[axis])
        if steps <= ORDERED_STEPS and x.numel() >= ORDERED_MIN_WIDTH * steps:
            return ordered_cumsum_steps(x, axis)
        host = np.cumsum(x.detach().cpu().numpy(), axis=axis)
        return self.torch.from_numpy(host).to(self.device)

    def cummax(self, x, axis):
        return self.torch.cummax(x, dim=axis).values

    def amax(self, x, axis):
        return self.torch.amax(x, dim=axis)

    def argmax(self, x, axis):
        # torch documents the first maximal index, like numpy, on every device
        return self.torch.argmax(x, dim=axis)

    def take_along(self, x, idx, axis, out=None):
        # gather on broadcast operands: several times faster than take_along_dim on CPU
        axis %= x.ndim
        shape = [max(a, b) if d != axis else None for d, (a, b) in enumerate(zip(x.shape, idx.shape))]
        xs = list(shape)
        xs[axis] = x.shape[axis]
        shape[axis] = idx.shape[axis]
        if out is None:
            return self.torch.gather(x.expand(xs), axis, idx.expand(shape))
        return self.torch.gather(x.expand(xs), axis, idx.expand(shape), out=out)

    def take(self, x, idx, out=None):
        if out is None:
            return self.torch.index_select(x, 0, idx)
        return self.torch.index_select(x, 0, idx, out=out)

    def put_along(self, x, idx, values, axis):
        if not is_torch(values):
            values = self.torch.as_tensor(values, dtype=x.dtype, device=x.device).expand(idx.shape)
        return x.scatter(axis, idx, values.to(x.dtype))

    def argsort_stable(self, x, axis):
        return self.torch.sort(x, dim=axis, stable=True).indices

    def searchsorted(self, rows, values):
        return self.torch.searchsorted(rows, values.to(rows.dtype).contiguous(), right=False)

    def windows(self, x, size):
        return x.unfold(-1, size, 1)

    def stack(self, xs, axis):
        return self.torch.stack(list(xs), dim=axis)

    def concat(self, xs, axis):
        return self.torch.cat(list(xs), dim=axis)

    def any(self, x) -> bool:
        return bool(self.torch.any(x))

    def nonzero(self, x):
        return self.torch.nonzero(x, as_tuple=True)

    def count_true(self, x, axis):
        return self.torch.sum(x, dim=axis, dtype=self.torch.int64)


NUMPY = NumpyOps()
