"""The UB a selected function needs, planned as PTOAS's PlanMemory plans it.

PTOAS gives each ``pto.alloc_tile`` buffer an address range live over the buffer's life as its
``MemLivenessAnalysis`` has it (``pto.treshape`` and ``pto.subset`` aliases are their buffer's uses):
from the instruction that first uses it — or from the start of an earlier ``scf.for`` at which it is
live, allocated before the loop and used in it or after it in the loop's block — to the point where
the alloc's block is past its last use (a use inside a loop or branch of that block: the loop's or
branch's end). A tile allocated at the top of a function and first used after its first loop is thus
live from that loop on, which is why selection allocates each tile where it is first used
(:func:`~.selector.deferred`). PTOAS places the buffers that ``tload`` / ``tstore`` touch first, each
at the lowest 32-byte aligned address free for its lifetime, and reports ``vec overflow`` when the
plan passes the UB (where all the buffers together fit it places them apart, without reuse).
:func:`ub_plan` is the high-water mark of that first-fit plan: at least the live bytes' peak, and
where buffers of several sizes leave holes, more (a bf16 row max at 16 x 1000: 224 832 bytes here as
by PTOAS, whose placement search may still go further than first fit where this plan has holes).
"""
from __future__ import annotations

import re

from .. import asm

_ALLOC = re.compile(r"(%[\w.]+) = pto\.alloc_tile : !pto\.tile_buf<loc=vec, dtype=(\w+), rows=(\d+), cols=(\d+)")
_ALIAS = re.compile(r"(%[\w.]+) = pto\.(?:treshape|subset) (%[\w.]+)")
_NAME = re.compile(r"%[\w.]+")
ALIGN = 32                                           # bytes: PTOAS's UB alignment on A2/A3 and A5


def _lifetimes(lines) -> tuple[dict, dict, set]:
    """(buffer -> bytes, buffer -> (first, last) line, the buffers a ``tload`` / ``tstore`` touches).

    A buffer lives as PTOAS's ``MemLivenessAnalysis`` has it: from its first use, or from the start of
    an earlier ``scf.for`` at which it is live (after its ``alloc_tile``, and used in the loop or after
    it in the loop's block), to where the block of its ``alloc_tile`` is past its last use (a use in a
    loop or branch of that block: the loop's or branch's end)."""
    root, size, home, uses, real, dma = {}, {}, {}, {}, {}, set()
    parent, ends, stack, fors, block = {None: None}, {}, [None], [], []
    for i, line in enumerate(lines):
        text = line.strip()
        block.append(stack[-1])                       # blocks by their header's line; None: the function's
        alloc = _ALLOC.match(text)
        if alloc:
            name, dtype, rows, cols = alloc.groups()
            root[name], home[name] = name, (stack[-1], i)
            size[name] = -(-int(rows) * int(cols) * asm.DTYPES[dtype].itemsize // ALIGN) * ALIGN
            continue
        alias = _ALIAS.match(text)
        if alias and alias.group(2) in root:
            root[alias.group(1)] = root[alias.group(2)]
        if text.startswith(("scf.for", "scf.if")) and text.endswith("{"):
            if text.startswith("scf.for"):
                fors.append(i)
            parent[i] = stack[-1]
            stack.append(i)
        elif text == "}" and len(stack) > 1:
            ends[stack.pop()] = i
        for name in dict.fromkeys(_NAME.findall(text)):         # in order: the plan places by first use
            if name in root and not (alias and name == alias.group(1)):
                buffer = root[name]
                uses.setdefault(buffer, []).append(i)
                if not alias:                         # defining an alias starts no life
                    real.setdefault(buffer, i)
                if text.startswith(("pto.tload", "pto.tstore")):
                    dma.add(buffer)
    ends[None] = len(lines)

    def within(b, outer):
        while b != outer and b is not None:
            b = parent[b]
        return b == outer

    life = {}
    for buffer, at in uses.items():
        (own, defined), begin, end = home[buffer], real.get(buffer, at[0]), at[-1]
        for loop in fors:                             # live at a loop: from the loop's start
            if loop >= begin:
                break
            if loop > defined and within(block[loop], own) and any(loop <= u <= ends[block[loop]] for u in at):
                begin = loop
                break
        b = block[end]
        while b != own and b is not None:             # a use in a loop or branch: to its end
            end, b = ends[b], parent[b]
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
