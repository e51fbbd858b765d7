"""Reductions and prefix sums over an axis longer than one tile can hold, in stages.

``sum``, ``prod``, ``amax``, ``amin``, ``argmax`` and ``argmin`` keep their reduced axis whole in a
tile (PyPTO's advice: do not tile a reduce axis). An axis longer than that allows — a row past a
tile's ``max_cols`` columns (a vocabulary's logits), a column past what fits the UB (16 384 tokens of a
norm's ``dgamma``) — is cut into chunks: each chunk reduced whole in one tile, then the chunks' results
reduced the same way, again in chunks while they are still too long. A length that no aligned chunk
divides is padded with the reduction's identity. Low-precision float sums and products stage in
float32 and round once.

A reduction over several axes whose whole axes do not fit one tile (a full ``jnp.sum`` of a 512 x 64
float32 tensor) reduces one run of adjacent axes at a time (:func:`reduce_axes`), each run merged into
one axis (a GM reinterpretation) so that it stages as above where it is too long.

An ``argmax`` / ``argmin`` over rows that a row loop reads takes another form
(:func:`first_extremum`): the extremum, then the least index holding it — two loops over the row.

``cumsum`` scans each chunk whole, then adds to every chunk its carry: the total of the chunks before it
(after it, reversed), an exclusive scan of the chunks' last sums, itself staged while too long.
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from ..primitives import cast as C
from ..primitives import elementwise as E
from ..primitives import layout as L
from ..primitives import reduce as R
from .topk import pad_value

OPS = {"sum": R.sum, "prod": R.prod, "amax": R.amax, "amin": R.amin, "argmax": R.argmax, "argmin": R.argmin}
EXTREMUM = {"argmax": "amax", "argmin": "amin"}     # an arg-reduction -> the extremum it finds
_LOW_FLOATS = ("float16", "bfloat16")


def identity(op: str, dtype):
    """What ``op`` ignores: padding of a chunk that runs past the axis."""
    if op in ("sum", "prod"):
        return int(op == "prod")
    if np.dtype(dtype) == np.bool_:
        return op == "amin"
    return pad_value(dtype, largest=op == "amax")       # what sorts last sorts below every entry


def chunk_for(n: int, limit: int, step: int) -> int:
    """The chunk of an axis of ``n``: the largest multiple of ``step`` up to ``limit`` that divides ``n``
    (no padding) when one is at least half of ``limit``, else ``limit`` cut to a multiple of ``step``; at
    least 2 (a chunk of 1 would never shrink the axis)."""
    top = max(step, limit // step * step, 2)
    for c in range(top, top // 2 - 1, -step):
        if c > 1 and n % c == 0:
            return c
    return top


def _chunked(x, op, axis, limit, step, chunk=None, pad=None):
    """``x`` with ``axis`` cut into (runs, ``chunk`` or :func:`chunk_for`'s), padded with ``pad`` (default:
    ``op``'s identity); and the chunk."""
    n = x.shape[axis]
    chunk = chunk or chunk_for(n, limit, step)
    runs = -(-n // chunk)
    if runs * chunk != n:
        value = identity(op, x.dtype) if pad is None else pad
        x = L.pad(x, [(0, runs * chunk - n) if d == axis else (0, 0) for d in range(x.ndim)], value)
    return L.reshape(x, x.shape[:axis] + (runs, chunk) + x.shape[axis + 1:]), chunk


def staged_reduce(x, *, op: str, axis: int, keepdims: bool, limit: int, step: int):
    """``op`` of ``x`` over ``axis`` as reductions of chunks of at most ``limit`` (a multiple of
    ``step``) entries, repeated until the axis fits one chunk (pto ops on tensors). ``argmax`` /
    ``argmin``: each chunk's extremum and its index, the first chunk holding the extremum of those
    (NaN counts as one, as in the one-stage op), and that chunk's index offset to the axis."""
    if op in EXTREMUM:
        return _staged_arg(x, op, axis, keepdims, limit, step)
    dtype = np.dtype(x.dtype)
    wide = op in ("sum", "prod") and dtype.name in _LOW_FLOATS
    if wide:
        x = C.cast(x, np.float32)
    while x.shape[axis] > limit:
        x = OPS[op](_chunked(x, op, axis, limit, step)[0], axis + 1)
    y = OPS[op](x, axis, keepdims=keepdims)
    return C.cast(y, dtype) if wide else y


def reduce_axes(x, *, op: str, axes, keepdims: bool, skip_nan: bool = False):
    """``op`` (``sum`` / ``prod`` / ``amax`` / ``amin``) of ``x`` over ``axes`` as reductions over one
    axis each (pto ops on tensors): unit dims dropped, each run of adjacent reduced axes merged into
    one axis, the runs reduced from the last, and the result reshaped to the op's. Low-precision float
    sums and products of more than one run add in float32 and round once. (Each run's extremum carries
    its NaN, ``skip_nan`` or not.)"""
    axes = tuple(sorted(set(axes)))
    out = tuple(1 if d in axes else n for d, n in enumerate(x.shape) if keepdims or d not in axes)
    shape, merged = [], []                   # the merged shape; whether each of its dims is reduced
    for d, n in enumerate(x.shape):
        if n == 1:
            continue
        if d in axes and merged and merged[-1]:
            shape[-1] *= n
        else:
            shape.append(n)
            merged.append(d in axes)
    x = L.reshape(x, tuple(shape))
    runs = [d for d, r in enumerate(merged) if r]
    dtype = np.dtype(x.dtype)
    wide = len(runs) > 1 and op in ("sum", "prod") and dtype.name in _LOW_FLOATS
    if wide:
        x = C.cast(x, np.float32)
    for d in reversed(runs):
        x = OPS[op](x, d)
    if wide:
        x = C.cast(x, dtype)
    return L.reshape(x, out)


def _staged_arg(x, op, axis, keepdims, limit, step):
    if x.shape[axis] <= limit:
        return OPS[op](x, axis, keepdims=keepdims)
    chunks, chunk = _chunked(x, EXTREMUM[op], axis, limit, step)
    best = OPS[EXTREMUM[op]](chunks, axis + 1)             # (..., runs, ...): NaN where a chunk holds one
    at = OPS[op](chunks, axis + 1)
    which = _staged_arg(best, op, axis, True, limit, step)           # (..., 1, ...): the first best chunk
    return _in_chunk(which, at, chunk, axis, keepdims)


def _in_chunk(which, at, chunk, axis, keepdims):
    """The index along ``axis`` of the entry ``at`` holds for each chunk of ``chunk`` entries, in the chunk
    ``which`` names (``(..., 1, ...)``): the one nonzero term of a sum over the chunks (or 0)."""
    runs = at.shape[axis]
    order = np.arange(runs, dtype=np.int32).reshape((runs,) + (1,) * (at.ndim - axis - 1))
    return R.sum(E.where(E.eq(which, order), E.add(at, order * np.int32(chunk)), np.int32(0)), axis, keepdims=keepdims)


def first_extremum(x, *, op: str, axes, keepdims: bool, segments: int = 1):
    """``argmax`` / ``argmin`` of ``x`` over its last axis as whole-row reductions (pto ops on tensors)
    that a row loop reads in column tiles: the row's extremum, then the least index holding it (for a
    float row holding a NaN, the first NaN's, as the one-stage op gives). With ``segments`` > 1 (a
    divisor of the row) each row is that many rows of a segment (a GM reinterpretation), reduced so side
    by side on the cores; then the first segment holding the best of their extrema gives the index."""
    (axis,) = axes
    lead, size = x.shape[:axis], x.shape[axis] // segments
    rows = L.reshape(x, (math.prod(lead) * segments, size))
    best = OPS[EXTREMUM[op]](rows, 1, keepdims=True)
    hit = E.eq(rows, best)
    if jnp.issubdtype(x.dtype, jnp.floating):
        hit = E.logical_or(hit, E.ne(rows, rows))
    index = np.arange(size, dtype=np.int32)[None]
    at = L.reshape(R.amin(E.where(hit, index, np.int32(size)), 1), lead + (segments,))
    if segments > 1:                                # the first segment holding the best of the segments'
        which = OPS[op](L.reshape(best, lead + (segments,)), axis, keepdims=True)
        at = _in_chunk(which, at, size, axis, keepdims=True)
    return at if keepdims else L.reshape(at, lead)


def scan_chunk(n: int, limit: int, step: int) -> int:
    """The chunk of a scanned axis of ``n``: :func:`chunk_for`'s where it divides ``n``, else the fewest
    chunks of at most ``limit`` made as even as ``step`` allows (little padding)."""
    chunk = chunk_for(n, limit, step)
    if n % chunk == 0:
        return chunk
    runs = -(-n // chunk)
    return -(-n // (runs * step)) * step


def staged_cumsum(x, *, axis: int, reverse: bool, limit: int, step: int):
    """``cumsum`` of ``x`` along ``axis`` in chunks of at most ``limit`` (a multiple of ``step``) entries
    (pto ops on tensors); low-precision floats in float32, rounded once."""
    dtype = np.dtype(x.dtype)
    wide = dtype.name in _LOW_FLOATS
    y = _staged_scan(C.cast(x, np.float32) if wide else x, axis, reverse, limit, step)
    return C.cast(y, dtype) if wide else y


def _staged_scan(x, axis, reverse, limit, step):
    n = x.shape[axis]
    if n <= limit:
        return R.cumsum(x, axis, reverse=reverse)
    zero = -0.0 if jnp.issubdtype(x.dtype, jnp.floating) else 0     # x + -0.0 is x, -0.0 included
    chunks, chunk = _chunked(x, "sum", axis, limit, step, scan_chunk(n, limit, step), zero)
    runs, lead, rest = chunks.shape[axis], chunks.shape[:axis], chunks.shape[axis + 2:]
    scanned = R.cumsum(chunks, axis + 1, reverse=reverse)            # (..., runs, chunk, ...)
    at = [0] * chunks.ndim
    at[axis + 1] = 0 if reverse else chunk - 1                       # each chunk's total
    totals = L.reshape(L.view(scanned, lead + (runs, 1) + rest, at), lead + (runs,) + rest)
    through = _staged_scan(totals, axis, reverse, limit, step)      # the chunks' totals up to each
    start = [0] * through.ndim
    start[axis] = int(reverse)
    edge = [(0, 0)] * through.ndim
    edge[axis] = (0, 1) if reverse else (1, 0)
    carry = L.pad(L.view(through, lead + (runs - 1,) + rest, start), edge, zero)  # ... before each
    y = E.add(scanned, L.reshape(carry, lead + (runs, 1) + rest))
    y = L.reshape(y, lead + (runs * chunk,) + rest)
    return y if runs * chunk == n else L.view(y, x.shape, [0] * x.ndim)
