"""Vector rules: moves, elementwise arithmetic and bitwise ops (broadcasts as ``trowexpand*`` /
``tcolexpand*``, rows repeated in groups by :mod:`.broadcast`), tile-scalar forms, conversions,
reductions (``trow*`` with a tmp tile and an ``R×1`` result, ``tcol*``), transposes (``ttrans``; a
column regrouped as rows and back), windows of a tile (``pto.subset``), and broadcasts of a tile or a scalar (``texpand``)."""
from __future__ import annotations

import math

import numpy as np

from .. import asm, instructions
from . import predicate
from .broadcast import across_and_in_groups, broadcast_rows, by_row_runs, fuses, grouped, in_groups, operand
from .rows import from_rows, one_per_row, row_major
from .rules import rule
from .selector import is_column, matrix, vec_tile

_ROUNDING = {"rint": "RINT", "round": "ROUND", "floor": "FLOOR", "ceil": "CEIL", "trunc": "TRUNC"}
_BINARY = {"tadd": "add", "tsub": "sub", "tmul": "mul", "tdiv": "div", "tmax": "max", "tmin": "min", "tfmod": "fmod",
           "tshl": "shl", "tshr": "shr"}
_BITWISE = ("tand", "tor", "txor", "tnot")
_FLOATS = ("f32", "f16", "bf16")
_COMMUTES = {"tadd", "tmul", "tmax", "tmin"}
_REDUCE = {"tsum": "sum", "tamax": "max", "tamin": "min", "tprod": "prod", "targmax": "argmax", "targmin": "argmin"}
_UNARY = ("texp", "tlog", "tsqrt", "trsqrt", "trecip", "tneg")


@rule("tmov")
def move(sel, s, ins, outs):
    sel.print(s.op, ins, outs)


@rule(*_UNARY)
def unary(sel, s, ins, outs):
    sel.emit(s.op, ins, outs)


@rule(*_BINARY)
def binary(sel, s, ins, outs):
    """Tile-tile arithmetic on operands of one shape, or one broadcast along rows / columns (compared as
    the 2-D matrices the tiles hold); a scalar operand takes the tile-scalar form. Float ``max`` / ``min``
    take NaN from either operand, as JAX's: ``tmax`` / ``tmin`` (``std::max``) pass only ``src0``'s, so
    the other operand's NaNs are selected in after. Of equal values they keep the first, so between
    tiles ``max(-0.0, +0.0)`` is -0.0, where XLA orders -0.0 below +0.0 (docs/ops.md)."""
    a, b = ins
    if not isinstance(sel.types[a], asm.TileBuf) or not isinstance(sel.types[b], asm.TileBuf):
        return scalar_binary(sel, s, ins, outs, _BINARY[s.op], scalar_first=not isinstance(sel.types[a], asm.TileBuf))
    if s.op == "tfmod" and sel.types[outs[0]].dtype not in _FLOATS:
        shapes = [sel.shape(s, i, n) for i, n in enumerate(ins)]
        out_shape = tuple(np.broadcast_shapes(*shapes))
        x, d = (operand(sel, s, n, shape, out_shape) for n, shape in zip(ins, shapes))
        return _integer_remainder(sel, x, d, outs[0])
    if s.op not in ("tmax", "tmin") or sel.types[outs[0]].dtype not in _FLOATS:
        return _tile_binary(sel, s, ins, outs)
    shapes = [sel.shape(s, i, n) for i, n in enumerate(ins)]
    out_shape = tuple(np.broadcast_shapes(*shapes))
    to = sel.types[outs[0]]
    src1 = 0 if matrix(shapes[0]) != (to.v_row, to.v_col) == matrix(shapes[1]) else 1   # after the swap below
    plain = sel.like(outs[0])
    _tile_binary(sel, s, ins, [plain])
    nans = operand(sel, s, ins[src1], shapes[src1], out_shape)
    predicate.where_nan(sel, nans, nans, plain, outs[0])


def _integer_remainder(sel, x: str, d: str, out: str):
    """XLA's integer ``rem``: ``x`` where the divisor is 0, 0 for ``INT_MIN % -1``. Integer ``tfmod`` is C's
    ``%``, which traps on both (pto-isa's simulator does), so those divisors become 1 first (``x % 1`` is
    ``x % -1``: 0) and ``x`` is selected back where the divisor was 0; ``i8`` tiles in ``i16``."""
    if sel.narrow(x):
        x, d = sel.widen(x), sel.widen(d)
    dtype = sel.types[x].dtype
    one, safe, rem = sel.like(x), sel.like(x), sel.like(x)
    sel.print("texpands", [sel.const(1, dtype)], [one])
    predicate.select_where(sel, d, "eq", 0, one, d, safe)
    predicate.select_where(sel, safe, "eq", -1, one, safe, safe)
    sel.print("tfmod", [x, safe], [rem])
    if not sel.narrow(out):
        return predicate.select_where(sel, d, "eq", 0, x, rem, out)
    predicate.select_where(sel, d, "eq", 0, x, rem, rem)
    sel.convert(rem, out, "RINT", saturate=False)


def _tile_binary(sel, s, ins, outs):
    op = s.op
    a, b = ins
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
    sel.emit(op, [a, operand(sel, s, b, shape_b, out_shape)], outs)    # (rows in groups across columns too)


@rule("trelu")
def relu(sel, s, ins, outs):
    sel.emit("trelu", ins, outs)
    dtype = sel.types[ins[0]].dtype
    if dtype in _FLOATS:                        # trelu(-0.0) is -0.0 (x < 0 ? 0 : x), XLA's max(-0.0, 0) +0.0
        sel.emit("tadds", [outs[0], sel.const(0.0, dtype)], outs)


@rule("tabs")
def absolute(sel, s, ins, outs):
    dtype = sel.types[ins[0]].dtype
    if dtype in _FLOATS:                        # tabs(-0.0) is -0.0 (x < 0 ? -x : x); + 0.0 makes it +0.0
        sel.emit("tabs", ins, outs)
        return sel.emit("tadds", [outs[0], sel.const(0.0, dtype)], outs)
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
    ins, outs = [sel.row(n) for n in filled], [sel.row(n) for n in outs]     # columns as their rows:
    names = list(ins) + list(outs)                                           # and/or/xor want row-major
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
        native = all(dtype in instructions.TABLE[op].dtypes_for(sel.arch) for op in ("texpands", f"t{base}"))
        full = sel.like(tile, dtype=dtype if native else "i16")     # an integer max / min: the scalar as a tile
        sel.print("texpands", [sel.const(sel.values[scalar], sel.types[full].dtype)], [full])   # (i8 on A2/A3: i16)
        return sel.emit(f"t{base}", [tile, full], outs)
    value = sel.values.get(scalar, 1.0)
    if base in ("max", "min") and math.isnan(value):             # JAX's max / min of NaN is NaN
        return sel.emit("texpands", [sel.const(math.nan, dtype)], outs)          # (std::max would keep x)
    if base in ("max", "min") and value == 0 and (math.copysign(1, value) < 0) == (base == "min"):
        # max(x, +0) / min(x, -0), relu: std::max keeps x = -0 / +0 where XLA orders -0 below +0
        plain = sel.like(outs[0])
        sel.emit(f"t{base}s", [tile, scalar], [plain])
        if base == "max":
            return sel.emit("tadds", [plain, sel.const(0.0, dtype)], outs)      # -0 + 0 = +0
        sel.emit("tmuls", [plain, sel.const(-1.0, dtype)], [plain])             # min: -((-x) + 0)
        sel.emit("tadds", [plain, sel.const(0.0, dtype)], [plain])
        return sel.emit("tmuls", [plain, sel.const(-1.0, dtype)], outs)
    if base == "fmod" and dtype not in _FLOATS and scalar_first:      # the tile divides: its 0s and -1s guarded
        full = sel.like(tile)
        sel.emit("texpands", [sel.const(sel.values[scalar], dtype)], [full])
        return _integer_remainder(sel, full, tile, outs[0])
    if base == "fmod" and dtype not in _FLOATS and sel.values[scalar] in (1, -1):     # (INT_MIN % -1 traps)
        return sel.emit("texpands", [sel.const(0, dtype)], outs)
    if base in ("fmod", "shl", "shr") and scalar_first:
        full = sel.like(tile)
        sel.emit("texpands", [sel.const(sel.values[scalar], dtype)], [full])
        return sel.emit(f"t{base}", [full, tile], outs)
    if base in ("shl", "shr") and not 0 <= sel.values[scalar] < 8 * asm.DTYPES[dtype].itemsize:
        # a count past the width (ptoas refuses a negative one): as XLA, 0 but for a signed right shift,
        # which fills with the sign (the shift by the width less one)
        if base == "shl" or dtype.startswith("u"):
            return sel.emit("texpands", [sel.const(0, dtype)], outs)
        return sel.emit("tshrs", [tile, sel.const(8 * asm.DTYPES[dtype].itemsize - 1, dtype)], outs)
    if base == "fmod" and sel.values[scalar] == 0:     # pto-isa declares tfmods by 0 illegal: IEEE's NaN, XLA's x
        return sel.emit("texpands", [sel.const(math.nan, dtype)], outs) if dtype in _FLOATS else sel.copy(tile, outs[0])
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
    to = sel.types[outs[0]].dtype
    integer = to in ("i8", "ui8", "i16", "i32")
    saturate = s.attr("saturate") if integer else None      # into a float: overflow is inf, NaN stays NaN
    src, big = ins[0], None
    if saturate and sel.types[src].dtype in _FLOATS:
        src, big = _saturable(sel, src, to)
    sel.convert(src, outs[0], _ROUNDING[s.attr("rounding", "rint")], saturate)
    if big is not None:                                     # 2**31 and above: INT32_MAX
        top = sel.like(outs[0])
        sel.print("texpands", [sel.const(2 ** 31 - 1, "i32")], [top])
        (big,), (top, out) = predicate.aligned(sel, [big], [top, outs[0]])
        sel.print("tsel", [big, top, out, sel.like(out)], [out])


_I32_BELOW = 2147483520.0       # the largest float32 below 2**31


def _saturable(sel, x: str, to: str) -> tuple:
    """(The float source of a saturating conversion to integer ``to`` as JAX converts, the mask of
    the values the result must hold as INT32_MAX or None): NaN to 0 (the real ``tcvt`` clamps NaN to
    the upper limit) and, into i32, in float32 at most 2**31 - 128 (the limit 2**31 - 1 rounds up to
    2**31 in float32, which converts to INT32_MIN; an f16 source would clamp ±inf to ±65504), the
    values from 2**31 up flagged."""
    x, big = predicate.widened(sel, x), None                # bf16 in f32: no bf16 compare, select
    if to == "i32":
        if sel.types[x].dtype != "f32":
            x = sel.widen(x, "f32")
        whole = predicate.full(sel, x)
        big = sel.mask_for(sel.fresh("p"), sel.types[whole])
        sel.print("tcmps", [whole, sel.const(2.0 ** 31, "f32")], [big], {"cmpMode": "ge"})
        clamped = sel.like(x)
        sel.print("tmins", [x, sel.const(_I32_BELOW, "f32")], [clamped])
        x = clamped
    zeros, result = sel.like(x), sel.like(x)
    sel.print("texpands", [sel.const(0.0, sel.types[x].dtype)], [zeros])
    predicate.where_nan(sel, x, zeros, x, result)
    return result, big



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
    arg = kind in ("argmax", "argmin")
    if not real:                                 # nothing to reduce: a copy (an index of 0)
        if arg:
            return sel.emit("texpands", [sel.const(0, to.dtype)], [out])
        return sel.copy(src, out)
    if kind in ("argmax", "argmin", "max", "min") and sel.types[src].dtype in _FLOATS and not s.attr("skip_nan"):
        return _nan_aware(sel, s, kind, src, out, lambda k, x, o: _reduce(sel, s, k, x, shape, real, o))
    if kind in ("sum", "prod") and to.dtype in ("f16", "bf16") and (kind, real) != ("sum", {len(shape) - 1}):
        # in float32, rounded once (as pj.ops computes them): but a row sum, the real tcolsum / trowprod /
        # tcolprod of a half tile add or multiply in half
        wide_src, wide_out = sel.like(src, dtype="f32"), sel.like(out, dtype="f32")
        sel.convert(src, wide_src, "RINT")
        _reduce(sel, s, kind, wide_src, shape, real, wide_out)
        return sel.convert(wide_out, out, "RINT")
    _reduce(sel, s, kind, src, shape, real, out)


def _reduce(sel, s, kind: str, src: str, shape, real: set, out: str):
    """``out`` := ``kind`` of ``src`` over the (longer than one) axes ``real`` with the real
    instructions' NaN rule (a NaN counts only as a row's or column's first element)."""
    to = sel.types[out]
    arg = kind in ("argmax", "argmin")
    rows_axes = {a for a in range(len(shape) - 1) if shape[a] > 1}
    by_row = len(shape) - 1 in real
    by_col = bool(real - {len(shape) - 1})
    if by_col and real - {len(shape) - 1} != rows_axes:
        return _some_rows(sel, s, kind, src, shape, real, out)
    rows = matrix(shape)[0]
    if is_column(sel.types[src]):                # a value per row: reduce the row it also is
        src, rows, by_row, by_col = sel.row(src), 1, True, False
    if by_row and not by_col and 1 not in (to.v_row, to.v_col):     # R results kept as a matrix:
        per_row = sel.like(src, cols=1, dtype=to.dtype)                # a column, regrouped
        sel.emit(f"trow{kind}", [src, sel.like(src)], [per_row])
        return relayout(sel, s, per_row, out)
    if by_row and not by_col:
        return sel.emit(f"trow{kind}", [src, sel.like(src)], [sel.as_column(out, to, rows)])
    if by_col and not by_row:
        return _by_columns(sel, kind, src, out)
    if arg:
        sel.fail(s, f"over every axis of a {list(shape)} tile")
    per_row = sel.like(src, cols=1, dtype=to.dtype)
    sel.emit(f"trow{kind}", [src, sel.like(src)], [per_row])
    values = sel.row(per_row)                    # then the row of the R per-row results
    sel.emit(f"trow{kind}", [values, sel.like(values)], [sel.as_cell(out, to)])


def _as_wide_rows(sel, kind: str, src: str, n: int, inner: int, out: str):
    """``out`` (``inner`` rows) := the reduction of ``src``'s ``n`` blocks of ``inner`` rows, the
    same bytes viewed as ``n`` rows of ``inner`` rows each and reduced by columns."""
    ts, to = sel.types[src], sel.types[out]
    width = inner * ts.v_col
    _by_columns(sel, kind, sel.reshape(src, asm.TileBuf("vec", ts.dtype, n, width, n, width)),
                sel.reshape(out, asm.TileBuf("vec", to.dtype, 1, width, 1, width)))


def _regrouped(sel, s, kind: str, src: str, outer: int, n: int, inner: int, out: str):
    """A reduction over the middle ``n`` of a value per row (``outer x n x inner`` of them): the
    values regrouped as rows of ``inner`` (or of ``n`` when ``inner`` is 1, a row reduction), reduced,
    and the results regrouped as a value per row (:func:`relayout`)."""
    shape, kept = ((outer, n, inner), (outer, inner)) if inner > 1 else ((outer, n), (outer, 1))
    work = sel.alloc(vec_tile(*matrix(shape), sel.types[src].dtype))
    relayout(sel, s, src, work)
    result = sel.alloc(vec_tile(*kept, sel.types[out].dtype))
    _reduce(sel, s, kind, work, shape, {1}, result)
    relayout(sel, s, result, out)


FINITE_MAX = {"f32": 3.4028234663852886e38, "f16": 65504.0}     # the largest finite values


def _nan_aware(sel, s, kind: str, src: str, out: str, reduce):
    """``max`` / ``min`` / ``argmax`` / ``argmin`` of floats as JAX defines them: NaN, or the first
    NaN's index, where one is. The real instructions skip a NaN past the first element, so a NaN pass
    reduces too: for ``max`` / ``min`` the sum of ``clip(x, ±max finite) * 0`` (NaN exactly where a NaN
    is: one work tile beside ``x``, as a whole-row tile leaves UB room for), then ``tcmp``/``tsel`` of
    it with itself; for the arg-reductions the NaNs' 1 / 0 flags (``tcmp ne`` of ``src`` with itself,
    ``tsel``), their ``max`` and first index, and a ``tsel`` of that index or the plain result."""
    wide = predicate.widened(sel, src)
    dtype = sel.types[wide].dtype
    to = sel.types[out]
    plain = sel.alloc(vec_tile(to.v_row, to.v_col, to.dtype))
    seen = sel.alloc(vec_tile(to.v_row, to.v_col, dtype))
    if kind in ("max", "min"):
        zeros = sel.like(wide)
        sel.emit("tmaxs", [wide, sel.const(-FINITE_MAX[dtype], dtype)], [zeros])
        sel.emit("tmins", [zeros, sel.const(FINITE_MAX[dtype], dtype)], [zeros])
        sel.emit("tmuls", [zeros, sel.const(0.0, dtype)], [zeros])
        reduce("sum", zeros, seen)
        reduce(kind, src, plain)
        return predicate.where_nan(sel, seen, seen, plain, out)
    flags, zeros = sel.like(wide), sel.like(wide)
    sel.print("texpands", [sel.const(1.0, dtype)], [flags])
    sel.print("texpands", [sel.const(0.0, dtype)], [zeros])
    predicate.where_nan(sel, wide, flags, zeros, flags)                 # in place
    reduce("max", flags, seen)
    first = sel.alloc(vec_tile(to.v_row, to.v_col, to.dtype))
    reduce("argmax", flags, first)
    reduce(kind, src, plain)
    return predicate.select_where(sel, seen, "ne", 0.0, first, plain, out)


def _by_columns(sel, kind: str, src: str, out: str):
    """``out`` := the reduction of each column of ``src`` (``tcol*``; integer sums and arg-reductions
    as row reductions of the transpose: pto-isa's TCOLSUM takes float tiles only)."""
    ts, to = sel.types[src], sel.types[out]
    rows, cols = ts.v_row, ts.v_col
    arg = kind in ("argmax", "argmin")
    if (arg or kind == "sum") and ts.dtype not in _FLOATS:
        flipped = sel.like(src, rows=cols, cols=rows)
        sel.emit("ttrans", [src, sel.like(src)], [flipped])
        result = sel.like(flipped, cols=1, dtype=to.dtype)
        sel.emit(f"trow{kind}", [flipped, sel.like(flipped)], [result])
        return sel.copy(result, out)
    result = out if (to.v_row, to.v_col) == (1, cols) else sel.like(src, rows=1, dtype=to.dtype)
    sel.emit(f"tcol{kind}", [src, *([sel.like(src)] if arg else [])], [result])
    return sel.copy(result, out)


def _some_rows(sel, s, kind: str, src: str, shape, real: set, out: str):
    """A reduction over some leading axes that keeps others: the rows are ``outer x n x inner`` (``n``
    the reduced axes, consecutive; the last axis reduced first, a value per row regrouped). With
    ``inner`` 1, block ``o`` of ``n`` rows (a ``pto.subset``) reduces by columns (:func:`_by_columns`)
    into row ``o``; a sum / max / min / prod combines the ``n`` blocks of ``inner`` rows elementwise;
    an arg-reduction views block ``o`` (copied out: PTOAS takes no ``pto.subset`` of a ``treshape``d
    tile) as ``n`` rows of ``inner*C`` where rows have no padding, else gathers each kept row's ``n``
    rows into a tile of its own."""
    last = len(shape) - 1
    lead = [a for a in range(last) if shape[a] > 1]
    red = [a for a in lead if a in real]
    first = lead.index(red[0])
    ts, to = sel.types[src], sel.types[out]
    if last in real and kind in ("sum", "max", "min", "prod"):     # the rows first: a value per row
        per_row = sel.like(src, cols=1, dtype=to.dtype)
        sel.emit(f"trow{kind}", [src, sel.like(src)], [per_row])
        return _some_rows(sel, s, kind, per_row, (*shape[:-1], 1), real - {last}, out)
    outer = int(np.prod([shape[a] for a in lead[:first]]))
    n = int(np.prod([shape[a] for a in red]))
    inner = int(np.prod([shape[a] for a in lead[first + len(red):]]))
    if shape[-1] == 1 and last not in real and red == lead[first:first + len(red)]:
        return _regrouped(sel, s, kind, src, outer, n, inner, out)
    elementwise = {"sum": "tadd", "max": "tmax", "min": "tmin", "prod": "tmul"}.get(kind)
    wide_rows = ts.cols == ts.v_col and (outer == 1 or elementwise is None)     # (whole rows of bytes)
    if last in real or red != lead[first:first + len(red)] or is_column(ts):
        sel.fail(s, f"over axes {sorted(real)} of a {list(shape)} tile (some leading axes kept)")
    whole = (to.rows, to.cols) == (to.v_row, to.v_col) and not is_column(to)
    result = out if whole else sel.alloc(vec_tile(to.v_row, to.v_col, to.dtype))
    if inner == 1:
        for o in range(outer):
            _by_columns(sel, kind, sel.subset(src, o * n, n) if outer > 1 else src,
                        sel.subset(result, o, 1) if outer > 1 else result)
    elif wide_rows and outer == 1:
        _as_wide_rows(sel, kind, src, n, inner, result)
    elif wide_rows:                             # block o copied out whole, then viewed as n wide rows
        for o in range(outer):
            block = sel.like(src, rows=n * inner)
            sel.copy(sel.subset(src, o * n * inner, n * inner), block)
            part = sel.like(result, rows=inner)
            _as_wide_rows(sel, kind, block, n, inner, part)
            sel.copy(part, sel.subset(result, o * inner, inner))
    elif elementwise is None:                   # the n rows of each kept row gathered, then reduced
        picked = sel.like(src, rows=n)
        for o in range(outer):
            for i in range(inner):
                for j in range(n):
                    sel.copy(sel.subset(src, (o * n + j) * inner + i, 1), sel.subset(picked, j, 1))
                _by_columns(sel, kind, picked, sel.subset(result, o * inner + i, 1))
    else:
        for o in range(outer):
            acc = sel.subset(result, o * inner, inner)
            sel.copy(sel.subset(src, o * n * inner, inner), acc)
            for j in range(1, n):
                sel.emit(elementwise, [acc, sel.subset(src, (o * n + j) * inner, inner)], [acc])
    if not whole:
        sel.copy(result, out)


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
    rows, cols = (shape[a] for a in sorted(moved))      # the two moved axes as the matrix they are
    src, out = ins[0], outs[0]
    if (sel.types[src].v_row, sel.types[src].v_col) != (rows, cols):     # e.g. a (3, 4, 1) tile: 12 x 1
        src = sel.like(src, rows=rows, cols=cols)
        relayout(sel, s, ins[0], src)
    to = sel.types[out]
    dst = out if (to.v_row, to.v_col) == (cols, rows) else sel.like(out, rows=cols, cols=rows)
    sel.emit("ttrans", [src, sel.like(src)], [dst])
    if dst != out:
        relayout(sel, s, dst, out)


@rule("tview")
def window(sel, s, ins, outs):
    """A window of a tile (``t[:16]``, ``pj.ops.view`` in a hand-written body), copied into the result
    tile (:func:`place`)."""
    offsets, valid = tuple(s.attr("offsets")), tuple(s.attr("valid_shape"))
    if len(valid) > 2:
        sel.fail(s, f"a window of a rank-{len(valid)} tile")
    place(sel, s, ins[0], (0,) * (2 - len(offsets)) + offsets, outs[0], (0, 0), (1,) * (2 - len(valid)) + valid)


@rule("tconcat")
def concat(sel, s, ins, outs):
    """Tiles side by side (``jnp.concatenate``, ``jnp.roll``, a RoPE half swap in a hand-written body):
    each copied into its place in the result tile (:func:`place`)."""
    rank = len(sel.shape(s, 0, ins[0]))
    if rank > 2:
        sel.fail(s, f"tiles of rank {rank} side by side")
    axis, at = int(s.attr("axis") % rank == rank - 1), [0, 0]      # along the matrices' rows or columns
    for i, piece in enumerate(ins):
        shape = matrix(sel.shape(s, i, piece))
        place(sel, s, piece, (0, 0), outs[0], tuple(at), shape)
        at[axis] += shape[axis]


def place(sel, s, src: str, start, dst: str, to, shape):
    """Copy the ``shape`` window of 2-D vec tile ``src`` at ``start`` into ``dst`` at ``to``: through
    ``pto.subset`` windows of whole rows, else row by row (PTOAS gives a subset the pitch of its own
    type: a narrower window of several rows would not see its parent's rows). Such a window starts and
    ends on 32-byte aligned columns, as every vector operand does (``pj.tiles`` checks it at trace time)."""
    for name, (r, c) in ((src, start), (dst, to)):
        t = sel.types[name]
        if t.loc != "vec" or t.blayout != "row_major":
            sel.fail(s, f"a window of a {t.blayout} {t.loc} tile")
        if c * t.np_dtype.itemsize % 32:
            sel.fail(s, f"a window at column {c} of a {t.dtype} tile starts {c * t.np_dtype.itemsize} bytes into "
                        "its rows, not at a multiple of 32 bytes (the alignment of a vector operand)")
    rows, cols = shape
    ts, td = sel.types[src], sel.types[dst]
    if start == to == (0, 0) and tuple(shape) == (ts.v_row, ts.v_col) == (td.v_row, td.v_col):     # whole tiles
        return sel.copy(src, dst)
    if cols == ts.cols == td.cols:
        return sel.copy(sel.subset(src, start[0], rows), sel.subset(dst, to[0], rows))
    if cols * ts.np_dtype.itemsize % 32:
        sel.fail(s, f"a window of {cols} {ts.dtype} columns: a row of it is not a multiple of 32 bytes")
    for g in range(rows):
        sel.copy(sel.subset(src, start[0] + g, 1, start[1], cols), sel.subset(dst, to[0] + g, 1, to[1], cols))


@rule("treshape")
def reshape(sel, s, ins, outs):
    """A tile reshaped in a hand-written body (``r[:, None]`` of a row sum): :func:`relayout`."""
    relayout(sel, s, ins[0], outs[0])


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
    shape = sel.shape(s, 0, x)
    if across_and_in_groups(src, dst) and len(shape) > 1:                      # a column, then its rows
        wide = sel.like(x, rows=src[0], cols=dst[1])                           # repeated in groups
        sel.emit("trowexpand", [sel.as_rows(x, sel.types[x], src)], [wide])
        x, src, shape = wide, (src[0], dst[1]), (*shape[:-1], dst[1])
    if src[1] == dst[1] and dst[0] % src[0] == 0 and len(shape) > 1:
        return broadcast_rows(sel, s, x, shape, outs[0], tuple(s.attr("shape")))
    sel.copy(sel.expand(s, x, src, dst), outs[0])
