"""The UB a selected function needs, planned as PTOAS's PlanMemory plans it.

PTOAS lowers each ``pto.alloc_tile`` to a ``memref.alloc`` (its ``rows x cols`` storage) and plans the
buffers of one function per address space (``vec`` here). Its ``MemLivenessAnalysis`` numbers the
operations in program order — an ``scf.for`` gets a begin and an end number around its body, an
``scf.if`` a number before each branch and one after it — and gives each buffer one life
``[gen, kill]`` (both ends included):

* *gen*: the first operation that writes the buffer (through any alias: ``pto.treshape``,
  ``pto.subset``, ``pto.bitcast`` views): its ``outs``, a ``tmp`` scratch operand (every op whose tmp
  PTOAS declares written, all but ``tgather``), or any operand of ``tgetval`` — or the begin of an
  ``scf.for`` at which the buffer is live (allocated before the loop, used in it or after it in the
  loop's block), whichever comes first. A buffer nothing writes is never planned.
* *kill*: where the block of its ``alloc_tile`` is past its last use: that use, or the end of the loop
  or branch of that block that holds it.

The buffers go to the placement (:mod:`.memplan`) in the order of their gens (an op's ``outs`` before
its tmp; buffers a loop's begin gens in the order they were allocated). PTOAS's in-place pairs
(``GenerateInplaceList``) are empty for PTO ops, and its DMA-first reorder
(``GetReorderRootStorageEntry``) keeps this order: nothing registers DMA buffers, and ptojax's text
touches no UB buffer with ``memref.load`` / ``memref.store``.
"""
from __future__ import annotations

import random
import re
from typing import NamedTuple

from .. import asm
from ..instructions import TABLE
from . import memplan

_ALLOC = re.compile(r"(%[\w.]+) = pto\.alloc_tile : !pto\.tile_buf<loc=(\w+), dtype=(\w+), rows=(\d+), cols=(\d+)")
_ALIAS = re.compile(r"(%[\w.]+) = pto\.(?:treshape|subset|bitcast|bind_tile) (%[\w.]+)")
_OP = re.compile(r"(?:%[\w.]+ = )?pto\.(\w+) ")
_NAME = re.compile(r"%[\w.]+")
ALIGN = memplan.ALIGN
UB = memplan.UB
_ORDERS = 8                                        # orders tried of the buffers a loop's begin gens
_FALLBACK = 4096                                   # bytes: AllocToPointerCast's step for unplanned buffers


class Buffer(NamedTuple):
    """One ``vec`` tile buffer: its name, bytes (32-byte aligned) and life ``(gen, kill)`` in PTOAS's
    operation numbering."""
    name: str
    size: int
    begin: int
    end: int


def _bytes(dtype: str, rows: int, cols: int) -> int:
    bits = asm.DTYPES[dtype].itemsize * 8 if dtype in asm.DTYPES and dtype != "i1" else int(re.sub(r"\D", "", dtype))
    return -(-rows * cols * bits // (8 * ALIGN)) * ALIGN


def _operands(text: str, keyword: str) -> list[str]:
    """The SSA names of an op's ``ins(...)`` / ``outs(...)`` group, before its types."""
    at = text.find(keyword + "(")
    if at < 0:
        return []
    group = text[at + len(keyword) + 1:]
    return _NAME.findall(group[:group.find(":")])


def _written_ins(op: str, names: list[str]) -> list[str]:
    """The ``ins`` operands ``op`` writes: its tmp scratch tile (every op but ``tgather``), or all of
    ``tgetval``'s (PTOAS gens the tile ``tgetval`` reads)."""
    if op == "tgetval":
        return names
    row = TABLE.get(op)
    if row is None or op == "tgather":
        return []
    return [n for n, role in zip(names, row.roles(len(names))) if role == "tmp"]


def _allocs(function_text: str) -> list[tuple[str, int, str]]:
    """``(name, bytes, dtype)`` of each ``vec`` tile allocated, in program order."""
    return [(name, _bytes(dtype, int(rows), int(cols)), dtype)
            for name, loc, dtype, rows, cols in _ALLOC.findall(function_text) if loc == "vec"]


def buffers(function_text: str) -> list[Buffer]:
    """The ``vec`` buffers of one ``func.func``'s text with their lives, in PTOAS's planning order (the
    buffers one loop's begin gens: in the order they were allocated)."""
    return _analyse(function_text)[0]


def _analyse(function_text: str) -> tuple[list[Buffer], list[str], list[list[int]]]:
    """(:func:`buffers`, the tiles used but never written, which PTOAS does not plan, and the positions
    in :func:`buffers` of each group of two or more that one loop's begin gens)."""
    lines = [line.strip() for line in function_text.splitlines()]
    root, size, home = {}, {}, {}                  # name -> buffer; buffer -> bytes; buffer -> (region, line)
    uses, writes = {}, {}                          # buffer -> lines using it / writes in order (line, rank)
    region_of, parent, region_end, construct_end = [], {0: None}, {}, {}
    stack, loops, regions = [(0, None)], [], 0     # (region, its construct's header line)
    for i, text in enumerate(lines):
        region_of.append(stack[-1][0])
        if text.endswith("{") and (text.startswith(("scf.for", "scf.if")) or " = scf." in text):
            regions += 1
            parent[regions] = (stack[-1][0], i)
            stack.append((regions, i))
            if "scf.for" in text:
                loops.append(i)
            continue
        if text.startswith("}") and len(stack) > 1:
            closed, header = stack.pop()
            region_end[closed] = i
            if text.startswith("} else"):
                regions += 1
                parent[regions] = parent[closed]
                stack.append((regions, header))
            else:
                construct_end[header] = i
            continue
        alloc = _ALLOC.match(text)
        if alloc:
            name, loc, dtype, rows, cols = alloc.groups()
            if loc == "vec":
                root[name] = name
                size[name], home[name] = _bytes(dtype, int(rows), int(cols)), (stack[-1][0], i)
            continue
        alias = _ALIAS.match(text)
        if alias and alias.group(2) in root:
            root[alias.group(1)] = root[alias.group(2)]
        for name in _NAME.findall(text):
            if name in root and not (alias and name == alias.group(1)):
                uses.setdefault(root[name], []).append(i)
        op = _OP.match(text)
        if op and not alias:
            written = _operands(text, "outs") + _written_ins(op.group(1), _operands(text, "ins"))
            for rank, name in enumerate(written):
                if name in root and root[name] not in writes:
                    writes[root[name]] = (i, rank)
    region_end[0] = len(lines)

    def ancestors(region):
        while region is not None:
            yield region
            region = parent[region][0] if parent[region] else None

    out, unwritten = [], []
    for buffer, at in uses.items():
        own, defined = home[buffer]
        begin = writes.get(buffer)
        for loop in loops:                        # live at a loop's begin: gen there
            if begin is not None and loop >= begin[0]:
                break
            block = region_of[loop]
            if loop > defined and own in ancestors(block) and any(loop <= u <= region_end[block] for u in at):
                begin = (loop, -1, defined)
                break
        if begin is None:
            unwritten.append(buffer)
            continue
        end, block = at[-1], region_of[at[-1]]
        while block != own:                       # a use in a loop or branch: killed at its end
            block, header = parent[block]
            end = construct_end[header]
        out.append((begin, Buffer(buffer, size[buffer], begin[0], end)))
    out.sort(key=lambda p: p[0])
    ties = {}                                     # a loop's begin -> the positions of the buffers it gens
    for at, (key, _) in enumerate(out):
        if key[1] < 0:
            ties.setdefault(key[0], []).append(at)
    return [b for _, b in out], unwritten, [at for at in ties.values() if len(at) > 1]


def ub_plan(function_text: str, capacity: int = UB) -> int:
    """Bytes of UB one ``func.func``'s text needs as PTOAS plans it: the top of its plan, or where that
    plan fails (PTOAS's "vec overflow"), the requirement PTOAS reports (more than ``capacity``).

    PTOAS orders the buffers a loop's begin gens as a pointer-keyed set iterates, which changes from run
    to run; where that order can matter (the buffers do not fit side by side), this is the worst of the
    plans of a few orders of each such group — a failing one first. A tile read but never written is
    not planned; PTOAS's ``AllocToPointerCast`` puts it past the plan (from the highest planned address
    rounded up to 4 KiB, in 4 KiB steps), and so does the top here."""
    planned, unwritten, ties = _analyse(function_text)
    orders = [planned]
    if ties and sum(b.size for b in planned) >= capacity:
        orders += [_reordered(planned, ties, how) for how in range(_ORDERS)]
    worst = None
    for order in orders:
        offsets, top = memplan.plan([(b.size, ((b.begin, b.end),)) for b in order], capacity)
        if offsets is not None and unwritten:
            at = -(-max(offsets, default=0) // _FALLBACK) * _FALLBACK
            for name, size, dtype in reversed(_allocs(function_text)):
                if name in unwritten:
                    top = max(top, at + size)
                    at += -(-max(size, 1) // _FALLBACK) * _FALLBACK if dtype != "bf16" else _FALLBACK
        outcome = (offsets is None, top)
        worst = outcome if worst is None else max(worst, outcome)
    return worst[1]


def _reordered(planned: list[Buffer], ties: list[list[int]], how: int) -> list[Buffer]:
    """``planned`` with each group a loop's begin gens reversed, by size down, by size up, or shuffled."""
    order, shuffle = list(planned), random.Random(how)
    for at in ties:
        group = [planned[k] for k in at]
        group = (group[::-1] if how == 0 else sorted(group, key=lambda b: -b.size) if how == 1
                 else sorted(group, key=lambda b: b.size) if how == 2 else shuffle.sample(group, len(group)))
        for k, b in zip(at, group):
            order[k] = b
    return order


def functions(module_text: str) -> dict[str, str]:
    """``{symbol: text}`` of each ``func.func`` of a module printed by :func:`~.selector.module`."""
    out, name, body = {}, None, []
    for line in module_text.splitlines():
        head = re.match(r"\s*func\.func @(\w+)\(", line)
        if head:
            name, body = head.group(1), [line]
        elif name is not None:
            body.append(line)
            if line.rstrip() == "  }":
                out[name], name = "\n".join(body), None
    return out


__all__ = ["Buffer", "buffers", "functions", "ub_plan"]
