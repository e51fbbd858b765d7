"""Vector rules: moves, elementwise arithmetic and bitwise ops (broadcasts as ``trowexpand*`` /
``tcolexpand*``, rows repeated in groups by :mod:`.broadcast`), tile-scalar forms, conversions,
reductions (``trow*`` with a tmp tile and an ``R×1`` result, ``tcol*``), transposes (``ttrans``; a
column regrouped as rows and back), and broadcasts of a tile or a scalar (``texpand``)."""
from __future__ import annotations

import numpy as np

from .. import asm, instructions
from . import predicate
from .broadcast import broadcast_rows, by_row_runs, fuses, grouped, in_groups, operand
from .rows import from_rows, one_per_row, row_major
from .rules import rule
from .selector import is_column, matrix

_ROUNDING = {"rint": "RINT", "round": "ROUND", "floor": "FLOOR", "ceil": "CEIL", "trunc": "TRUNC"}
_BINARY = {"tadd": "add", "tsub": "sub", "tmul": "mul", "tdiv": "div", "tmax": "max", "tmin": "min", "tfmod": "fmod",
           "tshl": "shl", "tshr": "shr"}
_BITWISE = ("tand", "tor", "txor", "tnot")
_FLOATS = ("f32", "f16", "bf16")
_COMMUTES = {"tadd", "tmul", "tmax", "tmin"}
_REDUCE = {"tsum": "sum", "tamax": "max", "tamin": "min", "tprod": "prod", "targmax": "argmax", "targmin": "argmin"}
_UNARY = ("texp", "tlog", "tsqrt", "trsqrt", "trecip", "tneg", "trelu")


@rule("tstore", "tmov")
def move(sel, s, ins, outs):
    sel.print(s.op, ins, outs)


@rule(*_UNARY)
def unary(sel, s, ins, outs):
    sel.emit(s.op, ins, outs)


@rule(*_BINARY)
def binary(sel, s, ins, outs):
    """Tile-tile arithmetic on operands of one shape, or one broadcast along rows / columns (compared as
    the 2-D matrices the tiles hold); a scalar operand takes the tile-scalar form."""
    op = s.op
    a, b = ins
    if not isinstance(sel.types[a], asm.TileBuf) or not isinstance(sel.types[b], asm.TileBuf):
        return scalar_binary(sel, s, ins, outs, _BINARY[op], scalar_first=not isinstance(sel.types[a], asm.TileBuf))
    shape_a, shape_b = (sel.shape(s, i, n) for i, n in enumerate(ins))
    sa, sb = matrix(shape_a), matrix(shape_b)
    to = sel.types[outs[0]]
    so = (to.v_row, to.v_col)
    if sa == so and sb == so:
        return sel.emit(op, ins, outs)
    if sa != so and op in _COMMUTES and sb == so:
        a, b, sa, sb, shape_a, shape_b = b, a, sb, sa, shape_b, shape_a
    if so[1] == 1 and sb == (1, 1) and sa == so and f"trowexpand{_BINARY[op]}" in instructions.TABLE:
        # a column and one value: the value expands over the column's row
        return sel.emit(f"trowexpand{_BINARY[op]}", [sel.row(a), sel.as_cell(b, sel.types[b])], [sel.row(outs[0])])
    out_shape = tuple(np.broadcast_shapes(shape_a, shape_b))
    a = operand(sel, s, a, shape_a, out_shape)
    if sb == so:
        return sel.emit(op, [a, b], outs)
    if in_groups(sb, so):
        if is_column(to) or not fuses(op):
            return sel.emit(op, [a, grouped(sel, s, b, shape_b, out_shape)], outs)
        return by_row_runs(sel, s, op, a, b, outs[0], out_shape, shape_b)
    fused = {(so[0], 1): f"trowexpand{_BINARY[op]}", (1, so[1]): f"tcolexpand{_BINARY[op]}"}.get(sb)
    if fused in instructions.TABLE and so != (1, 1) and (fused[1:4] == "col" or to.dtype in _FLOATS):
        # (an integer per-row operand would need a full 32-byte row: the verifier's rule)
        return sel.emit(fused, [a, sel.as_rows(b, sel.types[b], sb) if fused.startswith("trow") else b], outs)
    sel.emit(op, [a, sel.expand(s, b, sb, so)], outs)


@rule("tabs")
def absolute(sel, s, ins, outs):
    if sel.types[ins[0]].dtype in _FLOATS:
        return sel.emit("tabs", ins, outs)
    neg = sel.like(outs[0])                     # integers: |x| = max(x, -x) (no integer tabs)
    sel.emit("tmuls", [ins[0], sel.const(-1, sel.types[ins[0]].dtype)], [neg])
    sel.emit("tmax", [ins[0], neg], outs)


@rule(*_BITWISE)
def bitwise(sel, s, ins, outs):
    """Bitwise ops; i32 tiles as i16 tiles of twice the columns (the same bytes: A2/A3 has no i32
    and/or/xor/not), ``txor`` with its tmp tile; a broadcast operand expanded first."""
    tile = next((n for n in ins if isinstance(sel.types[n], asm.TileBuf)), None)
    if tile is None:
        sel.fail(s, "on scalars only")
    if len(ins) == 2 and all(isinstance(sel.types[n], asm.TileBuf) for n in ins):
        shapes = [sel.shape(s, i, n) for i, n in enumerate(ins)]
        out_shape = tuple(np.broadcast_shapes(*shapes))
        ins = [operand(sel, s, n, shape, out_shape) for n, shape in zip(ins, shapes)]
    filled = []
    for n in ins:                                  # a scalar operand: filled into a tile of its own
        if not isinstance(sel.types[n], asm.TileBuf):
            wide = {"i8": "i16"}.get(sel.types[tile].dtype, sel.types[tile].dtype)
            full = sel.like(tile, dtype=wide)
            sel.print("texpands", [sel.const(sel.values[n], wide)], [full])
            if wide != sel.types[tile].dtype:
                narrow = sel.like(tile)
                sel.convert(full, narrow, "RINT", saturate=False)
                full = narrow
            n = full
        filled.append(n)
    ins = filled
    names = list(ins) + list(outs)
    if sel.types[outs[0]].dtype == "i32" and "i32" not in instructions.TABLE[s.op].dtypes_for(sel.arch):
        halves = {n: sel.reshape(n, _halves(sel.types[n])) for n in names}
        ins, outs = [halves[n] for n in ins], [halves[n] for n in outs]
    extra = [sel.like(outs[0])] if s.op == "txor" else []
    sel.emit(s.op, [*ins, *extra], outs)


def _halves(t: asm.TileBuf) -> asm.TileBuf:
    return asm.TileBuf(t.loc, "i16", t.rows, 2 * t.cols, t.v_row, 2 * t.v_col, t.blayout, t.slayout, t.fractal, t.pad)


def scalar_binary(sel, s, ins, outs, base, scalar_first=None):
    """``x <op> s`` / ``s <op> x`` in the tile-scalar forms the real ISA has."""
    scalar_first = s.attr("scalar_first") if scalar_first is None else scalar_first
    tile, scalar = (ins[1], ins[0]) if scalar_first else (ins[0], ins[1])
    dtype = sel.types[tile].dtype
    if base in ("max", "min") and dtype not in _FLOATS:
        full = sel.like(tile, dtype="i32" if dtype == "i32" else "i16")     # an integer max / min: the scalar
        sel.print("texpands", [sel.const(sel.values[scalar], sel.types[full].dtype)], [full])   # as a tile
        return sel.emit(f"t{base}", [tile, full], outs)
    if base in ("fmod", "shl", "shr") and scalar_first:
        full = sel.like(tile)
        sel.emit("texpands", [sel.const(sel.values[scalar], dtype)], [full])
        return sel.emit(f"t{base}", [full, tile], outs)
    if base in ("fmod", "shl", "shr"):
        return sel.emit(f"t{base}s", [tile, sel.const(sel.values[scalar], dtype)], outs)
    if not scalar_first or base in ("add", "mul", "max", "min"):
        return sel.emit(f"t{base}s", [tile, scalar], outs)
    if base == "div":                        # tdivs reads both orders: (s, x) is s / x
        return sel.emit("tdivs", [scalar, tile], outs)
    neg = sel.like(outs[0])                 # s - x = (-x) + s
    sel.emit("tmuls", [tile, sel.const(-1, sel.types[scalar])], [neg])
    sel.emit("tadds", [neg, scalar], outs)


@rule("tadds", "tsubs", "tmuls", "tdivs", "tmaxs", "tmins")
def scalar(sel, s, ins, outs):
    scalar_binary(sel, s, ins, outs, s.op[1:-1])


@rule('tcvt')
def cvt(sel, s, ins, outs):
    src = sel.types[ins[0]]
    if src.loc == "acc":                     # the accumulator converts on its way out (FIXPIPE)
        sel.renamed[outs[0]] = ins[0]
        return
    if s.attr("dtype") == "i1":                 # x -> bool: x != 0
        predicate.nonzero(sel, ins[0], outs[0])
        return predicate.settle(sel, outs[0])
    sel.convert(ins[0], outs[0], _ROUNDING[s.attr("rounding", "rint")], s.attr("saturate"))



@rule('tsum', 'tamax', 'tamin', 'tprod', 'targmax', 'targmin')
def reduce(sel, s, ins, outs):
    """A reduction over the axes of a tile held as rows x cols (rows = the leading axes): the last
    axis is a row reduction (``trow*``, an R×1 result), the leading ones a column reduction
    (``tcol*``, 1×C), all of them both; axes of size 1 reduce nothing."""
    kind = _REDUCE[s.op]
    (src,) = ins
    shape = sel.shape(s, 0, src)
    axes = {a % len(shape) for a in s.attr("axes")} if shape else set()
    out, to = outs[0], sel.types[outs[0]]
    if s.attr("dtype") is not None and s.attr("dtype") != sel.types[src].dtype:
        sel.fail(s, f"accumulating {sel.types[src].dtype} in {s.attr('dtype')}")
    real = {a for a in axes if shape[a] > 1}
    rows_axes = {a for a in range(len(shape) - 1) if shape[a] > 1}
    by_row = len(shape) - 1 in real
    by_col = bool(real - {len(shape) - 1})
    if by_col and real - {len(shape) - 1} != rows_axes:
        sel.fail(s, f"over axes {sorted(axes)} of a {list(shape)} tile (some leading axes kept)")
    rows, cols = matrix(shape)
    arg = kind in ("argmax", "argmin")
    if not real:                                 # nothing to reduce: a copy (an index of 0)
        if arg:
            return sel.emit("texpands", [sel.const(0, to.dtype)], [out])
        return sel.copy(src, out)
    if is_column(sel.types[src]):                # a value per row: reduce the row it also is
        src, rows, cols, by_row, by_col = sel.row(src), 1, rows, True, False
    if by_row and not by_col:
        return sel.emit(f"trow{kind}", [src, sel.like(src)], [sel.as_column(out, to, rows)])
    if by_col and not by_row and arg and sel.types[src].dtype not in _FLOATS:
        flipped = sel.like(src, rows=cols, cols=rows)      # integer column arg-reductions: rows of the transpose
        sel.emit("ttrans", [src, sel.like(src)], [flipped])
        result = sel.like(flipped, cols=1, dtype=to.dtype)
        sel.emit(f"trow{kind}", [flipped, sel.like(flipped)], [result])
        return sel.copy(result, out)
    if by_col and not by_row:
        result = out if (to.v_row, to.v_col) == (1, cols) else sel.like(src, rows=1, dtype=to.dtype)
        sel.emit(f"tcol{kind}", [src, *([sel.like(src)] if arg else [])], [result])
        return sel.copy(result, out)
    if arg:
        sel.fail(s, f"over every axis of a {list(shape)} tile")
    per_row = sel.like(src, cols=1, dtype=to.dtype)
    sel.emit(f"trow{kind}", [src, sel.like(src)], [per_row])
    values = sel.row(per_row)                    # then the row of the R per-row results
    sel.emit(f"trow{kind}", [values, sel.like(values)], [sel.as_cell(out, to)])


@rule("ttrans")
def transpose(sel, s, ins, outs):
    """A transpose of the two axes a tile's matrix holds (``ttrans``); a permutation that keeps the
    order of the axes longer than one moves no element (:func:`relayout`)."""
    shape = sel.shape(s, 0, ins[0])
    moved = [p for p in s.attr("permutation") if shape[p] > 1]
    if moved == sorted(moved):
        return relayout(sel, s, ins[0], outs[0])
    if moved != sorted(moved)[::-1] or len(moved) > 2:
        sel.fail(s, f"permuting {list(shape)} by {list(s.attr('permutation'))}")
    sel.emit("ttrans", [ins[0], sel.like(ins[0])], outs)


def relayout(sel, s, src: str, out: str):
    """``out`` := the elements of ``src`` in the same row-major order, in another matrix form: a column
    of ``G*k`` values as ``G`` rows of ``k`` or back, through a work tile of one value per row
    (:func:`~.rows.one_per_row`) and ``ttrans`` of its ``k``-row blocks."""
    ts, to = sel.types[src], sel.types[out]
    if (ts.v_row, ts.v_col) == (to.v_row, to.v_col) or 1 in (ts.v_row, to.v_row):
        sel.copy(src, out)
    elif ts.v_col == 1:
        work, k = one_per_row(sel, src), to.v_col
        for g in range(to.v_row):
            block = sel.subset(work, g * k, k)
            sel.print("ttrans", [block, sel.like(block)], [sel.subset(out, g, 1)])
    elif to.v_col == 1:
        work, k = sel.alloc(row_major(to.v_row, 1, ts.dtype)), ts.v_col
        for g in range(ts.v_row):
            row = sel.subset(src, g, 1)
            sel.print("ttrans", [row, sel.like(row)], [sel.subset(work, g * k, k)])
        from_rows(sel, work, out)
    else:
        sel.fail(s, f"regrouping a {ts.v_row}x{ts.v_col} tile as {to.v_row}x{to.v_col}")


@rule('texpand')
def broadcast(sel, s, ins, outs):
    (x,) = ins
    if not isinstance(sel.types[x], asm.TileBuf):      # a scalar fills the tile
        dtype = sel.types[outs[0]].dtype
        return sel.emit("texpands", [sel.const(sel.values[x], dtype)], outs)
    src = matrix(sel.shape(s, 0, x))
    to = sel.types[outs[0]]
    dst = (to.v_row, to.v_col)
    if src == dst:
        return sel.copy(x, outs[0])
    if src == (1, 1) and dst[1] == 1:                   # a value over a column: its row, filled
        return sel.copy(sel.expand(s, x, src, dst), outs[0])
    if src == (dst[0], 1):
        return sel.emit("trowexpand", [sel.as_rows(x, sel.types[x], src)], outs)
    if src == (1, dst[1]):
        return sel.emit("tcolexpand", [x], outs)
    if src[1] == dst[1] and dst[0] % src[0] == 0 and len(sel.shape(s, 0, x)) > 1:
        return broadcast_rows(sel, s, x, sel.shape(s, 0, x), outs[0], tuple(s.attr("shape")))
    sel.copy(sel.expand(s, x, src, dst), outs[0])
