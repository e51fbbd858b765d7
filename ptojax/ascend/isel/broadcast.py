"""Broadcasts between tiles of different logical shapes, compared as the 2-D matrices the tiles hold.

A one-row or one-column operand is a ``tcolexpand`` / ``trowexpand`` (:meth:`Selector.expand`). An
operand whose rows repeat in groups — a (2, 1, 64) operand of a (2, 4, 64) tile, or a (2, 1, 1) one
of a (2, 4, 1) column — is copied run by run of output rows (:func:`by_row_runs`): a run that reads
one row of the operand is a ``tcolexpand`` on row subsets, a run of consecutive rows a copy. A
column's values are 4 bytes apart, too close for aligned subsets, so a column goes through a work
tile of one value per row (:func:`~.rows.one_per_row`, a ``ttrans``) and back. A column whose rows
repeat in groups under a wider tile — a (1, 13, 1) operand of a (2, 4, 2) tile — broadcasts both
ways (:func:`across_and_in_groups`): each value across its row first (``trowexpand``), then those
rows in groups.

:func:`operand` is the one place a broadcast operand is made: every rule that broadcasts a tile
(arithmetic, compares, selects, logical and bitwise ops, composites) goes through it, as only the
logical shapes tell how a matrix's rows repeat (a (4, 1) matrix under an (8, 2) one may be rows
0..3 twice or each row twice).
"""
from __future__ import annotations

import math

import numpy as np

from .. import instructions
from .rows import from_rows, one_per_row, row_major
from .selector import is_column, matrix


def in_groups(src, dst) -> bool:
    """Whether a ``src``-shaped matrix broadcasts to ``dst`` by repeating its rows in groups, not as
    one row or one column."""
    return src[1] == dst[1] and src[0] not in (1, dst[0])


def across_and_in_groups(src, dst) -> bool:
    """Whether a ``src``-shaped matrix is a column whose values broadcast across ``dst``'s columns and
    whose rows repeat in groups of ``dst``'s rows (a (4, 1) matrix of a (1, 4, 1) operand under a
    (2, 4, 2) tile)."""
    return src[1] == 1 < dst[1] and src[0] not in (1, dst[0])


def operand(sel, s, name: str, shape, out_shape) -> str:
    """Tile ``name`` (logical ``shape``) broadcast to the matrix of logical ``out_shape``: itself, or
    a new tile."""
    src, dst = matrix(shape), matrix(out_shape)
    if src == dst:
        return name
    if in_groups(src, dst):
        return grouped(sel, s, name, shape, out_shape)
    if across_and_in_groups(src, dst):                 # across the columns, then rows in groups
        wide = sel.expand(s, name, src, (src[0], dst[1]))
        return grouped(sel, s, wide, (*shape[:-1], out_shape[-1]), out_shape)
    return sel.expand(s, name, src, dst)


def grouped(sel, s, x: str, shape_x, out_shape) -> str:
    """Tile ``x`` (logical ``shape_x``) broadcast over groups of rows into a new tile of logical
    ``out_shape`` (:func:`broadcast_rows`)."""
    rows, cols = matrix(out_shape)
    out = sel.like(x, rows=rows, cols=cols)
    broadcast_rows(sel, s, x, shape_x, out, out_shape)
    return out


def broadcast_rows(sel, s, x: str, shape_x, out: str, out_shape):
    """``out`` := tile ``x`` broadcast over groups of rows; a column through work tiles of one value
    per row."""
    if not is_column(sel.types[out]):
        return by_row_runs(sel, s, None, out, x, out, out_shape, shape_x)
    work = sel.alloc(row_major(sel.types[out].v_row, 1, sel.types[x].dtype))
    by_row_runs(sel, s, None, work, one_per_row(sel, x), work, out_shape, shape_x)
    from_rows(sel, work, out)


def fuses(op: str) -> bool:
    """Whether ``op`` has a ``tcolexpand<op>`` form for :func:`by_row_runs`."""
    return f"tcolexpand{op[1:]}" in instructions.TABLE


def by_row_runs(sel, s, op, a, b, out, shape_a, shape_b):
    """``a <op> b`` where ``b``'s rows broadcast over groups of ``a``'s (logical ``shape_a``, the
    output's): per run of output rows that read one row of ``b``, a ``tcolexpand<op>`` on row
    subsets; per run that reads consecutive rows, the plain op. ``op`` None: ``b`` broadcast into
    ``out``."""
    if sel.types[a].v_row != matrix(shape_a)[0] or is_column(sel.types[out]):
        sel.fail(s, f"broadcasting the rows of {list(shape_b)} over a {sel.types[out].v_row}-row column")
    out_shape = np.broadcast_shapes(shape_a, shape_b)
    lead_b = (1,) * (len(out_shape) - len(shape_b)) + tuple(shape_b[:-1])
    rows = np.broadcast_to(np.arange(math.prod(lead_b)).reshape(lead_b), out_shape[:-1]).ravel()
    start = 0
    while start < len(rows):
        end, step = start + 1, None
        while end < len(rows) and rows[end] - rows[end - 1] == (step := rows[start + 1] - rows[start]) and step in (0, 1):
            end += 1
        step = 0 if end - start == 1 else rows[start + 1] - rows[start]
        count = 1 if step == 0 else end - start
        ys, bs = sel.subset(out, start, end - start), sel.subset(b, rows[start], count)
        if op is None:
            sel.copy(bs, ys) if count == end - start else sel.emit("tcolexpand", [bs], [ys])
        else:
            xs = sel.subset(a, start, end - start)
            sel.emit(f"tcolexpand{op[1:]}" if step == 0 and end - start > 1 else op, [xs, bs], [ys])
        start = end
