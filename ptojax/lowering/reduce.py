"""Reductions over an axis longer than one tile can hold, in stages.

``sum``, ``prod``, ``amax`` and ``amin`` keep their reduced axis whole in a tile (PyPTO's advice: do
not tile a reduce axis). An axis longer than that allows — a row past a tile's ``max_cols`` columns (a
vocabulary's logits), a column past what fits the UB (16 384 tokens of a norm's ``dgamma``) — is cut
into chunks: each chunk reduced whole in one tile, then the chunks' results reduced the same way,
again in chunks while they are still too long. A length that no aligned chunk divides is padded with
the reduction's identity. Low-precision float sums and products stage in float32 and round once.
"""
from __future__ import annotations

import numpy as np

from ..primitives import cast as C
from ..primitives import layout as L
from ..primitives import reduce as R

OPS = {"sum": R.sum, "prod": R.prod, "amax": R.amax, "amin": R.amin}
_LOW_FLOATS = ("float16", "bfloat16")


def identity(op: str, dtype):
    """What ``op`` ignores: padding of a chunk that runs past the axis."""
    dtype = np.dtype(dtype)
    if op in ("sum", "prod"):
        return 1 if op == "prod" else 0
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return -np.inf if op == "amax" else np.inf
    if dtype == np.bool_:
        return op == "amin"
    info = np.iinfo(dtype)
    return int(info.min if op == "amax" else info.max)


def chunk_for(n: int, limit: int, step: int) -> int:
    """The chunk of an axis of ``n``: the largest multiple of ``step`` up to ``limit`` that divides ``n``
    (no padding) when one is at least half of ``limit``, else ``limit`` cut to a multiple of ``step``."""
    top = max(step, limit // step * step)
    for c in range(top, top // 2 - 1, -step):
        if c and n % c == 0:
            return c
    return top


def staged_reduce(x, *, op: str, axis: int, keepdims: bool, limit: int, step: int):
    """``op`` of ``x`` over ``axis`` as reductions of chunks of at most ``limit`` (a multiple of
    ``step``) entries, repeated until the axis fits one chunk (pto ops on tensors)."""
    dtype = np.dtype(x.dtype)
    wide = op in ("sum", "prod") and dtype.name in _LOW_FLOATS
    if wide:
        x = C.cast(x, np.float32)
    while x.shape[axis] > limit:
        n = x.shape[axis]
        chunk = chunk_for(n, limit, step)
        runs = -(-n // chunk)
        if runs * chunk != n:
            pads = [(0, runs * chunk - n) if d == axis else (0, 0) for d in range(x.ndim)]
            x = L.pad(x, pads, identity(op, x.dtype))
        x = L.reshape(x, x.shape[:axis] + (runs, chunk) + x.shape[axis + 1:])
        x = OPS[op](x, axis + 1)
    y = OPS[op](x, axis, keepdims=keepdims)
    return C.cast(y, dtype) if wide else y
