"""The UB a selected function needs, planned as PTOAS's PlanMemory plans it.

PTOAS gives each ``pto.alloc_tile`` buffer an address range live from the instruction that first
uses it to the one that last does (``pto.treshape`` and ``pto.subset`` aliases are their buffer's
uses; a buffer used inside an ``scf.for`` it was first used before stays live to the loop's end),
places the buffers that ``tload`` / ``tstore`` touch first, each at the lowest 32-byte aligned
address free for its lifetime, and reports ``vec overflow`` when the plan passes the UB.
:func:`ub_plan` is the high-water mark of that first-fit plan: at least the live bytes' peak, and
where buffers of several sizes leave holes, more (a bf16 row max at 16 x 1000: 193 KB live, 289 KB
planned here, 225 KB by PTOAS, whose placement search goes further).
"""
from __future__ import annotations

import re

from .. import asm

_ALLOC = re.compile(r"(%[\w.]+) = pto\.alloc_tile : !pto\.tile_buf<loc=vec, dtype=(\w+), rows=(\d+), cols=(\d+)")
_ALIAS = re.compile(r"(%[\w.]+) = pto\.(?:treshape|subset) (%[\w.]+)")
_NAME = re.compile(r"%[\w.]+")
ALIGN = 32                                           # bytes: PTOAS's UB alignment on A2/A3 and A5


def _lifetimes(lines) -> tuple[dict, dict, set]:
    """(buffer -> bytes, buffer -> (first, last) line, the buffers a ``tload`` / ``tstore`` touches)."""
    root, size, first, last, dma = {}, {}, {}, {}, set()
    loops, spans = [], []
    for i, line in enumerate(lines):
        text = line.strip()
        alloc = _ALLOC.match(text)
        if alloc:
            name, dtype, rows, cols = alloc.groups()
            root[name] = name
            size[name] = -(-int(rows) * int(cols) * asm.DTYPES[dtype].itemsize // ALIGN) * ALIGN
            continue
        alias = _ALIAS.match(text)
        if alias and alias.group(2) in root:
            root[alias.group(1)] = root[alias.group(2)]
        if text.startswith("scf.for"):
            loops.append(i)
        elif text.startswith("scf.if"):
            loops.append(None)                       # a branch keeps no buffer live past itself
        elif text == "}" and loops:
            start = loops.pop()
            if start is not None:
                spans.append((start, i))
        for name in _NAME.findall(text):
            if name in root:
                buffer = root[name]
                first.setdefault(buffer, i)
                last[buffer] = i
                if text.startswith(("pto.tload", "pto.tstore")):
                    dma.add(buffer)
    life = {}
    for buffer, begin in first.items():
        end = last[buffer]
        for start, stop in spans:                    # used in a loop it was live before: to the loop's end
            if begin < start <= end <= stop:
                end = stop
        life[buffer] = (begin, end)
    return size, life, dma


def ub_plan(function_text: str) -> int:
    """Bytes of UB one ``func.func``'s text needs: the high-water mark of the first-fit plan."""
    size, life, dma = _lifetimes(function_text.splitlines())
    placed, top = [], 0
    for buffer in [b for b in life if b in dma] + [b for b in life if b not in dma]:
        begin, end = life[buffer]
        taken = sorted((at, at + n) for at, n, (b, e) in placed if b <= end and begin <= e)
        at = 0
        for low, high in taken:
            if at + size[buffer] <= low:
                break
            at = max(at, high)
        placed.append((at, size[buffer], (begin, end)))
        top = max(top, at + size[buffer])
    return top


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


__all__ = ["functions", "ub_plan"]
