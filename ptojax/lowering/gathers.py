"""jnp's gathers, scatters and dynamic slices as ``pto.gather`` / ``scatter_update`` / ``index_add``.

Rules of the Tensor level (``tensor.py``) for ``lax.gather`` (``jnp.take``, ``take_along_axis``,
``x[i, j]`` with integer arrays, ``jnp.diag``), ``lax.scatter`` (``x.at[i].set / add``, ``x.at[i, j]``,
static slices ``x.at[8:12]`` as one window), ``dynamic_slice``, ``dynamic_update_slice`` and ``rev``. Indexed
ops along an inner axis fold the leading dims into the rows (:func:`rows_of`), so that an index tile moves
rows, not slabs of every leading position; rows too long for an index tile of them in the UB (a paged KV
cache's pages) move in chunks (:func:`in_chunks`, which the tile pass asks for: ``tiling._row_chunk``).
"""
from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from .. import ops
from .memory import ASCEND_CORE
from .origin import unsupported
from .symbolic import arange, at_run_time
from .walk import is_const


def _window_indices(start, size, n, chunks=1):
    """``clip(start, 0, n - size) + arange(size)``: lax's clamped window start, as gather indices (starts
    of shape ``s``, one per window, give ``s + (size,)``); with ``chunks`` per row (:func:`_chunks`), the
    indices of the chunks of those rows, ``chunks * start + arange(size * chunks)``."""
    start = ops.clip(ops.cast(start, jnp.int32), 0, n - size)
    if chunks > 1:
        start = ops.mul(start, np.int32(chunks))
    shape, size = tuple(start.shape), size * chunks
    if size == 1:                                   # one row: the start itself (a scan's step, no vector op)
        return ops.reshape(start, shape + (1,))
    return ops.add(ops.expand(ops.reshape(start, shape + (1,)), shape + (size,)), np.arange(size, dtype=np.int32))


CHUNK_BYTES = ASCEND_CORE.tile_bytes // 8   # a long row's chunk: 8 of them (an index tile's least) fill a default tile


def row_chunk(row: int, size: int, cap_bytes: int, memory=ASCEND_CORE) -> int:
    """The elements of one chunk of a row of ``row`` elements of ``size`` bytes that moves in chunks of at
    most ``cap_bytes`` (and ``memory.max_cols``): the largest 32-byte aligned divisor of ``row`` (any divisor
    of 32 bytes or more where none is aligned; none at all: ``row``, whole)."""
    cap = min(memory.max_cols, cap_bytes // size)
    divisors = [c for c in range(min(cap, row), 0, -1) if row % c == 0 and c * size >= memory.align]
    return next((c for c in divisors if c * size % memory.align == 0), divisors[0] if divisors else row)


def _chunks(post, dtype) -> tuple[int, int]:
    """How a window moves rows of shape ``post``: ``(m, c)``, each row as ``m`` chunks of ``c`` elements.
    A row up to a default vector tile's bytes moves whole (``(1, row)``); a longer one (a layer's weight
    matrix, one step of a ``lax.scan`` over stacked weights) would need a whole row in the UB at once, so
    it moves in chunks of at most :data:`CHUNK_BYTES` (:func:`row_chunk`)."""
    row = math.prod(post)
    size = np.dtype(dtype).itemsize
    if not isinstance(row, int) or row * size <= ASCEND_CORE.tile_bytes:
        return 1, row
    c = row_chunk(row, size, CHUNK_BYTES)
    return row // c, c


def _window_rows(op, x, start, size, *update, axis, **params):
    """``op`` (``gather`` or ``scatter_update`` / ``index_add`` of ``update``) on the window of ``size``
    rows at ``start`` (a value known at run time, clamped as lax clamps it) along ``axis``: :func:`rows_of`
    on the window's indices, each row in chunks where it is long (:func:`_chunks`: ``x`` then reads as
    ``n * m`` rows of ``c``, a GM reinterpretation), so that no index tile holds more than a tile's bytes."""
    pre, n, post = tuple(x.shape[:axis]), x.shape[axis], tuple(x.shape[axis + 1:])
    m, c = _chunks(post, x.dtype)
    if m == 1 or not isinstance(n, int) or n * m > np.iinfo(np.int32).max:
        return rows_of(op, x, _window_indices(start, size, n), *update, axis=axis, **params)
    idx = _window_indices(start, size, n, m)
    flat = ops.reshape(x, pre + (n * m, c))
    if op is ops.gather:
        return ops.reshape(rows_of(ops.gather, flat, idx, axis=axis), pre + (size,) + post)
    (source,) = update
    return ops.reshape(rows_of(op, flat, idx, ops.reshape(source, pre + (size * m, c)), axis=axis, **params), x.shape)


def rows_of(op, x, idx, *update, axis, chunk=None, **params):
    """``op`` (``gather``, ``scatter_update`` or ``index_add``) along ``axis`` as the same op along axis
    0 of ``x`` with its leading dims folded into the rows: index ``i`` of leading position ``p`` becomes
    row ``p * n + i`` (one out of range stays out of range). A tile of indices then moves rows of
    ``x.shape[axis+1:]``, not slabs of every leading position (which need not fit a core's buffer).
    With ``chunk`` (elements dividing a row), each row moves in chunks of it (:func:`in_chunks`)."""
    pre, n, post = tuple(x.shape[:axis]), x.shape[axis], tuple(x.shape[axis + 1:])
    lead, k = math.prod(pre), math.prod(idx.shape)
    if not axis:
        return in_chunks(op, x, idx, *update, chunk=chunk, **params)
    if not isinstance(lead * n, int) or lead * n > np.iinfo(np.int32).max:   # symbolic: unfolded
        return op(x, idx, *update, axis, **params)
    flat = ops.reshape(x, (lead * n,) + post)
    if lead == 1:
        rows = ops.reshape(idx, (k,))
    else:
        base = ops.reshape(ops.mul(arange(lead, pre), np.int32(n)), (lead, 1))
        i = ops.reshape(idx, (1, k))
        inside = ops.logical_and(ops.ge(i, 0), ops.lt(i, n))
        rows = ops.reshape(ops.where(inside, ops.add(i, base), -1), (lead * k,))
    if op is ops.gather:
        return ops.reshape(in_chunks(ops.gather, flat, rows, chunk=chunk), pre + tuple(idx.shape) + post)
    (source,) = update
    return ops.reshape(in_chunks(op, flat, rows, ops.reshape(source, (lead * k,) + post), chunk=chunk, **params),
                       x.shape)


def in_chunks(op, x, idx, *update, chunk=None, **params):
    """``op`` (``gather``, ``scatter_update`` or ``index_add``) along axis 0 of ``x``, each row (``x.shape[1:]``,
    ``m * chunk`` elements) moved as ``m`` chunks of ``chunk``: ``x`` read as ``n * m`` rows of ``chunk`` (a GM
    reinterpretation), index ``i`` moving rows ``i * m`` to ``i * m + m - 1`` of it (-1 where ``i`` is out of
    range: none). A row too long for an index tile of them in the UB (a KV cache's page of 32 KiB, eight of
    them at the least index tile's 32 bytes of int32) then moves as a default tile's bytes per task. Without
    ``chunk`` (or one as long as the row), ``op`` itself."""
    n, post = x.shape[0], tuple(x.shape[1:])
    row = math.prod(post)
    if not chunk or chunk >= row:
        return op(x, idx, *update, 0, **params)
    m, k = row // chunk, math.prod(idx.shape)
    i = ops.reshape(idx, (k, 1))
    inside = ops.logical_and(ops.ge(i, 0), ops.lt(i, n))
    parts = ops.add(ops.expand(ops.mul(i, np.int32(m)), (k, m)), np.arange(m, dtype=np.int32))
    parts = ops.reshape(ops.where(inside, parts, np.int32(-1)), (k * m,))
    table = ops.reshape(x, (n * m, chunk))
    if op is ops.gather:
        return ops.reshape(ops.gather(table, parts, 0), tuple(idx.shape) + post)
    (source,) = update
    return ops.reshape(op(table, parts, ops.reshape(source, (k * m, chunk)), 0, **params), x.shape)


def _rows_per_table(eqn, op, x, idx, *update, axis, **params):
    """``op`` along ``axis`` of a batch of tables ``x`` (axis 0 the batch ``B``) with indices of their own,
    ``idx`` of shape ``(B, M, k)``: index ``i`` of table ``b`` and leading position ``p`` moves row
    ``(b * P + p) * n + i`` of ``x`` with its leading dims folded into the rows, as :func:`rows_of` (one
    out of range stays out of range). A gather gives ``(B * M,) + x.shape[1:axis] + (k,) +
    x.shape[axis + 1:]``; a scatter (``M`` 1) writes ``update`` of that shape into ``x``."""
    (tables, *pre), n, post = x.shape[:axis], x.shape[axis], tuple(x.shape[axis + 1:])
    (b, m, k), lead = idx.shape, math.prod(pre)
    count = tables * lead * n
    if tables * lead == 1:
        rows = ops.reshape(idx, (m * k,))
    elif not isinstance(count, int):
        raise unsupported(eqn, f"with indices per batch entry (jax.vmap) along axis {axis - 1} of a table of "
                               f"shape {tuple(x.shape[1:])} (not known until run time) is not supported")
    elif count > np.iinfo(np.int32).max:
        raise unsupported(eqn, f"with indices per batch entry (jax.vmap) on {count} rows needs int32 row numbers")
    else:
        base = (np.arange(tables * lead, dtype=np.int32) * n).reshape(tables, 1, lead, 1)
        i = ops.reshape(idx, (b, m, 1, k))
        inside = ops.logical_and(ops.ge(i, 0), ops.lt(i, n))
        rows = ops.reshape(ops.where(inside, ops.add(i, base), -1), (b * m * lead * k,))
    flat = ops.reshape(x, (count,) + post)
    if op is ops.gather:
        return ops.reshape(ops.gather(flat, rows, 0), (b * m, *pre, k) + post)
    (source,) = update
    return ops.reshape(op(flat, rows, ops.reshape(source, (b * lead * k,) + post), 0, **params), x.shape)


def dynamic_slice(eqn, x, *starts):
    return read_window(x, starts, eqn.params["slice_sizes"])


def read_window(x, starts, sizes):
    """The window of ``sizes`` at ``starts`` (ints, or values known at run time), each start clamped as
    lax clamps it: a view at the static starts, a gather of the window's rows along each dynamic one."""
    starts = _fixed(starts, sizes, x.shape)
    crop = [z if is_const(s) else n for s, n, z in zip(starts, x.shape, sizes)]
    out = ops.view(x, crop, _static(starts, x.shape, sizes))
    for axis, (s, z) in enumerate(zip(starts, sizes)):
        if not is_const(s):
            out = _window_rows(ops.gather, out, s, z, axis=axis)
    return out


def dynamic_update_slice(eqn, x, update, *starts):
    return write_window(x, update, starts)


def _static(starts, shape, sizes) -> list:
    """The static ``starts`` clamped as lax clamps them (0 for the dynamic ones)."""
    return [int(np.clip(int(s), 0, n - z)) if is_const(s) else 0 for s, n, z in zip(starts, shape, sizes)]


def _fixed(starts, sizes, shape) -> list:
    """``starts`` with those of windows as long as their axis made 0 (lax clamps them there, whatever
    their value: under ``jax.vmap`` a constant start arrives as part of one traced index vector)."""
    return [0 if z == n else s for s, z, n in zip(starts, sizes, shape)]


def write_window(x, update, starts):
    """``x`` with ``update`` written at ``starts`` (clamped as lax clamps them): :func:`_write` with
    :func:`rows_of` moving the window's rows."""
    return _write(x, update, _fixed(starts, update.shape, x.shape), rows_of)


def _write(x, update, starts, take, add=False):
    """``x`` with ``update`` written (``add``: added) at ``starts`` (ints, or values known at run time,
    clamped as lax clamps them): an assemble at static starts (of the window plus ``update``); along a
    dynamic one, the window's rows gathered (``take``; :func:`rows_of`: long rows in chunks,
    :func:`_window_rows`), written into recursively and scattered back — not gathered where ``update``
    spans every other axis (it is the whole window)."""
    dynamic = [a for a, s in enumerate(starts) if not is_const(s)]
    if not dynamic:
        at = _static(starts, x.shape, update.shape)
        return ops.assemble(ops.add(ops.view(x, update.shape, at), update) if add else update, at, x)
    axis = dynamic[0]
    rest = [0 if a == axis else s for a, s in enumerate(starts)]
    whole = not add and all(u == n for a, (u, n) in enumerate(zip(update.shape, x.shape)) if a != axis)
    if take is rows_of:                             # long rows in chunks (a scan's step of stacked outputs)
        window = update if whole else _write(_window_rows(ops.gather, x, starts[axis], update.shape[axis], axis=axis),
                                             update, rest, take, add)
        return _window_rows(ops.scatter_update, x, starts[axis], update.shape[axis], window, axis=axis,
                            unique_indices=True)     # a window: distinct rows
    idx = _window_indices(starts[axis], update.shape[axis], x.shape[axis])
    window = update if whole else _write(take(ops.gather, x, idx, axis=axis), update, rest, take, add)
    return take(ops.scatter_update, x, idx, window, axis=axis, unique_indices=True)   # a window: distinct rows


def _batched_starts(indices, dims, b, rank):
    """A batch's start vectors ``indices`` (``(b, ..., len(dims))``) as per-axis starts of an operand of
    ``rank`` axes, one per batch entry: column ``k`` (flattened) for axis ``dims[k]``, 0 for the others."""
    idx = ops.reshape(ops.cast(indices, jnp.int32), (b, -1, indices.shape[-1]))
    m = idx.shape[1]
    starts = [0] * rank
    for k, d in enumerate(dims):
        starts[d] = ops.reshape(ops.view(idx, (b, m, 1), (0, 0, k)), (b * m,))
    return starts


def _batched_window(eqn, x, indices, nb):
    """A window per start vector (``lax.dynamic_slice`` with its start batched by ``jax.vmap``) of ``x``,
    its first ``nb`` axes batched as the indices' (0: one table for every window): ``x`` as ``B`` tables
    of ``M`` windows each, cropped at the static starts, a gather of the clamped rows along each
    dynamic axis (:func:`_rows_per_table`), after which there are ``B * M`` tables of one window."""
    dnums, sizes, batch = eqn.params["dimension_numbers"], eqn.params["slice_sizes"][nb:], indices.shape[:-1]
    b, shape = math.prod(x.shape[:nb]), tuple(x.shape[nb:])
    starts = _batched_starts(indices, [d - nb for d in dnums.start_index_map], b, len(shape))
    starts = _fixed(starts, sizes, shape)
    crop = [z if is_const(s) else n for s, n, z in zip(starts, shape, sizes)]
    out = ops.view(ops.reshape(x, (b,) + shape), [b, *crop], [0, *_static(starts, shape, sizes)])
    m = math.prod(batch) // b
    for axis, (s, n, z) in enumerate(zip(starts, shape, sizes)):
        if not is_const(s):
            idx = ops.reshape(_window_indices(s, z, n), (b, m, z))
            out, b, m = _rows_per_table(eqn, ops.gather, out, idx, axis=axis + 1), b * m, 1
    if m > 1:                                       # no dynamic axis: the same window for each start
        out = ops.expand(ops.reshape(out, (b, 1) + tuple(sizes)), (b, m) + tuple(sizes))
    return ops.reshape(out, tuple(batch) + tuple(sizes))


def _batched_update_window(eqn, x, updates, indices, nb):
    """``lax.dynamic_update_slice`` with its start batched by ``jax.vmap`` (the table batched too, or
    broadcast by vmap): :func:`_write` on ``x`` as ``B`` tables, one start vector each."""
    b, shape = math.prod(x.shape[:nb]), tuple(x.shape[nb:])
    dims = [d - nb for d in eqn.params["dimension_numbers"].scatter_dims_to_operand_dims]
    update = ops.reshape(updates, (b,) + tuple(updates.shape[nb:]))
    starts = [0] + _fixed(_batched_starts(indices, dims, b, len(shape)), update.shape[1:], shape)

    def take(op, t, idx, *u, axis, **kw):
        return _rows_per_table(eqn, op, t, ops.reshape(idx, (b, 1, idx.shape[-1])), *u, axis=axis, **kw)

    return ops.reshape(_write(ops.reshape(x, (b,) + shape), update, starts, take), x.shape)


def _gather_fill(eqn, x):
    """The value an out-of-range index reads in ``FILL`` mode (jnp's defaults where not given)."""
    fill = eqn.params.get("fill_value")
    if fill is None:
        fill = np.nan if jnp.issubdtype(x.dtype, jnp.floating) else (True if x.dtype == np.bool_ else int(np.iinfo(x.dtype).min))
    return fill


def _clamps(eqn) -> bool:
    """Whether a gather clamps out-of-range indices: XLA's gather does, in every mode but jax's
    FILL_OR_DROP (CLIP, and PROMISE_IN_BOUNDS, where jnp indexing leaves them to XLA)."""
    return "FILL" not in str(eqn.params["mode"])


def _along(eqn, x, idx, axis):
    """(flat offsets, valid) of ``jnp.take_along_axis``'s entries: entry ``i`` of ``idx`` is ``x`` at its
    own coordinates with ``i`` at ``axis``, ``x`` flattened: ``base + i * stride`` (out of range: -1)."""
    n, stride = x.shape[axis], int(np.prod(x.shape[axis + 1:]))
    if x.size > np.iinfo(np.int32).max:
        raise unsupported(eqn, f"(take_along_axis) on {x.size} elements needs int32 offsets")
    coords = np.indices(idx.shape, dtype=np.int64)
    base = sum((c * int(np.prod(x.shape[d + 1:])) for d, c in enumerate(coords) if d != axis),
               np.zeros(idx.shape, np.int64)).astype(np.int32)         # 1-D: no other coordinate
    if _clamps(eqn):
        idx = ops.clip(idx, 0, n - 1)
    valid = ops.logical_and(ops.ge(idx, 0), ops.lt(idx, n))
    return ops.where(valid, ops.add(ops.mul(idx, np.int32(stride)), base), np.int32(-1)), valid


def _take_along(eqn, x, idx, axis):
    """``jnp.take_along_axis``: one gather from ``x`` flattened (:func:`_along`)."""
    flat, valid = _along(eqn, x, idx, axis)
    out = ops.gather(ops.reshape(x, (x.size,)), flat, 0)
    fill = _gather_fill(eqn, x)
    return ops.where(valid, out, fill) if "FILL" in str(eqn.params["mode"]) and fill != 0 else out


def _flat_rows(eqn, indices, extents, clamp):
    """(row, valid) of each index vector (the last axis of ``indices``) into axes of ``extents`` merged:
    ``sum(i_m * stride_m)``, -1 where an entry is out of range (entries clamped first where ``clamp``)."""
    if math.prod(extents) > np.iinfo(np.int32).max:
        raise unsupported(eqn, f"over {math.prod(extents)} indexed positions needs int32 row numbers")
    idx = ops.cast(indices, jnp.int32)
    flat, valid = None, None
    for m, n in enumerate(extents):
        i = ops.reshape(ops.view(idx, idx.shape[:-1] + (1,), (0,) * (idx.ndim - 1) + (m,)), idx.shape[:-1])
        if clamp:
            i = ops.clip(i, 0, n - 1)
        inside = ops.logical_and(ops.ge(i, 0), ops.lt(i, n))
        valid = inside if valid is None else ops.logical_and(valid, inside)
        flat = i if flat is None else ops.add(ops.mul(flat, np.int32(n)), i)
    return ops.where(valid, flat, np.int32(-1)), valid


def _point_gather(eqn, x, indices):
    """``x[i, j]``-style gathers (integer arrays indexing several axes, the rest whole): the indexed axes
    moved first and merged, one index_select of row ``sum(i_m * stride_m)``; out-of-range entries are
    clamped (CLIP) or read the fill (else), as XLA's modes."""
    indexed = tuple(eqn.params["dimension_numbers"].start_index_map)
    rest = [d for d in range(x.ndim) if d not in indexed]
    extents = [x.shape[d] for d in indexed]
    flat, valid = _flat_rows(eqn, indices, extents, _clamps(eqn))
    rows = ops.reshape(ops.permute(x, list(indexed) + rest), (math.prod(extents), *[x.shape[d] for d in rest]))
    out = ops.gather(rows, flat, 0)       # batch dims + rest
    return _in_lax_order(eqn, x, out, 0, indices.shape[:-1], lambda: valid)


def _in_lax_order(eqn, x, out, first, batch, valid):
    """A gather's result ``out`` — index dims of shape ``batch`` at ``first``, slice dims around them in
    ``x``'s order — moved into ``lax.gather``'s order (slice dims at ``offset_dims``), reading the
    fill where ``valid()`` is false in FILL mode."""
    offset = list(eqn.params["dimension_numbers"].offset_dims)
    slices = [d for d in range(out.ndim) if not first <= d < first + len(batch)]
    at = [p for p in range(out.ndim) if p not in offset]           # where lax puts the index dims
    perm = [0] * out.ndim
    for p, d in zip(offset, slices):
        perm[p] = d
    for j, p in enumerate(at):
        perm[p] = first + j
    out = ops.permute(out, perm)
    fill = _gather_fill(eqn, x)
    if "FILL" in str(eqn.params["mode"]) and fill != 0:
        shape = [1] * out.ndim
        for j, p in enumerate(at):
            shape[p] = batch[j]
        out = ops.where(ops.reshape(valid(), shape), out, fill)
    return out


def _static_window(eqn, x, indices, dnums, sizes):
    """The offsets of a gather that is one window at constant starts (how ``x[1:]`` traces with
    symbolic dims), clamped as lax clamps a window; None for any other gather (and for a window out
    of range in FILL_OR_DROP mode)."""
    if (not is_const(indices) or indices.ndim != 1 or dnums.collapsed_slice_dims or dnums.operand_batching_dims
            or tuple(dnums.offset_dims) != tuple(range(x.ndim))):
        return None
    offsets = [0] * x.ndim
    for d, start in zip(dnums.start_index_map, np.asarray(indices).tolist()):
        room = x.shape[d] - sizes[d]
        if not isinstance(room, int) or not (0 <= start <= room or _clamps(eqn)):
            return None
        offsets[d] = min(max(int(start), 0), room)
    return offsets


def _batched_take(eqn, x, indices, nb: int):
    """``jnp.take`` along ``axis`` with its first ``nb`` axes batched in ``x`` and the indices alike (how
    ``jax.vmap`` of a take over a batched table traces): the batch and ``axis`` merged into the rows,
    index ``i`` of batch ``b`` reading row ``b * n + i``, one index_select."""
    (axis,) = eqn.params["dimension_numbers"].start_index_map
    n, rest = x.shape[axis], [d for d in range(nb, x.ndim) if d != axis]
    lead = math.prod(x.shape[:nb])
    rows = ops.reshape(ops.permute(x, [*range(nb), axis, *rest]), (lead * n, *[x.shape[d] for d in rest]))
    idx = ops.reshape(ops.cast(indices, jnp.int32), indices.shape[:-1])                # (batch..., k...)
    if _clamps(eqn):
        idx = ops.clip(idx, 0, n - 1)
    valid = ops.logical_and(ops.ge(idx, 0), ops.lt(idx, n))
    base = ops.reshape(ops.mul(arange(lead, x.shape[:nb]), np.int32(n)), x.shape[:nb] + (1,) * (idx.ndim - nb))
    flat = ops.where(valid, ops.add(idx, base), np.int32(-1))
    out = ops.gather(rows, ops.reshape(flat, (math.prod(idx.shape),)), 0)
    out = ops.reshape(out, idx.shape + tuple(x.shape[d] for d in rest))
    return _in_lax_order(eqn, x, out, 0, idx.shape, lambda: valid)


def _is_batched_window(eqn, x, indices, nb) -> bool:
    """Whether a gather is a window per start vector (``lax.dynamic_slice`` with its start batched by
    ``jax.vmap``): no collapsed axis, lax's clamping, the batch dims of the indices first in the result,
    the first ``nb`` of them batching the table's first ``nb`` axes (size 1 slices)."""
    dnums, sizes, batch = eqn.params["dimension_numbers"], eqn.params["slice_sizes"], indices.shape[:-1]
    return (len(batch) > 0 and not dnums.collapsed_slice_dims and _clamps(eqn)
            and tuple(dnums.operand_batching_dims) == tuple(dnums.start_indices_batching_dims) == tuple(range(nb))
            and tuple(x.shape[:nb]) == tuple(batch[:nb]) and all(z == 1 for z in sizes[:nb])
            and all(d >= nb for d in dnums.start_index_map) and indices.shape[-1] == len(dnums.start_index_map)
            and tuple(dnums.offset_dims) == tuple(range(len(batch), len(batch) + x.ndim - nb)))


def _is_take_along(x, indices, dnums, sizes, axis) -> bool:
    """Whether a gather is ``jnp.take_along_axis`` along ``axis``: one entry per index, every other axis
    a batching axis but ``x``'s unit axes, which JAX leaves out of the indices (offset dims of size 1)."""
    units = tuple(d for d in range(x.ndim) if d not in dnums.collapsed_slice_dims and d not in dnums.operand_batching_dims)
    kept = tuple(d for d in range(x.ndim) if d not in units)          # x's axes the indices hold, in order
    along = indices.shape[:-1]
    return (indices.shape[-1] == 1 and tuple(dnums.collapsed_slice_dims) == (axis,) and all(z == 1 for z in sizes)
            and all(x.shape[d] == 1 for d in units) and tuple(dnums.offset_dims) == units
            and tuple(dnums.operand_batching_dims) == tuple(d for d in kept if d != axis)
            and tuple(dnums.start_indices_batching_dims) == tuple(kept.index(d) for d in dnums.operand_batching_dims)
            and len(along) == len(kept) and all(along[k] == x.shape[d] for k, d in enumerate(kept) if d != axis))


def _unbatched(eqn, indices, **fields):
    """A gather or scatter with batching dims (``jax.vmap``'s forms) as one without: each operand batching
    dim indexed by an iota along its indices' batching dim, appended to the index vectors (``fields``:
    the dimension numbers' names of the indexed dims that take it, and of the batching dims). None where
    there is none, or a size is known only at run time."""
    d = eqn.params["dimension_numbers"]
    operand, by, indexed, collapsed = (getattr(d, fields[k]) for k in ("operand", "by", "indexed", "collapsed"))
    if not operand or any(at_run_time(n) for n in indices.shape):
        return None
    batch = tuple(indices.shape[:-1])
    iotas = [np.broadcast_to(np.arange(batch[s], dtype=np.int32).reshape(
        [batch[s] if k == s else 1 for k in range(len(batch))] + [1]), batch + (1,)) for s in by]
    numbers = d._replace(**{fields["indexed"]: tuple(indexed) + tuple(operand),
                            fields["collapsed"]: tuple(collapsed) + tuple(operand),
                            fields["operand"]: (), fields["by"]: ()})
    return (eqn.replace(params={**eqn.params, "dimension_numbers": numbers}),
            ops.concat([ops.cast(indices, jnp.int32), *iotas], indices.ndim - 1))


_GATHER_FIELDS = dict(operand="operand_batching_dims", by="start_indices_batching_dims", indexed="start_index_map",
                      collapsed="collapsed_slice_dims")
_SCATTER_FIELDS = dict(operand="operand_batching_dims", by="scatter_indices_batching_dims",
                       indexed="scatter_dims_to_operand_dims", collapsed="inserted_window_dims")


def gather(eqn, x, indices):
    """``lax.gather`` in the index_select form ``jnp.take`` emits (one collapsed axis, whole slices), in
    ``jnp.take_along_axis``'s (every other axis a batching axis, one entry per index), as one window
    (``lax.dynamic_slice`` under ``jax.vmap``), as a window per start vector (vmap over the start) and as
    a take from a batched table (``jax.vmap`` of a take)."""
    dnums, sizes = eqn.params["dimension_numbers"], eqn.params["slice_sizes"]
    window = _static_window(eqn, x, indices, dnums, sizes)
    if window is not None:
        return ops.view(x, sizes, window)
    if (indices.ndim == 1 and not dnums.collapsed_slice_dims and not dnums.operand_batching_dims
            and tuple(dnums.offset_dims) == tuple(range(x.ndim)) and _clamps(eqn)):
        return read_window(x, _index_vector(indices, dnums.start_index_map, x.ndim), sizes)
    nb = len(dnums.operand_batching_dims)
    if _is_batched_window(eqn, x, indices, nb):
        return _batched_window(eqn, x, indices, nb)
    if (nb and tuple(dnums.operand_batching_dims) == tuple(dnums.start_indices_batching_dims) == tuple(range(nb))
            and len(dnums.start_index_map) == 1 and tuple(dnums.collapsed_slice_dims) == tuple(dnums.start_index_map)
            and dnums.start_index_map[0] >= nb and indices.shape[-1] == 1 and indices.shape[:nb] == x.shape[:nb]
            and all(z == (1 if d < nb or d == dnums.start_index_map[0] else x.shape[d]) for d, z in enumerate(sizes))):
        return _batched_take(eqn, x, indices, nb)
    (axis,) = dnums.start_index_map if len(dnums.start_index_map) == 1 else (None,)
    if axis is not None and _is_take_along(x, indices, dnums, sizes, axis):
        out = eqn.outvars[0].aval.shape
        return _take_along(eqn, x, ops.reshape(ops.cast(indices, jnp.int32), out), axis)
    indexed = tuple(dnums.start_index_map)
    if (not dnums.operand_batching_dims and sorted(dnums.collapsed_slice_dims) == sorted(indexed)
            and len(indexed) > 1 and all(z == (1 if d in indexed else x.shape[d]) for d, z in enumerate(sizes))):
        return _point_gather(eqn, x, indices)
    if (axis is None or tuple(dnums.collapsed_slice_dims) != (axis,) or dnums.operand_batching_dims
            or indices.shape[-1] != 1 or any(z != (1 if d == axis else x.shape[d]) for d, z in enumerate(sizes))):
        plain = _unbatched(eqn, indices, **_GATHER_FIELDS)
        if plain is not None:                       # jax.vmap's other forms: the batch dims indexed by iotas
            return gather(*plain[:1], x, plain[1])
        raise unsupported(eqn, "is only translated in the index_select form (jnp.take along one axis, its "
                                "table batched by jax.vmap too), indexing several axes with integer arrays "
                                "(x[i, j]), as jnp.take_along_axis and as one window (lax.dynamic_slice, its "
                                "start batched by jax.vmap or not, clamped as lax clamps it)")
    idx = ops.reshape(ops.cast(indices, jnp.int32), indices.shape[:-1])
    if _clamps(eqn):
        idx = ops.clip(idx, 0, x.shape[axis] - 1)
    out = rows_of(ops.gather, x, idx, axis=axis)      # x[:axis] + idx + x[axis+1:]
    return _in_lax_order(eqn, x, out, axis, idx.shape,
                         lambda: ops.logical_and(ops.ge(idx, 0), ops.lt(idx, x.shape[axis])))


def _index_vector(indices, dims, rank):
    """A gather's or scatter's one index vector as per-axis starts: entry ``k`` for axis ``dims[k]``
    (an int where the vector is a constant), 0 for the others."""
    starts = [0] * rank
    known = np.asarray(indices).tolist() if is_const(indices) else None
    for k, d in enumerate(dims):
        starts[d] = int(known[k]) if known is not None else ops.reshape(ops.view(indices, (1,), (k,)), ())
    return starts


def _unique(eqn, op) -> dict:
    """``scatter_update``'s promise of distinct indices, where the scatter makes it."""
    return {"unique_indices": True} if op is ops.scatter_update and eqn.params["unique_indices"] else {}


def _batched_take_scatter(eqn, op, x, indices, updates, nb):
    """``x.at[i].set / add(u)`` along one axis with ``x``'s first ``nb`` axes batched as the indices'
    (``jax.vmap`` over the index, the table batched too or broadcast by vmap; or none), the transpose of
    :func:`_batched_take`: the updates' index dims moved to the axis, one scatter of the rows of each
    table (:func:`_rows_per_table`); out-of-range indices clamp (CLIP) or write nothing (else)."""
    d = eqn.params["dimension_numbers"]
    (axis,) = d.scatter_dims_to_operand_dims
    b, shape, n = math.prod(x.shape[:nb]), tuple(x.shape[nb:]), x.shape[axis]
    idx = ops.reshape(ops.cast(indices, jnp.int32), (b, 1, math.prod(indices.shape[nb:-1])))
    if "CLIP" in str(eqn.params["mode"]):
        idx = ops.clip(idx, 0, n - 1)
    window = list(d.update_window_dims)
    index = [p for p in range(updates.ndim) if p not in window]
    pre = axis - nb
    source = ops.permute(updates, index[:nb] + window[:pre] + index[nb:] + window[pre:])
    source = ops.reshape(source, (b,) + shape[:pre] + (idx.shape[-1],) + shape[pre + 1:])
    unique = _unique(eqn, op)
    if not nb:                                      # one table: as rows_of folds it (symbolic dims too)
        return rows_of(op, x, ops.reshape(idx, idx.shape[-1:]), ops.reshape(source, source.shape[1:]), axis=axis,
                       **unique)
    out = _rows_per_table(eqn, op, ops.reshape(x, (b,) + shape), idx, source, axis=pre + 1, **unique)
    return ops.reshape(out, x.shape)


def _is_batched_take_scatter(eqn, x, indices, updates, nb) -> bool:
    """Whether a scatter is ``x.at[i]`` along one axis with its first ``nb`` axes batched as the indices
    (``jax.vmap`` over the index; 0: the table not batched), the batch dims first in the updates."""
    d = eqn.params["dimension_numbers"]
    window = [n for a, n in enumerate(x.shape) if a >= nb and a not in d.scatter_dims_to_operand_dims]
    index = [p for p in range(updates.ndim) if p not in d.update_window_dims]
    return (len(d.scatter_dims_to_operand_dims) == 1 and d.scatter_dims_to_operand_dims[0] >= nb
            and tuple(d.inserted_window_dims) == tuple(d.scatter_dims_to_operand_dims)
            and tuple(d.operand_batching_dims) == tuple(d.scatter_indices_batching_dims) == tuple(range(nb))
            and indices.shape[-1] == 1 and tuple(indices.shape[:nb]) == tuple(x.shape[:nb])
            and [updates.shape[p] for p in d.update_window_dims] == window and index[:nb] == list(range(nb))
            and [updates.shape[p] for p in index] == list(indices.shape[:-1]))


def _window_shape(eqn, x, updates):
    """The window each index vector of a scatter writes: ``updates``' window dims in ``x``'s order, 1 at
    the inserted and batching axes."""
    d = eqn.params["dimension_numbers"]
    sizes = iter(updates.shape[p] for p in d.update_window_dims)
    return tuple(1 if a in d.inserted_window_dims or a in d.operand_batching_dims else next(sizes, None)
                 for a in range(x.ndim))


def _is_window(eqn, x, indices, updates) -> bool:
    """Whether a scatter writes one window (one index vector, no batching, every update dim a window
    dim): ``x.at[8:12]``, ``x.at[2:4, 4:8]``, ``x.at[3, 2:4]``, ``lax.dynamic_update_slice`` under vmap."""
    d = eqn.params["dimension_numbers"]
    return (indices.ndim == 1 and indices.shape[0] == len(d.scatter_dims_to_operand_dims)
            and not d.operand_batching_dims and tuple(d.update_window_dims) == tuple(range(updates.ndim))
            and updates.ndim + len(d.inserted_window_dims) == x.ndim)


def _scatter_window(eqn, op, x, indices, updates):
    """One window (:func:`_is_window`) written or added as :func:`_write` does: its starts clamped (CLIP,
    as ``lax.dynamic_update_slice``), or else (constant starts) the whole write dropped where the window
    is not inside ``x``, as XLA's FILL_OR_DROP."""
    d = eqn.params["dimension_numbers"]
    starts = _index_vector(indices, d.scatter_dims_to_operand_dims, x.ndim)
    update = ops.reshape(updates, _window_shape(eqn, x, updates))
    if "CLIP" not in str(eqn.params["mode"]):
        rooms = [n - z for n, z in zip(x.shape, update.shape)]
        if not all(isinstance(r, int) for r in rooms):
            raise unsupported(eqn, f"writes a window of shape {tuple(update.shape)} into one of {tuple(x.shape)}: "
                                   "whether it lies inside (else XLA drops the write) is not known at trace time; "
                                   "use lax.dynamic_update_slice or pj.ops.assemble")
        if not all(0 <= s <= r for s, r in zip(starts, rooms)):
            return x
    return _write(x, update, _fixed(starts, update.shape, x.shape), rows_of, op is ops.index_add)


def _is_point_scatter(eqn, x, indices, updates) -> bool:
    """Whether a scatter is ``x.at[i, j]`` (integer indices on several axes, the other axes whole):
    the indexed axes inserted, no batching, the updates' index dims the indices' batch dims."""
    d = eqn.params["dimension_numbers"]
    indexed, window = tuple(d.scatter_dims_to_operand_dims), list(d.update_window_dims)
    rest = [a for a in range(x.ndim) if a not in indexed]
    return (len(indexed) > 1 and sorted(d.inserted_window_dims) == sorted(indexed) and not d.operand_batching_dims
            and indices.shape[-1] == len(indexed) and [updates.shape[p] for p in window] == [x.shape[a] for a in rest]
            and [n for p, n in enumerate(updates.shape) if p not in window] == list(indices.shape[:-1]))


def _point_scatter(eqn, op, x, indices, updates):
    """``x.at[i, j].set / add(u)``, :func:`_point_gather`'s transpose: one scatter into the rows of ``x``
    with the indexed axes moved first and merged (row ``sum(i_m * stride_m)``); out-of-range index
    vectors clamp (CLIP) or write nothing (else)."""
    d = eqn.params["dimension_numbers"]
    indexed, window = list(d.scatter_dims_to_operand_dims), list(d.update_window_dims)
    order = indexed + [a for a in range(x.ndim) if a not in indexed]
    tail, k = tuple(x.shape[a] for a in order[len(indexed):]), math.prod(indices.shape[:-1])
    flat, _ = _flat_rows(eqn, indices, [x.shape[a] for a in indexed], "CLIP" in str(eqn.params["mode"]))
    source = ops.permute(updates, [p for p in range(updates.ndim) if p not in window] + window) if window else updates
    rows = ops.reshape(ops.permute(x, order), (-1,) + tail)
    out = op(rows, ops.reshape(flat, (k,)), ops.reshape(source, (k,) + tail), 0, **_unique(eqn, op))
    return ops.permute(ops.reshape(out, [x.shape[a] for a in order]), [int(p) for p in np.argsort(order)])


def _refusal(eqn, x, indices, updates) -> str:
    """What an untranslated scatter does, in the user's terms, and what translates instead."""
    d, mode = eqn.params["dimension_numbers"], str(eqn.params["mode"]).split(".")[-1]
    axes, batch = tuple(int(a) for a in d.scatter_dims_to_operand_dims), tuple(int(a) for a in d.operand_batching_dims)
    what = (f"index vectors of shape {tuple(indices.shape[:-1])} on axes {axes}"
            + (f", per entry of batch axes {batch} (jax.vmap)" if batch else "")
            + f", each writing a window of shape {_window_shape(eqn, x, updates)} into one of {tuple(x.shape)}")
    if _is_window(eqn, x, indices, updates):
        what += (f" at a start known only at run time that XLA drops when out of range (mode {mode}; "
                 "lax.dynamic_update_slice clamps it instead)")
    return ("is only translated as x.at[idx].set/add(slices) along one axis (its table and idx batched by jax.vmap "
            "or not), with integer indices on several axes and the other axes whole (x.at[i, j]), as one window "
            "(x.at[8:12], x.at[2:4, 4:8], lax.dynamic_update_slice, its start batched by jax.vmap or not) and as "
            f"take_along_axis's transpose; not as here: {what}. For a window, use lax.dynamic_update_slice or "
            "pj.ops.assemble")


def scatter(op):
    def rule(eqn, x, indices, updates):
        d = eqn.params["dimension_numbers"]
        nb = len(d.operand_batching_dims)
        if (op is ops.scatter_update and nb and not d.inserted_window_dims and "CLIP" in str(eqn.params["mode"])
                and tuple(d.operand_batching_dims) == tuple(d.scatter_indices_batching_dims) == tuple(range(nb))
                and indices.ndim == nb + 1 and tuple(d.update_window_dims) == tuple(range(nb, x.ndim))
                and tuple(indices.shape[:nb]) == tuple(x.shape[:nb]) == tuple(updates.shape[:nb])
                and updates.ndim == x.ndim and all(a >= nb for a in d.scatter_dims_to_operand_dims)):   # start batched
            return _batched_update_window(eqn, x, updates, indices, nb)
        if (len(d.scatter_dims_to_operand_dims) == 1 and tuple(d.inserted_window_dims) == tuple(
                d.scatter_dims_to_operand_dims) and not d.update_window_dims and indices.shape[-1] == 1
                and tuple(d.operand_batching_dims) == tuple(d.scatter_indices_batching_dims) == tuple(
                    a for a in range(x.ndim) if a != d.scatter_dims_to_operand_dims[0])
                and updates.shape == indices.shape[:-1] and updates.ndim == x.ndim):   # take_along_axis's transpose
            flat, _ = _along(eqn, x, ops.reshape(ops.cast(indices, jnp.int32), updates.shape),
                             d.scatter_dims_to_operand_dims[0])
            out = op(ops.reshape(x, (x.size,)), ops.reshape(flat, (updates.size,)),
                     ops.reshape(updates, (updates.size,)), 0)
            return ops.reshape(out, x.shape)
        rows = (d.inserted_window_dims == (0,) and d.scatter_dims_to_operand_dims == (0,)
                and not d.operand_batching_dims and indices.shape[-1] == 1
                and tuple(d.update_window_dims) == tuple(range(indices.ndim - 1, updates.ndim))
                and tuple(updates.shape) == tuple(indices.shape[:-1]) + tuple(x.shape[1:]))   # any index rank
        if not rows and _is_batched_take_scatter(eqn, x, indices, updates, nb):   # x.at[:, i], i batched or not
            return _batched_take_scatter(eqn, op, x, indices, updates, nb)
        point = not rows and _is_point_scatter(eqn, x, indices, updates)   # x.at[i, j]; constant: a window
        if (not rows and _is_window(eqn, x, indices, updates)
                and (is_const(indices) or "CLIP" in str(eqn.params["mode"]) and not point)):
            return _scatter_window(eqn, op, x, indices, updates)
        if point:
            return _point_scatter(eqn, op, x, indices, updates)
        if not rows:
            plain = _unbatched(eqn, indices, **_SCATTER_FIELDS)
            if plain is not None:                   # jax.vmap's other forms: the batch dims indexed by iotas
                return rule(plain[0], x, plain[1], updates)
            raise unsupported(eqn, _refusal(eqn, x, indices, updates))
        idx = ops.reshape(ops.cast(indices, jnp.int32), (-1,))
        if indices.ndim != 2:
            updates = ops.reshape(updates, (math.prod(indices.shape[:-1]),) + tuple(x.shape[1:]))
        if "CLIP" in str(eqn.params["mode"]):
            idx = ops.clip(idx, 0, x.shape[0] - 1)
        return op(x, idx, updates, 0, **_unique(eqn, op))
    return rule


def rev(eqn, x):
    """``jnp.flip``: a gather of the reversed indices along each reversed axis (``n - 1 - iota(n)``, the
    iota made on the cores, along a symbolic axis)."""
    for axis in eqn.params["dimensions"]:
        n = x.shape[axis]
        if not at_run_time(n):
            order = np.arange(n - 1, -1, -1, dtype=np.int32)
        else:
            last = jnp.asarray(n - 1, jnp.int32)          # the symbolic size as a traced value
            order = ops.sub(last, arange(n))
        x = rows_of(ops.gather, x, order, axis=axis)
    return x
