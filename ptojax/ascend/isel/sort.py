"""Sort rules: codegen's ``ttopk`` / ``tsort`` (the first ``k`` of a sort along an axis) and
``tmrgsort`` (ptojax's ``merge_topk``: the ``k`` best of several value/index candidate lists) as the
real ``tci`` / ``tsort32`` / ``tmrgsort`` / ``tgather`` sequences of pto-isa's TopK recipe.

The real instructions work on ONE row of (value, u32 index) structs (8 bytes: ``[v, idx]`` for f32,
``[v, 0, idx_lo, idx_hi]`` for f16) and always sort descending, so each row of the operand goes
through (an ``scf.for`` over rows when there are several, ``pto.subset`` row views):

1. a work row of ``P`` values (``P = 32·m·4^j``, ``m`` in 1..3: whole ``tsort32`` blocks and whole
   ``tmrgsort`` groups) filled with ``-inf`` — ``texpands`` of the lowest finite value, then ``tmuls``
   by 2, which rounds to ``-inf`` (the C++ PTOAS prints for a non-finite float constant does not
   compile, and pto-isa's CPU ``treshape`` refuses an integer view of float bits) — and the row's
   values copied in (``tmuls`` by ``-1`` for the smallest-k: sorting ``-x``) through a same-dtype
   ``treshape`` alias whose valid region is the data;
2. an i32 index row beside it (seen as ``ui32`` by ``tsort32``): ``tci`` iota for ``ttopk`` (``-1``
   after the data), the candidates' own indices for ``merge_topk`` (``-1`` in the gaps) —
   ``tsort32`` breaks ties by that index ascending, which is the lower-index-first rule of
   ``lax.top_k`` (and of the top-k merge after it);
3. ``tsort32`` into 32-struct runs (f16: of the row seen as one 32-value block per tile row, see
   :meth:`_RowSort.sort32`),
   single-list ``tmrgsort`` rounds (``blockLen`` = 32·4^i structs) merging them four at a time, and
   a final 2- or 3-list ``tmrgsort`` when ``m > 1``;
4. ``tgather`` mask patterns split the first ``k`` structs: values ``P0101`` (f32) / ``P0001`` (f16);
   indices ``P1010`` straight from the f32 structs into an ``i32`` tile (a same-size bit copy), or,
   for f16, from an ``i32`` view of the structs' bits copied whole (``P1111``) into an ``i16`` row —
   into staging tiles that are finally copied (negated back for the smallest-k; ``bf16`` rounded
   back, exactly) into the destinations. A staging tile converted back to a narrower dtype has the
   destination's buffer shape, so that one ``tcvt`` does it (a tile of another pitch would need a
   copy through an integer view of float bits). No ``treshape`` mixes float and integer types.

``bf16``, ``i8`` and ``i16`` sort as ``f32`` (A2/A3 ``tsort32`` takes f16/f32, and f32 holds them
exactly); ``i32`` values sort by their 16-bit halves in two passes (:func:`_topk_int32`).
Axis 0 of a 2-D tile transposes (``ttrans``) in and out; along an axis of length 1 the sort is a
copy, its indices 0. Every subset keeps 32-byte aligned offsets and sizes (the C++ ``Tile`` asserts
32-byte rows), so gathers take ``k`` rounded up to a row of 32 bytes and the copies use ``treshape``
aliases narrowed to ``k``.
"""
from __future__ import annotations

import dataclasses
import math

from .. import asm
from . import predicate
from .interleave import mask_gather
from .rows import one_per_row
from .rules import rule
from .selector import is_column, matrix, vec_tile

_LOWEST = {"f32": -3.4028234663852886e38, "f16": -65504.0}       # -FLT_MAX; twice it rounds to -inf
_VALUE_PATTERN = {"f32": "P0101", "f16": "P0001"}
BLOCK = 32                     # tsort32 sorts runs of 32 structs


def struct_elems(dtype: str) -> int:
    """Tile elements per (value, u32 index) struct."""
    return 8 // asm.DTYPES[dtype].itemsize


def padded_length(n: int, multiple: int = 1) -> tuple[int, int, int]:
    """(P, m, j): the shortest row ``P = 32·m·4^j >= n`` (``m`` in 1..3) that ``multiple`` divides —
    ``j`` single-list merge rounds, then an ``m``-list merge when ``m > 1``."""
    j = 0
    while True:
        for m in (1, 2, 3):
            p = BLOCK * m * 4 ** j
            if p >= n and p % multiple == 0:
                return p, m, j
        j += 1


def rounds(p: int, m: int, j: int, dtype: str) -> list[tuple]:
    """The merge steps after ``tsort32``: ``("single", blockLen)`` and ``("lists", m, list_len)`` in
    tile elements of ``dtype``."""
    e = struct_elems(dtype)
    steps = [("single", e * BLOCK * 4 ** i) for i in range(j)]
    if m > 1:
        steps.append(("lists", m, e * BLOCK * 4 ** j))
    return steps


def row_pitch(n: int, dtype: str) -> int:
    """``n`` rounded up to a 32-byte row of ``dtype``."""
    per = 32 // asm.DTYPES[dtype].itemsize
    return -(-n // per) * per


def _index(sel, value: int) -> str:
    return sel.const(value, "index")


def _loop(sel, count: int, body):
    """``body(row, dynamic)`` once per row: inline for one row, else in an ``scf.for``."""
    if count == 1:
        return body(_index(sel, 0), False)
    var = sel.fresh("row")
    sel.lines.append(f"scf.for {var} = {_index(sel, 0)} to {_index(sel, count)} step {_index(sel, 1)} {{")
    outer, sel.lines = sel.lines, []
    body(var, True)
    inner, sel.lines = sel.lines, outer
    sel.lines += ["  " + line for line in inner] + ["}"]


def _first_row(sel, r, lists: int, dynamic: bool):
    """The first tile row of sorted row ``r`` made of ``lists`` tile rows."""
    if lists == 1:
        return r
    if not dynamic:
        return _index(sel, int(sel.values[r]) * lists)
    first = sel.fresh("o")
    sel.lines.append(f"{first} = arith.muli {r}, {_index(sel, lists)} : index")
    return first


def _sort_dtype(sel, s, dtype: str) -> str:
    """The dtype a row sorts in: ``tsort32`` sorts f16/f32, so bf16 and the integers f32 holds
    exactly (i8, i16) go through f32."""
    if dtype in ("f32", "bf16", "i8", "i16"):
        return "f32"
    if dtype == "f16":
        return "f16"
    sel.fail(s, f"on {dtype} values (tsort32 sorts f16/f32; f32 does not hold every {dtype})")


class _RowSort:
    """The per-row sort of ``rows`` rows, each made of ``lists`` runs of ``n`` values (``lists``
    consecutive tile rows per sorted row), keeping the first ``k`` (value, i32 index) pairs in the
    staging tiles ``values`` / ``indices`` (``rows × k`` valid, in the sort dtype and ``i32``;
    ``values`` at least ``cols`` wide: the pitch of the destination it is converted into)."""

    def __init__(self, sel, s, rows: int, lists: int, n: int, k: int, largest: bool, dtype: str,
                 cols: int = 0):
        self.sel, self.s, self.rows, self.lists, self.n, self.k = sel, s, rows, lists, n, k
        self.largest, self.dtype = largest, dtype
        self.e = struct_elems(dtype)
        self.pitch = 2 ** math.ceil(math.log2(row_pitch(n, dtype))) if lists > 1 else None
        self.p, self.m, self.j = padded_length(max(lists * self.pitch if lists > 1 else n, k),   # k past
                                               self.pitch or 1)                             # the data: -inf
        self.kp = row_pitch(k, dtype)
        if self.kp > self.p:
            sel.fail(s, f"k={k} past the {self.p}-value sort row")
        p, e = self.p, self.e
        self.work = sel.alloc(vec_tile(1, p, dtype))
        seg = self.pitch or p                                  # the data's view: lists × seg, n valid
        self.work_data = sel.reshape(self.work, asm.TileBuf("vec", dtype, p // seg, seg, lists, n))
        self.index = sel.alloc(vec_tile(1, p, "i32"))
        self.index_data = sel.reshape(self.index, asm.TileBuf("vec", "i32", p // seg, seg, lists, n))
        self.index_u32 = sel.reshape(self.index, asm.TileBuf("vec", "ui32", 1, p, 1, p))
        self.buffers = [sel.alloc(vec_tile(1, e * p, dtype)) for _ in range(2)]
        self.tmp = sel.alloc(vec_tile(1, e * p, dtype)) if self.m > 1 else None
        self.cols = max(self.kp, cols)
        self.values = sel.alloc(asm.TileBuf("vec", dtype, rows, self.cols, rows, self.kp))
        self.indices = sel.alloc(asm.TileBuf("vec", "i32", rows, self.kp, rows, self.kp))
        self.struct_bits = sel.alloc(vec_tile(1, e * self.kp, "i16")) if e == 4 else None
        if self.m > 1:
            self.executed = sel.fresh("ex")
            sel.types[self.executed] = "vector<4xi16>"
            sel.const_lines.append(f"{self.executed} = arith.constant dense<0> : vector<4xi16>")

    def iota(self):
        """The ``ttopk`` index row, once: ``0 .. n-1`` then ``-1``."""
        sel = self.sel
        sel.print("texpands", [sel.const(-1, "i32")], [self.index])
        sel.print("tci", [sel.const(0, "i32")], [self.index_data], {"descending": "false"})

    def row(self, src_values, src_indices, into=None):
        """Sort one row: ``src_values`` / ``src_indices`` are the row's (``lists`` × n valid) views
        (or ``src_values`` any view of the work row ``into``)."""
        sel, dtype = self.sel, self.dtype
        sel.print("texpands", [sel.const(_LOWEST[dtype], dtype)], [self.work])     # -inf: the lowest
        sel.print("tmuls", [self.work, sel.const(2.0, dtype)], [self.work])           # finite value x 2
        sel.print("tmuls", [src_values, sel.const(1.0 if self.largest else -1.0, dtype)],
                  [into or self.work_data])
        if src_indices is not None:
            sel.print("texpands", [sel.const(-1, "i32")], [self.index])
            sel.print("tmuls", [src_indices, sel.const(1, "i32")], [self.index_data])
        cur, other = self.buffers
        self.sort32(cur)
        for step in rounds(self.p, self.m, self.j, dtype):
            if step[0] == "single":
                sel.print("tmrgsort", [cur, sel.const(step[1], "i32")], [other])
            else:
                _, m, length = step
                runs = [sel.subset(cur, _index(sel, 0), 1, q * length, length) for q in range(m)]
                attrs = " {exhausted = false}"
                ins_t = ", ".join(str(sel.types[n]) for n in runs + [self.tmp])
                sel.lines.append(f"pto.tmrgsort ins({', '.join(runs + [self.tmp])}{attrs} : {ins_t}) "
                                 f"outs({other}, {self.executed} : {sel.types[other]}, vector<4xi16>)")
            cur, other = other, cur
        return cur

    def sort32(self, cur):
        """``tsort32`` of the work row into ``cur``: of the row for f32; for f16 of the row seen as
        ``P/32`` rows of one 32-value block each (pto-isa's CPU TSort32 places block ``b`` of a row at
        struct column ``2·32·b``, right for 2-element f32 structs only — a block per row sidesteps that)."""
        sel, e, p = self.sel, self.e, self.p
        if e == 2 or p == BLOCK:
            return sel.print("tsort32", [self.work, self.index_u32], [cur])
        rows = p // BLOCK
        blocks = [sel.reshape(tile, asm.TileBuf("vec", dtype, rows, cols, rows, cols)) for tile, dtype, cols in (
            (self.work, self.dtype, BLOCK), (self.index, "ui32", BLOCK), (cur, self.dtype, e * BLOCK))]
        sel.print("tsort32", blocks[:2], blocks[2:])

    def gather(self, cur, r, dynamic):
        """The first ``k`` structs of the sorted row ``cur`` into row ``r`` of the staging tiles."""
        sel, e, kp = self.sel, self.e, self.kp
        c0 = _index(sel, 0)
        head = sel.subset(cur, c0, 1, 0, e * kp)
        dst = sel.subset(self.values, r, 1, 0, kp)
        mask_gather(sel, head, dst, _VALUE_PATTERN[self.dtype])
        # the u32 index is each struct's second 32-bit word, gathered into i32 (a bit copy). f32 structs
        # are such word pairs already; f16 structs are first bit-copied whole (P1111) into an i16 row
        # that an i32 view pairs up (pto-isa's CPU treshape refuses float <-> int views)
        pairs = head
        if e == 4:
            mask_gather(sel, head, self.struct_bits, "P1111")
            pairs = sel.reshape(self.struct_bits, vec_tile(1, 2 * kp, "i32"))
        dst = sel.subset(self.indices, r, 1, 0, kp)
        mask_gather(sel, pairs, dst, "P1010")

    def results(self):
        """The staging tiles narrowed to ``k`` columns, values negated back for the smallest-k."""
        sel = self.sel
        values = sel.reshape(self.values, asm.TileBuf("vec", self.dtype, self.rows, self.cols, self.rows, self.k))
        indices = sel.reshape(self.indices, asm.TileBuf("vec", "i32", self.rows, self.kp, self.rows, self.k))
        return values, indices


def _finish(sel, sorter, outs):
    values, indices = sorter.results()
    if not sorter.largest:                                   # smallest-k sorted the negation
        sel.print("tmuls", [values, sel.const(-1.0, sorter.dtype)], [values])
    out = outs[0]
    if sel.types[out].dtype != sorter.dtype and is_column(sel.types[out]):
        staged = _staged(sel, out, sorter.dtype)             # k = 1: a value per row, a column ...
        sel.copy(values, staged)
        values = staged                                      # ... in the sort dtype first
    if sel.types[out].dtype != sorter.dtype:                 # back to the input's dtype (exact; ±inf stay)
        sel.convert(values, out, "RINT", saturate=sel.types[out].dtype != "bf16")
    else:
        sel.copy(values, out)
    sel.copy(indices, outs[1])


def _staged(sel, tile, dtype: str) -> str:
    """A ``dtype`` tile with ``tile``'s buffer shape (rows, pitch, layout): one ``tcvt`` converts
    between the two."""
    return sel.alloc(dataclasses.replace(sel.types[tile], dtype=dtype))


def _cols(sel, out, dtype: str) -> int:
    """The staging pitch for destination ``out``: its own when it is a row-major tile of another dtype."""
    t = sel.types[out]
    return t.cols if t.dtype != dtype and not is_column(t) else 0


def _source(sel, s, x):
    """``x`` in the sort dtype (``bf16``, ``i8``, ``i16`` widened to ``f32`` in a tile of ``x``'s buffer
    shape: one ``tcvt``)."""
    dtype = _sort_dtype(sel, s, sel.types[x].dtype)
    if sel.types[x].dtype == dtype:
        return x, dtype
    wide = _staged(sel, x, dtype)
    sel.convert(x, wide, "RINT")
    return wide, dtype


def _topk_rows(sel, s, x, rows, n, k, largest, out=None):
    x, dtype = _source(sel, s, x)
    x = one_per_row(sel, x)               # a row of a column tile is no 32-byte row to subset
    sorter = _RowSort(sel, s, rows, 1, n, k, largest, dtype, _cols(sel, out, dtype) if out else 0)
    sorter.iota()
    cols = sel.types[x].cols

    def body(r, dynamic):
        row = sel.subset(x, r, 1, 0, cols)
        sorter.gather(sorter.row(row, None), r, dynamic)
    _loop(sel, rows, body)
    return sorter


def _sort_int32(sel, s, x, rows, lists, n, k, largest, outs, candidates=None):
    """The first ``k`` of each row of i32 values sorted (f32 holds 24 bits): a radix sort by 16-bit
    halves in stable ``tsort32`` passes. ``x`` holds one row per sorted row (a top-k), or ``lists``
    rows of ``n`` candidates whose indices are ``candidates`` (a merge of top-k lists).

    The order is a row of positions in the block of ``x`` being sorted. A pass sorts a dense row of
    keys gathered through it (``tgather``'s index form) with the row's own positions as the index,
    by which ``tsort32`` breaks ties: the previous order among equal keys stays. The low halves
    (``x - (x >> 16 << 16)``, 0..65535, exact in f32) sort first, then the high halves (signed): the
    order is by value, ties in the order before. A top-k starts from the positions (the lower index
    first), a merge from a pass that orders the candidates by index. Values and candidate indices are
    gathered through the final order.

    A gather reads an index of -1 (past the data, where ``k`` goes beyond it) as 0, so an order is
    composed plus one and taken less one, and past the data the values are the pad (the lowest i32
    for the largest-k, the highest for the smallest) and the indices -1."""
    count = lists * n
    cols = sel.types[x].cols
    hi, lo = _staged(sel, x, "i32"), _staged(sel, x, "i32")          # tiles of x's buffer shape
    sel.print("tshrs", [x, sel.const(16, "i32")], [hi])
    sel.print("tshls", [hi, sel.const(16, "i32")], [lo])
    sel.print("tsub", [x, lo], [lo])
    keys = []
    for key in (lo, hi) if candidates is None else (candidates, lo, hi):
        keys.append(_staged(sel, x, "f32"))
        sel.convert(key, keys[-1], "RINT")
    if candidates is not None:                 # by index as unsigned (-1 last), whichever way values sort
        last = _staged(sel, x, "f32")
        sel.print("texpands", [sel.const(float(2 ** 31), "f32")], [last])
        predicate.select_where(sel, keys[0], "lt", 0.0, last, keys[0], keys[0])
        if largest:
            sel.print("tmuls", [keys[0], sel.const(-1.0, "f32")], [keys[0]])
    sorter = _RowSort(sel, s, 1, lists, n, max(count, k), largest, "f32")
    p, kp, c0 = sorter.p, sorter.kp, _index(sel, 0)
    dense_work = sel.reshape(sorter.work, asm.TileBuf("vec", "f32", 1, p, 1, count))
    dense_index = sel.reshape(sorter.index, asm.TileBuf("vec", "i32", 1, p, 1, count))
    order, composed, tmp = (sel.alloc(vec_tile(1, kp, "i32")) for _ in range(3))
    gathered = sel.alloc(vec_tile(1, kp, "f32"))
    gathered_data = sel.reshape(gathered, asm.TileBuf("vec", "f32", 1, kp, 1, count))
    positions_kept = k > count and candidates is not None      # where the pads go: a merge's order rows
    staged = [sel.alloc(asm.TileBuf("vec", "i32", rows, kp, rows, kp)) for _ in range(2 + positions_kept)]
    gathered_only = (candidates,) if candidates is not None else ()
    wholes = {t: sel.alloc(asm.TileBuf("vec", sel.types[t].dtype, lists, cols, lists, cols))
              for t in (x, *keys[-2:], *gathered_only)} if lists > 1 else {}

    def iota(layout: bool):
        sel.print("texpands", [sel.const(-1, "i32")], [sorter.index])
        if not layout or lists == 1:           # one list: its layout is the dense row (no pitch)
            return sel.print("tci", [sel.const(0, "i32")], [dense_index], {"descending": "false"})
        seg = sorter.pitch                     # list q's candidates: work row q * seg, block row q
        for q in range(lists):
            sel.print("tci", [sel.const(q * cols, "i32")], [sel.subset(sorter.index, c0, 1, q * seg, seg)],
                      {"descending": "false"})

    def sort(src, into=None):                  # the positions of src's keys in sorted order
        sorter.gather(sorter.row(src, None, into), c0, False)
        return sorter.indices

    def body(r, dynamic):
        first = _first_row(sel, r, lists, dynamic)
        window = {t: sel.subset(t, first, lists, 0, cols) for t in (x, *keys, *gathered_only)}
        block = dict(window)                   # a gather indexes the static tile: lists x cols
        for t, whole in wholes.items():        # (valid = static, so the engine's valid region agrees)
            sel.print("tmov", [window[t]], [sel.reshape(whole, dataclasses.replace(sel.types[whole], v_col=n))])
            block[t] = whole
        if candidates is not None:
            iota(True)
        sel.copy(sort(window[keys[0]]), order)
        if candidates is not None:
            iota(False)
        for key in keys[1:]:
            sel.print("tgather", [block[key], order, tmp], [gathered])
            positions = sort(gathered_data, dense_work)
            sel.print("tadds", [order, sel.const(1, "i32")], [order])           # order := order[positions]
            sel.print("tgather", [order, positions, tmp], [composed])
            sel.print("tadds", [composed, sel.const(-1, "i32")], [order])
        values, indices, *kept = (sel.subset(t, r, 1, 0, kp) for t in staged)
        sel.print("tgather", [block[x], order, tmp], [values])
        if candidates is None:                 # a top-k's indices are the order itself
            sel.print("tmov", [order], [indices])
        else:
            sel.print("tgather", [block[candidates], order, tmp], [indices])
        for positions in kept:
            sel.print("tmov", [order], [positions])

    if candidates is None:
        iota(False)
    _loop(sel, rows, body)
    if k > count:                              # past the data: the pad and index -1
        values, indices, *kept = staged
        where = kept[0] if kept else indices
        for i, fill in enumerate((-2 ** 31 if largest else 2 ** 31 - 1, -1)):
            pad = sel.like(values)
            sel.print("texpands", [sel.const(fill, "i32")], [pad])
            staged[i] = sel.like(values)
            predicate.select_where(sel, where, "lt", 0, pad, (values, indices)[i], staged[i])
    for t, out in zip(staged[:2], outs):
        sel.copy(sel.reshape(t, asm.TileBuf("vec", "i32", rows, kp, rows, k)), out)


@rule("ttopk", "tsort")
def topk(sel, s, ins, outs):
    (x,) = ins
    shape = sel.shape(s, 0, x)
    axis = s.attr("axis") % len(shape)
    k, largest = s.attr("k"), bool(s.attr("largest"))
    if shape[axis] == 1 and k == 1:            # one element along the axis: a copy, index 0
        sel.copy(x, outs[0])
        sel.print("texpands", [sel.const(0, "i32")], [outs[1]])
        return
    rows, n = matrix(shape)
    if axis == len(shape) - 1:
        if sel.types[x].v_row != rows:
            sel.fail(s, f"on a {list(shape)} tile whose valid region is not {rows} rows")
        if sel.types[x].dtype == "i32":
            return _sort_int32(sel, s, x, rows, 1, n, k, largest, outs)
        return _finish(sel, _topk_rows(sel, s, x, rows, n, k, largest, outs[0]), outs)
    if sel.types[x].dtype == "i32":
        sel.fail(s, f"along axis {axis} of a {list(shape)} i32 tile (i32 sorts along the last axis)")
    if math.prod(shape[:axis]) != 1 or math.prod(shape[axis + 1:-1]) != 1:
        sel.fail(s, f"along axis {axis} of a {list(shape)} tile")
    # a leading axis whose rows are the tile's rows: transpose in, sort the rows, transpose the k rows out
    rows, n = shape[-1], shape[axis]
    x, dtype = _source(sel, s, x)
    xt = sel.alloc(vec_tile(rows, n, dtype))
    sel.print("ttrans", [x, sel.like(x)], [xt])
    sorter = _topk_rows(sel, s, xt, rows, n, k, largest)
    values, indices = sorter.results()
    sel.print("tmuls", [values, sel.const(1.0 if largest else -1.0, sorter.dtype)], [values])
    flipped = _staged(sel, outs[0], sorter.dtype)
    sel.print("ttrans", [values, sel.like(values)], [flipped])
    sel.copy(flipped, outs[0]) if sel.types[outs[0]].dtype == sorter.dtype else \
        sel.convert(flipped, outs[0], "RINT", saturate=sel.types[outs[0]].dtype != "bf16")
    sel.print("ttrans", [indices, sel.like(indices)], [outs[1]])


@rule("tmrgsort")
def merge_topk(sel, s, ins, outs):
    values, indices = ins
    shape = sel.shape(s, 0, values)
    if len(shape) < 2:
        sel.fail(s, f"on a {list(shape)} candidate tile")
    lists, n = shape[-2], shape[-1]
    rows = math.prod(shape[:-2])
    k, largest = s.attr("k"), bool(s.attr("largest"))
    tv, ti = sel.types[values], sel.types[indices]
    if (tv.v_row, tv.v_col) != (rows * lists, n) or (ti.v_row, ti.v_col) != (rows * lists, n):
        sel.fail(s, f"on candidate tiles that are not {rows * lists} x {n}")
    if tv.dtype == "i32":
        if ti.cols != tv.cols:
            indices = _staged(sel, values, "i32")
            sel.copy(ins[1], indices)
        return _sort_int32(sel, s, one_per_row(sel, values), rows, lists, n, k, largest, outs,
                           one_per_row(sel, indices))
    values, dtype = _source(sel, s, values)
    # one candidate per list (a k = 1 stage's) comes in column tiles: their values one per 32-byte row
    # first, so that each sorted row's lists are a 32-byte aligned window
    values, indices = one_per_row(sel, values), one_per_row(sel, indices)
    sorter = _RowSort(sel, s, rows, lists, n, k, largest, dtype, _cols(sel, outs[0], dtype))
    vcols, icols = sel.types[values].cols, sel.types[indices].cols

    def body(r, dynamic):
        first = _first_row(sel, r, lists, dynamic)
        v = sel.subset(values, first, lists, 0, vcols)
        i = sel.subset(indices, first, lists, 0, icols)
        sorter.gather(sorter.row(v, i), r, dynamic)
    _loop(sel, rows, body)
    _finish(sel, sorter, outs)
