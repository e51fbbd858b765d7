"""Interleaved columns: codegen's ``tdeinterleave`` (``x[..., j::k]``, a RoPE's pairs) as ``tgather``'s
mask pattern, which keeps every second or fourth column of a tile's rows (the sort recipes' struct splits
too), and ``tinterleave`` (the pairs written back) as one ``tscatter`` per stream, by the positions
``k * i + p`` made with ``tci``."""
from __future__ import annotations

from .. import asm
from .rules import rule
from .selector import vec_tile

PATTERNS = {(2, 0): "P0101", (2, 1): "P1010", (4, 0): "P0001", (4, 1): "P0010", (4, 2): "P0100",
            (4, 3): "P1000"}      # (step, offset) -> mask pattern


def mask_gather(sel, src, dst, pattern):
    """``tgather`` mask form (the pattern stands in the place of the indices operand): the kept elements
    of every row of ``src`` as one row-major stream into ``dst``."""
    sel.lines.append(f"pto.tgather ins({src}, {{maskPattern = #pto.mask_pattern<{pattern}>}} : {sel.types[src]}) "
                     f"outs({dst} : {sel.types[dst]})")


@rule("tdeinterleave")
def deinterleave(sel, s, ins, outs):
    """Columns ``offset::step`` of a tile. The gather writes one stream over the destination's storage,
    so its rows must be whole (no padding columns): the tile pass gives it rows of whole 32 bytes."""
    dst = sel.types[outs[0]]
    if dst.cols != dst.v_col:
        sel.fail(s, f"columns {s.attr('offset')}::{s.attr('step')} into {dst.v_col} of {dst.cols} {dst.dtype} "
                    "columns: the rows of the selected stream must fill the tile's rows")
    mask_gather(sel, ins[0], outs[0], PATTERNS[(s.attr("step"), s.attr("offset"))])


@rule("tinterleave")
def interleave(sel, s, ins, outs):
    """Column ``j`` of tile ``p`` into column ``j * k + p`` of the result: ``tscatter`` of each tile by its
    elements' row-major positions times ``k`` plus ``p`` (indices of the data's width; the tile pass keeps
    a 2-byte tile's positions below 2**15). The positions are one ``tci`` row seen as the tiles' shape, all of
    its rows valid (a tail block's rows past the valid ones land past what is stored; a dynamic row count
    leaves the positions static)."""
    piece, dst = sel.types[ins[0]], sel.types[outs[0]]
    if piece.cols != piece.v_col or dst.cols != dst.v_col:
        sel.fail(s, f"{len(ins)} tiles of {piece.v_col} of {piece.cols} {piece.dtype} columns: the rows must fill "
                    "the tiles' rows (the positions are row-major)")
    index = {4: "i32", 2: "i16"}[piece.np_dtype.itemsize]
    line = sel.alloc(vec_tile(1, piece.rows * piece.cols, index))
    sel.print("tci", [sel.const(0, index)], [line], {"descending": "false"})
    sel.print("tmuls", [line, sel.const(len(ins), index)], [line])
    at = sel.reshape(line, asm.TileBuf("vec", index, piece.rows, piece.cols, piece.rows, piece.cols))
    for p, src in enumerate(ins):
        if p:
            sel.print("tadds", [at, sel.const(1, index)], [at])
        sel.print("tscatter", [src, at], outs)
