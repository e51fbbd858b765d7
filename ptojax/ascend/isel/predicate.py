"""Predicate rules: compares, selects and logical ops on the real ISA's packed ``i8`` masks.

The real vector unit has no ``i1`` tiles. A compare writes a packed mask (``tcmp`` / ``tcmps``, one bit
per element) that ``tsel`` reads; a predicate that leaves the mask world (stored, converted, moved)
is also kept as bytes: an ``i8`` tile of 0 / 1 in the place of codegen's ``i1`` tile, as booleans are
one byte in GM. Either form is made from the other where a use needs it.

A mask is as wide as its compare's row pitch, which depends on the dtype compared (8 ``f32``, 16
``i16`` elements per 32 bytes). Its readers take one width: ``tand`` / ``tor`` want operands of one
valid shape, and ``tsel`` reads ``C / 8`` mask bytes per row of ``C`` elements, so masks and the tiles
selected between are aliased to the narrowest width among them (:func:`aligned`).
"""
from __future__ import annotations

import numpy as np

from .. import asm
from .broadcast import operand
from .rules import rule
from .selector import matrix

_CMP = {"teq": "eq", "tne": "ne", "tlt": "lt", "tle": "le", "tgt": "gt", "tge": "ge"}
_SWAP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
_MASK_USES = {"tsel", "tlogical_and", "tlogical_or", "tlogical_not"}
_WIDE = {"i8": "i16", "bf16": "f32"}
_CMPS_WIDE = {"i8": "i16", "bf16": "f32"}                  # what tcmps takes on A2/A3 ...
_CMP_WIDE = {"i8": "i32", "i16": "i32", "bf16": "f32"}     # ... and tcmp (no i16)


def full(sel, name: str) -> str:
    """Tile ``name`` with its valid columns widened to the whole row pitch (an alias): masks are
    packed and read as one bit stream per row of the tile's width, so compares and selects work on
    whole rows (the padding's results are never read)."""
    name = sel.row(name)
    t = sel.types[name]
    if t.v_col == t.cols:
        return name
    return sel.reshape(name, asm.TileBuf(t.loc, t.dtype, t.rows, t.cols, t.v_row, t.cols, t.blayout, t.slayout,
                                         t.fractal, t.pad))


def _per_byte(sel) -> int:
    """Elements one mask byte stands for: 8 on A2/A3 (a bit each), 1 on A5 (a byte each)."""
    return 8 if sel.arch == "a3" else 1


def _cols(sel, name: str, cols: int) -> str:
    """Tile ``name`` with ``cols`` valid columns (an alias of the same bytes)."""
    t = sel.types[name]
    if t.v_col == cols:
        return name
    return sel.reshape(name, asm.TileBuf(t.loc, t.dtype, t.rows, t.cols, t.v_row, cols, t.blayout, t.slayout,
                                         t.fractal, t.pad))


def aligned(sel, masks, tiles=()) -> tuple[list, list]:
    """``masks`` and the ``tiles`` read through them as aliases of one width: the narrowest whole rows
    among them (masks in elements, tiles widened to their row pitch by :func:`full`). Every width
    covers the valid columns, so no result is lost."""
    per = _per_byte(sel)
    tiles = [full(sel, t) for t in tiles]
    width = min([sel.types[m].v_col * per for m in masks] + [sel.types[t].cols for t in tiles])
    return [_cols(sel, m, width // per) for m in masks], [_cols(sel, t, width) for t in tiles]


def mask(sel, name: str) -> str:
    """The packed mask of predicate ``name``: made by its compare, or from its bytes (``!= 0``)."""
    if name not in sel.masks:
        nonzero(sel, name, name)
    return sel.masks[name]


def nonzero(sel, src: str, name: str):
    """The mask of predicate ``name`` := ``src != 0`` (a tile of numbers or of byte booleans)."""
    dtype = sel.types[src].dtype
    wide = _CMPS_WIDE.get(dtype, dtype)
    if wide != dtype:
        widened_src = sel.like(src, dtype=wide)
        sel.convert(src, widened_src, "RINT")
        src = widened_src
    src = full(sel, src)
    _compare_scalar(sel, src, 0, "ne", sel.mask_for(name, sel.types[src]))


def _compare_scalar(sel, src: str, value, mode: str, out: str):
    """``out`` := the mask of ``src <mode> value`` for a whole-row tile ``src``. ``tcmps``'s float EQ / NE
    are ``|x - s| < 1e-9`` (tiny values equal 0, inf unequal inf), so those compare with a filled tile."""
    dtype = sel.types[src].dtype
    if mode in ("eq", "ne") and dtype in ("f32", "f16", "bf16"):
        filled = sel.like(src)
        sel.print("texpands", [sel.const(value, dtype)], [filled])
        return sel.print("tcmp", [src, filled], [out], {"cmpMode": mode})
    sel.print("tcmps", [src, sel.const(value, dtype)], [out], {"cmpMode": mode})


def settled(sel, name: str) -> bool:
    """Whether predicate ``name``'s bytes hold its value: it has no mask (its bytes are where it came
    from: a load, a conversion), or :func:`settle` wrote them from the mask for a use outside the
    mask world."""
    return name not in sel.masks or bool(sel.uses.get(name, set()) - _MASK_USES)


def settle(sel, name: str):
    """After a predicate's mask is made: also write its bytes where a use needs them."""
    if sel.uses.get(name, set()) - _MASK_USES:
        write_bytes(sel, name)


def write_bytes(sel, name: str):
    """Predicate ``name``'s bytes (0 / 1) from its mask."""
    ones = sel.like(name, dtype="i16")
    zeros = sel.like(name, dtype="i16")
    sel.print("texpands", [sel.const(1, "i16")], [ones])
    sel.print("texpands", [sel.const(0, "i16")], [zeros])
    wide = sel.like(name, dtype="i16")
    (selected,), (ones, zeros, whole) = aligned(sel, [sel.masks[name]], [ones, zeros, wide])
    sel.print("tsel", [selected, ones, zeros, sel.like(whole)], [whole])
    sel.convert(wide, name, "RINT", saturate=False)


@rule(*_CMP)
def compare(sel, s, ins, outs):
    mode = _CMP[s.op]
    a, b = ins
    if not isinstance(sel.types[a], asm.TileBuf):
        a, b, mode = b, a, _SWAP[mode]
    if not isinstance(sel.types[b], asm.TileBuf):
        a = full(sel, widened(sel, a))
        out = sel.mask_for(outs[0], sel.types[a])
        _compare_scalar(sel, a, sel.values[b], mode, out)
    else:
        shape_a, shape_b = sel.shape(s, 0, a), sel.shape(s, 1, b)
        out_shape = tuple(np.broadcast_shapes(shape_a, shape_b))
        a, b = operand(sel, s, a, shape_a, out_shape), operand(sel, s, b, shape_b, out_shape)
        a, b = full(sel, widened(sel, a, _CMP_WIDE)), full(sel, widened(sel, b, _CMP_WIDE))
        out = sel.mask_for(outs[0], sel.types[a])
        sel.print("tcmp", [a, b], [out], {"cmpMode": mode})
    settle(sel, outs[0])


@rule("tsel")
def select(sel, s, ins, outs):
    """``where(c, a, b)``: scalars filled into tiles, broadcasts expanded, then ``tsel``."""
    cond, a, b = ins
    to = sel.types[outs[0]]
    so = (to.v_row, to.v_col)
    out_shape = tuple(np.broadcast_shapes(*s.attr("shapes"))) if s.attr("shapes") else so
    operands = []
    for i, name in ((1, a), (2, b)):
        if not isinstance(sel.types[name], asm.TileBuf):
            filled = sel.like(outs[0], dtype=_WIDE.get(to.dtype, to.dtype))
            sel.print("texpands", [sel.const(sel.values[name], sel.types[filled].dtype)], [filled])
            name = filled
        else:
            name = operand(sel, s, name, sel.shape(s, i, name), out_shape)
        operands.append(name)
    if not isinstance(sel.types[cond], asm.TileBuf):     # a constant condition picks one operand
        return sel.copy(operands[0] if sel.values[cond] else operands[1], outs[0])
    if matrix(sel.shape(s, 0, cond)) != so:
        if not settled(sel, cond):        # the broadcast reads the condition's bytes, which a
            write_bytes(sel, cond)        # predicate only selects read was never given
        cond = operand(sel, s, cond, sel.shape(s, 0, cond), out_shape)
    out = outs[0] if not sel.narrow(outs[0]) else sel.like(outs[0], dtype=_WIDE[to.dtype])
    (selected,), (*wide, whole) = aligned(sel, [mask(sel, cond)], [*(widened(sel, n) for n in operands), out])
    sel.print("tsel", [selected, *wide, sel.like(whole)], [whole])
    if out != outs[0]:
        sel.convert(out, outs[0], "RINT", saturate=False)


def select_where(sel, src: str, mode: str, value, a: str, b: str, out: str):
    """``out := where(src <mode> value, a, b)`` (``tcmps``, or ``tcmp`` where ``value`` is a tile, then
    ``tsel``) for tiles of one valid shape in a dtype compares and selects take."""
    src = full(sel, src)
    compared = sel.mask_for(sel.fresh("p"), sel.types[src])
    if isinstance(sel.types.get(value) if isinstance(value, str) else None, asm.TileBuf):
        sel.print("tcmp", [src, full(sel, value)], [compared], {"cmpMode": mode})
    else:
        _compare_scalar(sel, src, value, mode, compared)
    (compared,), (a, b, whole) = aligned(sel, [compared], [a, b, out])
    sel.print("tsel", [compared, a, b, sel.like(whole)], [whole])


def where_nan(sel, src: str, then: str, other: str, out: str):
    """``out := where(isnan(src), then, other)`` (``tcmp ne`` of ``src`` with itself, then ``tsel``)
    for float tiles of one valid shape; bf16 through f32 (A2/A3 compare and select no bf16)."""
    dtype = sel.types[out].dtype
    result = sel.like(out, dtype=_WIDE[dtype]) if sel.narrow(out) else out
    wide = {n: widened(sel, n) for n in dict.fromkeys((src, then, other))}    # each operand converted once
    src, then, other = wide[src], wide[then], wide[other]
    whole = full(sel, src)
    nan = sel.mask_for(sel.fresh("p"), sel.types[whole])
    sel.print("tcmp", [whole, whole], [nan], {"cmpMode": "ne"})
    (nan,), (then, other, picked) = aligned(sel, [nan], [then, other, result])
    sel.print("tsel", [nan, then, other, sel.like(picked)], [picked])
    if result != out:
        sel.convert(result, out, "RINT", saturate=False)


def widened(sel, name: str, wide=_WIDE) -> str:
    """``name`` in a dtype compares and selects take on A2/A3 (``i8`` as ``i16``, ``bf16`` as ``f32``)."""
    dtype = sel.types[name].dtype
    if dtype not in wide:
        return name
    out = sel.like(name, dtype=wide[dtype])
    sel.convert(name, out, "RINT")
    return out


@rule("tlogical_and", "tlogical_or")
def logical(sel, s, ins, outs):
    """``tand`` / ``tor`` of two masks; a constant operand leaves the other predicate (``x & true``) or
    a constant result (``x & false``: ``x & ~x``), a broadcast operand is expanded from its bytes."""
    is_and = s.op == "tlogical_and"
    tiles = [(i, n) for i, n in enumerate(ins) if isinstance(sel.types[n], asm.TileBuf)]
    if len(tiles) == 1:
        i, x = tiles[0]
        constant = bool(sel.values[ins[1 - i]])
        a = mask(sel, x)
        out = sel.mask_for(outs[0], sel.types[a], mask=True)
        if constant == is_and:                      # x & true, x | false: x itself
            sel.print("tand", [a, a], [out])
        else:                                       # x & false = x & ~x, x | true = x | ~x
            flipped = sel.like(a)
            sel.print("txors", [a, sel.const(-1, "i8"), sel.like(a)], [flipped])
            sel.print("tand" if is_and else "tor", [a, flipped], [out])
        return settle(sel, outs[0])
    shapes = [sel.shape(s, i, n) for i, n in enumerate(ins)]
    out_shape = tuple(np.broadcast_shapes(*shapes))
    operands = []
    for i, (name, shape) in enumerate(zip(ins, shapes)):
        if matrix(shape) != matrix(out_shape):      # the broadcast reads the predicate's bytes
            if not settled(sel, name):
                write_bytes(sel, name)
            name = operand(sel, s, name, shape, out_shape)
        operands.append(mask(sel, name))
    (a, b), _ = aligned(sel, operands)
    out = sel.mask_for(outs[0], sel.types[a], mask=True)
    sel.print("tand" if is_and else "tor", [a, b], [out])
    settle(sel, outs[0])


@rule("tlogical_not")
def logical_not(sel, s, ins, outs):
    a = mask(sel, ins[0])
    out = sel.mask_for(outs[0], sel.types[a], mask=True)
    sel.print("txors", [a, sel.const(-1, "i8"), sel.alloc(sel.types[out])], [out])   # tmp: dst's type (pto-isa)
    settle(sel, outs[0])
