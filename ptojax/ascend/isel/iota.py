"""The index rule: codegen's ``tci`` (a tile of a symbolic-size iota: ``base + step * index + j``) as
the real ``tci``, its start computed in ``i32`` from the grid index. (``ptoas`` folds an ``index`` to
``i32`` cast of the grid index's own cast from ``i64`` into one it cannot emit; a multiply by the
step, at least 8 — a tile's 32 bytes of i32 — keeps them apart.)"""
from __future__ import annotations

from .rows import _arith
from .rules import rule


@rule("tci")
def iota(sel, s, ins, outs):
    index = sel.fresh("ci")
    sel.types[index] = "i32"
    sel.lines.append(f"{index} = arith.index_cast {ins[0]} : index to i32")
    start = _arith(sel, "muli", index, sel.const(s.attr("step"), "i32"), "i32")
    if s.attr("base"):
        start = _arith(sel, "addi", start, sel.const(s.attr("base"), "i32"), "i32")
    sel.print("tci", [start], outs, {"descending": "false"})
