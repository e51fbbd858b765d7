"""Vector rules: moves, elementwise arithmetic (broadcasts as ``trowexpand*`` / ``tcolexpand*``),
tile-scalar forms, conversions, reductions (``trow*`` with a tmp tile and an ``R×1`` result,
``tcol*``), compares as packed ``i8`` masks, and selects."""
from __future__ import annotations

from .. import asm
from .rules import rule
from .selector import matrix

_ROUNDING = {"rint": "RINT", "round": "ROUND", "floor": "FLOOR", "ceil": "CEIL", "trunc": "TRUNC"}
_CMP = {"teq": "eq", "tne": "ne", "tlt": "lt", "tle": "le", "tgt": "gt", "tge": "ge"}
_SWAP_CMP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
_BINARY = {"tadd": "add", "tsub": "sub", "tmul": "mul", "tdiv": "div", "tmax": "max", "tmin": "min"}
_COMMUTES = {"tadd", "tmul", "tmax", "tmin"}
_REDUCE = {"tsum": "sum", "tamax": "max", "tamin": "min", "tprod": "prod", "targmax": "argmax", "targmin": "argmin"}
_UNARY = ("texp", "tlog", "tsqrt", "trsqrt", "trecip", "tabs", "tneg", "trelu", "tnot")


@rule("tstore", "tmov")
def move(sel, s, ins, outs):
    sel.print(s.op, ins, outs)


@rule(*_UNARY)
def unary(sel, s, ins, outs):
    sel.emit(s.op, ins, outs)


@rule('tadd', 'tsub', 'tmul', 'tdiv', 'tmax', 'tmin')
def binary(sel, s, ins, outs):
    op = s.op
    out_shape = sel.shape(s, len(ins), outs[0]) if s.attr("shapes") else None
    a, b = ins
    ta, tb, to = sel.types[a], sel.types[b], sel.types[outs[0]]
    sa = (ta.v_row, ta.v_col)
    sb = (tb.v_row, tb.v_col)
    so = (to.v_row, to.v_col)
    if s.attr("shapes"):
        sa, sb = matrix(sel.shape(s, 0, a)), matrix(sel.shape(s, 1, b))
        so = matrix(out_shape) if out_shape is not None else so
        for i, (name, logical) in enumerate(((a, sel.shape(s, 0, a)), (b, sel.shape(s, 1, b)))):
            if not _flattens(logical, out_shape or logical):
                sel.fail(s, f"broadcasting {list(logical)} over a leading axis of {list(out_shape)}")
    if sa == so and sb == so:
        return sel.emit(op, ins, outs)
    if sa != so and op in _COMMUTES and sb == so:
        a, b, sa, sb = b, a, sb, sa
    if sa != so:
        a = sel.expand(s, a, sa, so)
    if sb == so:
        return sel.emit(op, [a, b], outs)
    if sb == (so[0], 1) and so[1] > 1:
        return sel.emit(f"trowexpand{_BINARY[op]}", [a, b], outs)
    if sb == (1, so[1]) and so[0] > 1:
        return sel.emit(f"tcolexpand{_BINARY[op]}", [a, b], outs)
    sel.emit(op, [a, sel.expand(s, b, sb, so)], outs)


def scalar_binary(sel, s, ins, outs, base):
    scalar_first = s.attr("scalar_first")
    tile, scalar = (ins[1], ins[0]) if scalar_first else (ins[0], ins[1])
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
    src, dst = sel.types[ins[0]], sel.types[outs[0]]
    if src.loc == "acc":                     # the accumulator converts on its way out (FIXPIPE)
        sel.renamed[outs[0]] = ins[0]
        return
    if "i1" in (src.dtype, dst.dtype):
        sel.fail(s, "on a predicate")
    sel.convert(ins[0], outs[0], _ROUNDING[s.attr("rounding", "rint")], s.attr("saturate"))

# ---- reductions


@rule('tsum', 'tamax', 'tamin', 'tprod', 'targmax', 'targmin')
def reduce(sel, s, ins, outs):
    kind = _REDUCE[s.op]
    (src,) = ins
    shape = sel.shape(s, 0, src)
    axes = tuple(a % len(shape) for a in s.attr("axes")) if shape else ()
    rows, cols = matrix(shape)
    out = outs[0]
    to = sel.types[out]
    if s.attr("dtype") is not None and s.attr("dtype") != sel.types[src].dtype:
        sel.fail(s, f"accumulating {sel.types[src].dtype} in {s.attr('dtype')}")
    if axes == (len(shape) - 1,) and len(shape) >= 1:
        sel.emit(f"trow{kind}", [src, sel.like(src)], [sel.as_column(out, to, rows)])
    elif axes == (0,) and len(shape) == 2:
        extra = [sel.like(src)] if kind in ("argmax", "argmin") else []
        sel.emit(f"tcol{kind}", [src, *extra], [out])
    elif axes == tuple(range(len(shape))) and len(shape) == 2 and kind not in ("argmax", "argmin"):
        column = sel.like(src, cols=1, dtype=to.dtype)
        sel.emit(f"trow{kind}", [src, sel.like(src)], [column])
        sel.emit(f"tcol{kind}", [column], [sel.as_cell(out, to)])
    else:
        sel.fail(s, f"over axes {list(axes)} of a {list(shape)} tile")


@rule('teq', 'tne', 'tlt', 'tle', 'tgt', 'tge')
def compare(sel, s, ins, outs):
    mode = _CMP[s.op]
    a, b = ins
    ta, tb = sel.types[a], sel.types[b]
    mask = sel.mask_for(outs[0], sel.types[outs[0]])
    if not isinstance(ta, asm.TileBuf):
        a, b, ta, tb, mode = b, a, tb, ta, _SWAP_CMP[mode]
    if not isinstance(tb, asm.TileBuf):
        return sel.emit("tcmps", [a, b], [mask], {"cmpMode": f"#pto<cmp {mode}>"})
    if (ta.v_row, ta.v_col) != (tb.v_row, tb.v_col):
        sel.fail(s, "comparing tiles of different shapes")
    sel.emit("tcmp", [a, b], [mask], {"cmpMode": f"#pto<cmp {mode}>"})


@rule('tsel')
def select(sel, s, ins, outs):
    cond, a, b = ins
    mask = sel.masks.get(cond)
    if mask is None:
        sel.fail(s, "on a predicate that no compare in this program made")
    ta, tb, to = (sel.types[n] for n in (a, b, outs[0]))
    shapes = {(t.v_row, t.v_col) for t in (ta, tb, to) if isinstance(t, asm.TileBuf)}
    if len(shapes) != 1 or not isinstance(ta, asm.TileBuf) or not isinstance(tb, asm.TileBuf):
        sel.fail(s, "with broadcast or scalar operands")
    tmp = sel.like(outs[0])
    sel.emit("tsel", [mask, a, b, tmp], outs)


@rule('texpand')
def broadcast(sel, s, ins, outs):
    (x,) = ins
    src = matrix(sel.shape(s, 0, x)) if s.attr("shapes") else (sel.types[x].v_row, sel.types[x].v_col)
    to = sel.types[outs[0]]
    dst = (to.v_row, to.v_col)
    if src == (dst[0], 1):
        return sel.emit("trowexpand", [sel.as_rows(x, sel.types[x], src)], outs)
    if src == (1, dst[1]):
        return sel.emit("tcolexpand", [x], outs)
    tmp = sel.expand(s, x, src, dst)
    sel.emit("tmuls", [tmp, sel.const(1, to.dtype)], outs)


def _flattens(shape, out) -> bool:
    """Whether operand ``shape`` broadcast to ``out`` stays a 2-D row or column broadcast once both
    are flattened to matrices (leading dims collapse)."""
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    if shape == tuple(out):
        return True
    lead, lead_out = shape[:-1], tuple(out[:-1])
    return all(d == 1 for d in lead) or lead == lead_out
