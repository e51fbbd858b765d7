"""Quantisation rules: dynamic symmetric int8 quantisation per row and its inverse, as ``f32``
vector sequences (A2/A3 has no ``tquant``; ``tdequant`` takes i8/i16 sources only)."""
from __future__ import annotations

import numpy as np

from .. import asm
from . import predicate
from .broadcast import operand
from .composite import row_expand, row_reduce
from .rules import rule
from .selector import matrix

_QMAX = 127.0
_F32_MAX = 3.4028234663852886e38
_F32_TINY = 2.0 ** -126          # the smallest normal float32


def _f32(sel, name: str) -> str:
    if sel.types[name].dtype == "f32":
        return name
    wide = sel.like(name, dtype="f32")
    sel.convert(name, wide, "RINT")
    return wide


@rule("tquant")
def quantize(sel, s, ins, outs):
    """``scale = amax|x| / 127`` per row, ``q = sat(rint(x * (127 / amax)))`` (0 where amax is 0), as the
    reference: a row with a NaN has a NaN amax (and q 0), an element that is NaN or ±inf q 0."""
    (x,) = ins
    shape = sel.shape(s, 0, x)
    if tuple(a % len(shape) for a in s.attr("axes")) != (len(shape) - 1,):
        sel.fail(s, f"over axes {list(s.attr('axes'))} of a {list(shape)} tile")
    rows = matrix(shape)[0]
    q, scale = outs
    x = _f32(sel, x)
    magnitude, tmp = sel.like(x), sel.like(x)
    sel.emit("tabs", [x], [magnitude])
    amax, nan = sel.like(x, cols=1), sel.like(x, cols=1)
    row_reduce(sel, "max", magnitude, tmp, amax)                        # (skips a NaN past the row's first)
    sel.emit("tmins", [magnitude, sel.const(_F32_MAX, "f32")], [magnitude])
    sel.emit("tmuls", [magnitude, sel.const(0.0, "f32")], [magnitude])  # 0; NaN where x is NaN
    row_reduce(sel, "sum", magnitude, tmp, nan)
    sel.emit("tadd", [amax, nan], [amax])                               # a row with a NaN: amax NaN
    sel.emit("tadds", [amax, sel.const(0.0, "f32")], [amax])           # tabs(-0) is -0: amax +0, not -0
    mult = sel.like(amax)
    sel.emit("tmaxs", [amax, sel.const(_F32_TINY, "f32")], [mult])     # (pto-isa asserts a divisor != 0)
    sel.emit("tdivs", [sel.const(_QMAX, "f32"), mult], [mult])          # amax 0 or below 127 / FLT_MAX: inf
    scaled, q32 = magnitude, tmp                                        # (their tiles, free again)
    row_expand(sel, "mul", x, mult, scaled)                             # NaN: x NaN or 0 * inf, amax NaN, x ±inf
    sel.print("texpands", [sel.const(0.0, "f32")], [q32])
    predicate.where_nan(sel, scaled, q32, scaled, q32)                  # NaN to 0 (tcvt would clamp it to 127)
    sel.convert(q32, q, "RINT", saturate=True)
    ts = sel.types[scale]
    out = sel.as_column(scale, ts, rows) if ts.dtype == "f32" else sel.like(amax)
    sel.emit("tdivs", [amax, sel.const(_QMAX, "f32")], [out])
    if out != scale and ts.dtype != "f32":
        sel.convert(out, sel.as_column(scale, ts, rows), "RINT")


@rule("tdequant")
def dequantize(sel, s, ins, outs):
    """``f32(q) * f32(scale)``, either broadcast to the output (:func:`.broadcast.operand`; the scale over
    rows or columns fused: ``trowexpandmul`` / ``tcolexpandmul``), then the result dtype."""
    q, scale = ins
    to = sel.types[outs[0]]
    so = (to.v_row, to.v_col)
    result = outs[0] if to.dtype == "f32" else sel.like(outs[0], dtype="f32")
    if not isinstance(sel.types[scale], asm.TileBuf):       # one scale for the tile
        sel.emit("tmuls", [_f32(sel, q), sel.const(float(sel.values[scale]), "f32")], [result])
        return sel.convert(result, outs[0], "RINT") if result != outs[0] else None
    shape_q, shape_s = sel.shape(s, 0, q), sel.shape(s, 1, scale)
    out_shape = tuple(np.broadcast_shapes(shape_q, shape_s))
    ss = matrix(shape_s)
    q32 = operand(sel, s, _f32(sel, q), shape_q, out_shape)
    s32 = _f32(sel, scale)
    if ss == so:
        sel.emit("tmul", [q32, s32], [result])
    elif ss == (so[0], 1):
        sel.emit("trowexpandmul", [q32, sel.as_rows(s32, sel.types[s32], ss)], [result])
    elif ss == (1, so[1]):
        sel.emit("tcolexpandmul", [q32, s32], [result])
    else:
        sel.emit("tmul", [q32, operand(sel, s, s32, shape_s, out_shape)], [result])
    if result != outs[0]:
        sel.convert(result, outs[0], "RINT")
