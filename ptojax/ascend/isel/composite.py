"""Composite rules: the instruction sequences of pto-isa's tile library for clip, pow, round, the
activations (the tile ISA's only transcendentals are ``texp``, ``tlog``, ``tsqrt``, ``trsqrt`` and
``trecip``), softmax over rows and the row norms."""
from __future__ import annotations

import functools
import math

import numpy as np

from .. import asm
from .broadcast import operand
from .predicate import select_where
from .rules import rule
from .selector import is_column, matrix, vec_tile
from .vector import FINITE_MAX, scalar_binary


def expanded(composite):
    """``composite`` on its tile operands broadcast to the output's shape first, as the binary ops
    take theirs (:func:`.broadcast.operand`: a row or column expanded, rows repeated in groups)."""
    def rule_(sel, s, ins, outs):
        tiles = [n for n in ins if isinstance(sel.types[n], asm.TileBuf)]
        shapes = [sel.shape(s, i, n) for i, n in enumerate(tiles)]      # codegen's shapes: tile operands only
        out_shape = tuple(np.broadcast_shapes(*shapes))
        full = iter([operand(sel, s, n, shape, out_shape) for n, shape in zip(tiles, shapes)])
        composite(sel, s, [next(full) if isinstance(sel.types[n], asm.TileBuf) else n for n in ins], outs)
    return rule_


@rule('tclip')
@expanded
def clip(sel, s, ins, outs):
    x, lo, hi = ins
    low = sel.like(outs[0])
    bound(sel, s, x, lo, low, "max")
    bound(sel, s, low, hi, outs[0], "min")


def bound(sel, s, x, limit, out, kind):
    """``max(x, limit)`` / ``min``: a scalar limit in the tile-scalar form, a tile one elementwise."""
    if isinstance(sel.types[limit], asm.TileBuf):
        return sel.emit(f"t{kind}", [x, limit], [out])
    scalar_binary(sel, s, [x, limit], [out], kind, scalar_first=False)


def _f32(sel, value: float) -> str:
    return sel.const(value, "f32")


def in_f32(composite):
    """``composite`` of an f16 / bf16 tile computed in float32 and rounded once (as the reference
    computes it: a 16-bit sequence rounds every step — f16 tanh(1e-3) came out 2 % off, bf16
    ``x ** 0.5`` at 1e30 3.5 %); scalar operands as float32 constants."""
    def rule_(sel, s, ins, outs):
        if sel.types[outs[0]].dtype not in ("f16", "bf16") or any(
                not isinstance(sel.types[n], asm.TileBuf) and n not in sel.values for n in ins):
            return composite(sel, s, ins, outs)
        wide = [sel.widen(n, "f32") if isinstance(sel.types[n], asm.TileBuf) else sel.const(sel.values[n], "f32")
                for n in ins]
        result = sel.like(outs[0], dtype="f32")
        composite(sel, s, wide, [result])
        sel.convert(result, outs[0], "RINT")
    return rule_


_MULTIPLIED = 16          # integral exponents up to this magnitude run as products (x ** 2.0 is x * x)


@rule('tpow')
@in_f32
@expanded
def power(sel, s, ins, outs):
    """``x ** p`` as C's ``pow`` (and XLA's): ``|x| ** p = exp(p log |x|)`` (``tlog``, ``tmul``, ``texp``),
    signed for a negative base and an odd integral exponent, NaN for a negative finite base and a
    non-integral one. A constant exponent is decided here: an integral one up to 16 is a product of
    squarings (one reciprocal for a negative one), 0.5 a ``tsqrt``; a constant base is a filled tile."""
    x, p = ins
    out = outs[0]
    if not isinstance(sel.types[x], asm.TileBuf):
        if 0 < sel.values[x] < math.inf:
            return _power_of_constant(sel, float(sel.values[x]), p, out)
        x = _filled(sel, p, float(sel.values[x]))
    if isinstance(sel.types[p], asm.TileBuf):
        return _power_of_tiles(sel, x, p, out)
    v = float(sel.values[p])
    k = functools.partial(_f32, sel)
    if v == int(v) and abs(v) <= _MULTIPLIED:
        return _integer_power(sel, x, int(v), out)
    if v == 0.5:                                    # sqrt(-0) + 0 = +0; pow(-inf, 0.5) = +inf
        root, flipped = sel.like(x), sel.like(x)
        sel.emit("tsqrt", [x], [root])
        sel.emit("tadds", [root, k(0.0)], [root])
        sel.emit("tmuls", [x, k(-1.0)], [flipped])
        return select_where(sel, x, "lt", -FINITE_MAX["f32"], flipped, root, out)
    odd = v == int(v) and int(v) % 2 != 0
    r = sel.like(x)
    sel.emit("tabs", [x], [r])
    sel.emit("tlog", [r], [r])
    sel.emit("tmuls", [r, k(abs(v) - 1 if odd else v)], [r])
    sel.emit("texp", [r], [r])
    if odd:                                         # x |x| ** (p - 1): the sign of x, -0 and -inf too
        if v > 0:
            return sel.emit("tmul", [x, r], [out])
        sel.emit("tmul", [x, r], [r])
        return sel.emit("trecip", [r], [out])
    if v != int(v):                                 # a negative finite base: NaN (tlog's), -inf: |x| ** p
        nan = sel.like(x)
        sel.emit("tlog", [x], [nan])
        select_where(sel, x, "lt", 0.0, nan, r, nan)
        return select_where(sel, x, "lt", -FINITE_MAX["f32"], r, nan, out)
    sel.emit("tmuls", [r, k(1.0)], [out])


def _integer_power(sel, x, n: int, out):
    """``x ** n`` by squarings, a reciprocal last for ``n < 0`` (``x ** 0`` is 1, for NaN too)."""
    if n == 0:
        return sel.print("texpands", [_f32(sel, 1.0)], [out])
    factors, base, m = [], x, abs(n)
    while True:
        if m & 1:
            factors.append(base)
        m >>= 1
        if not m:
            break
        squared = sel.like(x)
        sel.emit("tmul", [base, base], [squared])
        base = squared
    product = factors[0]
    for i, factor in enumerate(factors[1:]):
        dst = out if n > 0 and i == len(factors) - 2 else sel.like(x)
        sel.emit("tmul", [product, factor], [dst])
        product = dst
    if n < 0:
        return sel.emit("trecip", [product], [out])
    if product != out:
        sel.emit("tmuls", [product, _f32(sel, 1.0)], [out])


def _power_of_constant(sel, c: float, y, out):
    """``c ** y`` for a constant ``c > 0``: ``exp(y log c)`` with ``log c`` to 48 bits (``L + l``, L of 12
    bits) and ``y`` split in halves of 12 bits (``h + t``), so that ``exp(h L) exp(t L + y l)`` rounds
    only at the two ``texp`` and their product (within 2 ulp: RoPE's ``10000 ** (i / d)``), where
    ``exp(y log c)`` loses ``|y log c|`` ulp to rounding the exponent."""
    k = functools.partial(_f32, sel)
    if c == 1.0:                                                          # 1 ** NaN = 1
        return sel.print("texpands", [k(1.0)], [out])
    log = math.log(c)
    high = _top_bits(log, 12)
    low = float(np.float32(log - high))
    # |y log c| at most 200, past where c ** y is inf or 0: one factor inf (0) and the other inf (0) too
    # made inf * 0 = NaN; now the other is within 2^-11 of 1. (NaN stays.)
    bound = float(np.float32(min(200.0 / abs(log), 2.0 ** 100)))
    y_clamped, split, head, tail = sel.like(y), sel.like(y), sel.like(y), sel.like(y)
    sel.emit("tmaxs", [y, k(-bound)], [y_clamped])
    sel.emit("tmins", [y_clamped, k(bound)], [y_clamped])
    sel.emit("tmuls", [y_clamped, k(4097.0)], [split])                  # Veltkamp: head = 12 top bits of y
    sel.emit("tsub", [split, y_clamped], [head])
    sel.emit("tsub", [split, head], [head])
    sel.emit("tsub", [y_clamped, head], [tail])
    sel.emit("tmuls", [head, k(high)], [head])                          # exact: 12 x 12 bits
    sel.emit("texp", [head], [head])
    sel.emit("tmuls", [tail, k(high)], [tail])
    sel.emit("tmuls", [y_clamped, k(low)], [split])
    sel.emit("tadd", [tail, split], [tail])
    sel.emit("texp", [tail], [tail])
    sel.emit("tmul", [head, tail], [out])


def _top_bits(value: float, bits: int) -> float:
    """``value`` truncated to its top ``bits`` significant bits (a float32 that many bits long)."""
    exponent = math.frexp(value)[1]
    scale = 2.0 ** (bits - exponent)
    return math.trunc(value * scale) / scale


def _filled(sel, like: str, value: float) -> str:
    t = sel.like(like)
    sel.print("texpands", [sel.const(value, sel.types[like].dtype)], [t])
    return t


def _power_of_tiles(sel, x, y, out):
    """``x ** y`` elementwise: ``exp(y log |x|)``; where x < 0 (or -0): ``-r`` for odd integral y
    (``|fmod(y, 2)| = 1``), ``r`` for even ones (0), else NaN (-inf: r); ``|x| = 1`` to the ±inf is 1,
    1 to anything and anything to 0 too."""
    r = sel.like(x)
    sel.emit("tabs", [x], [r])
    sel.emit("tlog", [r], [r])
    sel.emit("tmul", [r, y], [r])
    sel.emit("texp", [r], [r])                                          # |x| ** y
    g = sel.like(x)
    sel.emit("tfmod", [y, _filled(sel, x, 2.0)], [g])
    sel.emit("tabs", [g], [g])                                          # 1: odd, 0: even, else neither
    negative = sel.like(x)
    sel.emit("tlog", [x], [negative])                                   # NaN where x < 0
    select_where(sel, x, "lt", 0.0, negative, r, negative)
    select_where(sel, x, "lt", -FINITE_MAX["f32"], r, negative, negative)
    select_where(sel, g, "eq", 0.0, r, negative, negative)
    flipped = sel.like(x)
    sel.emit("tneg", [r], [flipped])
    select_where(sel, g, "eq", 1.0, flipped, negative, negative)
    result = sel.like(x)
    select_where(sel, x, "lt", 0.0, negative, r, result)
    sel.emit("trecip", [x], [flipped])                                  # -0: 1 / x = -inf
    select_where(sel, flipped, "lt", 0.0, negative, result, result)
    ones = _filled(sel, x, 1.0)
    sel.emit("tabs", [x], [g])
    select_where(sel, g, "eq", 1.0, ones, r, r)                         # |x| ** ±inf: 0, inf or 1
    sel.emit("tabs", [y], [g])
    select_where(sel, g, "gt", FINITE_MAX["f32"], r, result, result)
    select_where(sel, x, "eq", 1.0, ones, result, result)
    select_where(sel, y, "eq", 0.0, ones, result, out)


_EXACT = 2.0 ** 23          # f32 values this large are integers (and overflow no i32 below 2**31)


@rule("tround")
def round_half_even(sel, s, ins, outs):
    """``rint(x)``, ties to even, in f32 (f16 / bf16 widened and narrowed back, both exact): ``tcvt``
    to i32 with RINT and back; a zero result takes x's sign (``x * 0``: -0.0 for x in [-0.5, -0]);
    where ``|x| >= 2**23`` (integers already, ±inf, NaN: past what the i32 round trip keeps) x itself."""
    (x,) = ins
    out = outs[0]
    if sel.types[x].dtype != "f32":
        x = sel.widen(x, "f32")
    ints = sel.like(x, dtype="i32")
    sel.convert(x, ints, "RINT")
    rounded = sel.like(x)
    sel.convert(ints, rounded, "RINT")
    signed_zero = sel.like(x)
    sel.emit("tmuls", [x, sel.const(0.0, "f32")], [signed_zero])
    signed = sel.like(x)
    select_where(sel, rounded, "eq", 0.0, signed_zero, rounded, signed)
    magnitude = sel.like(x)
    sel.emit("tabs", [x], [magnitude])
    result = out if sel.types[out].dtype == "f32" else sel.like(x)
    select_where(sel, magnitude, "lt", _EXACT, signed, x, result)
    if result != out:
        sel.convert(result, out, "RINT", saturate=False)


def sigmoid(sel, x, out, scale=-1.0):
    """``out = 1 / (1 + exp(scale * x))``."""
    dtype = sel.types[out].dtype
    sel.emit("tmuls", [x, sel.const(scale, dtype)], [out])
    sel.emit("texp", [out], [out])
    denominator = sel.like(out)
    sel.emit("tadds", [out, sel.const(1.0, dtype)], [denominator])
    sel.emit("trecip", [denominator], [out])          # A2/A3: trecip never in place




@rule("tsigmoid")
@in_f32
def tsigmoid(sel, s, ins, outs):
    sigmoid(sel, ins[0], outs[0])


@rule('tsilu')
@in_f32
def silu(sel, s, ins, outs):
    t = sel.like(outs[0])
    sigmoid(sel, ins[0], t)
    sel.emit("tmul", [ins[0], t], outs)


# tanh(x) = x (1 + x² P(x²)) for |x| < _TANH_SMALL: a minimax fit of degree 4 in x², within 1.3 ulp
# in float32 arithmetic (highest power first; the product form keeps -0); past it,
# 1 - 2 / (exp(2|x|) + 1) loses nothing to cancellation (within 1.5 ulp).
_TANH_P = (-0.005728782, 0.020657035, -0.053743742, 0.13331462, -0.3333328)
_TANH_SMALL = 0.625


@rule('ttanh')
@in_f32
def tanh(sel, s, ins, outs):
    """``tanh(x)``: an odd polynomial near zero (``2 / (1 + exp(-2x)) - 1`` there loses x to
    cancellation: 14 % off at 1e-4), ``sign(x) (1 - e) / (1 + e)`` with ``e = exp(-2|x|)`` past it.
    Work tiles are reused in place: five live at once, as the UB holds at the default tile size."""
    (x,) = ins
    k = functools.partial(_f32, sel)
    magnitude, e, t = sel.like(x), sel.like(x), sel.like(x)
    sel.emit("tabs", [x], [magnitude])
    sel.emit("tmuls", [magnitude, k(-2.0)], [e])
    sel.emit("texp", [e], [e])
    sel.emit("tadds", [e, k(-1.0)], [t])
    sel.emit("tadds", [e, k(1.0)], [e])
    sel.emit("tdiv", [t, e], [t])                                       # -tanh(|x|)
    sel.emit("tneg", [t], [e])
    select_where(sel, x, "lt", 0.0, t, e, e)                            # the large branch
    p = sel.like(x)
    sel.emit("tmul", [x, x], [t])
    sel.emit("tmuls", [t, k(_TANH_P[0])], [p])
    sel.emit("tadds", [p, k(_TANH_P[1])], [p])
    for c in _TANH_P[2:]:
        sel.emit("tmul", [p, t], [p])
        sel.emit("tadds", [p, k(c)], [p])
    sel.emit("tmul", [p, t], [p])
    sel.emit("tadds", [p, k(1.0)], [p])
    sel.emit("tmul", [p, x], [p])                                       # the small branch
    select_where(sel, magnitude, "lt", _TANH_SMALL, p, e, outs[0])


@rule('tgelu')
@in_f32
def gelu(sel, s, ins, outs):
    (x,) = ins
    if not s.attr("approximate"):
        sel.fail(s, "(erf form)")
    # gelu(x) ~= x * sigmoid(1.5957691 * (x + 0.044715 x^3))
    dtype = sel.types[outs[0]].dtype
    t = sel.like(outs[0])
    sel.emit("tmul", [x, x], [t])
    sel.emit("tmuls", [t, sel.const(0.044715, dtype)], [t])
    sel.emit("tadds", [t, sel.const(1.0, dtype)], [t])
    sel.emit("tmul", [t, x], [t])
    sigmoid(sel, t, t, -1.5957691216057308)
    sel.emit("tmul", [x, t], outs)


def row_stats(sel, x, rows, dtype):
    """(an ``R×1`` tile, a tmp tile shaped like ``x``)."""
    return sel.like(x, cols=1, rows=rows, dtype=dtype), sel.like(x)


def row_reduce(sel, kind: str, x, tmp, out):
    """``out`` := ``trow<kind>`` of ``x`` (``tmp`` its work tile). A column ``x`` (``R×1``: a value per
    row, held column-major, which the row reductions do not read) reduces each row's one element: its
    sum and max are ``x`` itself."""
    if is_column(sel.types[x]):
        return sel.copy(x, out)
    sel.emit(f"trow{kind}", [x, tmp], [out])


def row_expand(sel, op: str, x, per_row, out):
    """``out`` := ``x`` ``op`` (sub / mul / div) its row's value in column ``per_row``: ``trowexpand<op>``,
    elementwise ``t<op>`` where ``x`` is a column itself (one element per row)."""
    sel.emit(f"t{op}" if is_column(sel.types[x]) else f"trowexpand{op}", [x, per_row], [out])


@rule('tsoftmax')
@in_f32
def softmax(sel, s, ins, outs):
    """``exp(x - max) / sum`` along the rows, ``exp(x - max)`` made in the result tile."""
    (x,) = ins
    out = outs[0]
    shape = sel.shape(s, 0, x)
    axes = tuple(a % len(shape) for a in s.attr("axes"))
    if axes != (len(shape) - 1,):
        sel.fail(s, f"over axes {list(axes)}")
    rows = matrix(shape)[0]
    m, tmp = row_stats(sel, x, rows, sel.types[x].dtype)
    row_reduce(sel, "max", x, tmp, m)
    row_expand(sel, "sub", x, m, out)
    sel.emit("texp", [out], [out])
    total = sel.like(m)
    row_reduce(sel, "sum", out, tmp, total)
    row_expand(sel, "div", out, total, out)


def normalise(sel, s, x, centre: bool):
    """``x`` scaled by ``rsqrt(mean(x²) + eps)`` (after centring when ``centre``) into a new tile."""
    shape = sel.shape(s, 0, x)
    rows, cols = matrix(shape)
    dtype = sel.types[x].dtype
    stat, tmp = row_stats(sel, x, rows, dtype)
    if centre:
        row_reduce(sel, "sum", x, tmp, stat)
        sel.emit("tmuls", [stat, sel.const(1.0 / cols, dtype)], [stat])
        centred = sel.like(x)
        row_expand(sel, "sub", x, stat, centred)
        x = centred
    sq = sel.like(x)
    sel.emit("tmul", [x, x], [sq])
    var = sel.like(stat)
    row_reduce(sel, "sum", sq, tmp, var)
    sel.emit("tmuls", [var, sel.const(1.0 / cols, dtype)], [var])
    sel.emit("tadds", [var, sel.const(float(s.attr("eps")), dtype)], [var])
    sel.emit("trsqrt", [var], [var])
    y = sel.like(x)
    row_expand(sel, "mul", x, var, y)
    return y


def affine(sel, s, y, extra, outs):
    """``y * gamma + beta`` over the columns (``y`` in place), written to ``outs``: a weight row
    ``tcolexpand<op>``, a weight of ``y``'s shape elementwise; of a column ``y`` (one element per row)
    the row of ``y`` ``trowexpand<op>`` its one weight."""
    if not extra:
        return sel.emit("tmuls", [y, sel.const(1.0, sel.types[y].dtype)], outs)
    ty = sel.types[y]
    for i, (name, op) in enumerate(extra):
        gshape = matrix(sel.shape(s, 1 + i, name))
        t = sel.types[name]
        dst = outs[0] if i == len(extra) - 1 else y
        if gshape == (t.v_row, t.v_col) == (ty.v_row, ty.v_col):
            sel.emit(f"t{op}", [y, name], [dst])
        elif is_column(ty) and gshape == (1, 1):
            sel.emit(f"trowexpand{op}", [sel.row(y), sel.as_cell(name, t)], [sel.row(dst)])
        else:
            row = name if (t.v_row, t.v_col) == (1, gshape[1]) else sel.reshape(name, vec_tile(1, gshape[1], t.dtype))
            sel.emit(f"tcolexpand{op}", [y, row], [dst])
        y = dst


@rule('trms_norm')
@in_f32
def rms_norm(sel, s, ins, outs):
    x, *gamma = ins
    y = normalise(sel, s, x, centre=False)
    affine(sel, s, y, [(g, "mul") for g in gamma], outs)


@rule('tlayer_norm')
@in_f32
def layer_norm(sel, s, ins, outs):
    x, *rest = ins
    y = normalise(sel, s, x, centre=True)
    ops = (["mul"] if s.attr("has_gamma") else []) + (["add"] if s.attr("has_beta") else [])
    affine(sel, s, y, list(zip(rest, ops)), outs)
