"""PTOAS's PlanMemory placement of one address space's buffers (``MemPlan`` in PTOPlanMemory.cpp).

Input: the buffers in planning order, each ``(bytes, lives)`` with ``lives`` a tuple of inclusive
``(gen, kill)`` operation intervals (:mod:`.liveness`). PTOAS then:

* places a lone buffer at 0, and buffers whose sizes sum to less than the space side by side, without
  reuse (``IsEnoughForBuffersNoReuse``);
* else places them one by one on an *outline*: a partition of the space into bounds, each carrying
  the lives of every buffer placed over it. A buffer goes at the start of the first bound from which
  consecutive bounds, none of whose lives meets the buffer's, add up to its size (``SpecAlloc``). The
  covered bounds become one bound with all their lives and the buffer's (the part of the last bound
  past the buffer keeps that bound's lives), so a region that once held several buffers keeps all
  their lives: this, not the free addresses, decides where a later buffer fits;
* where a buffer fits nowhere, rolls back (``ApplyFailStrategy``): it undoes placements back to the
  last one made at the top speculation level whose address still leaves room for the failing buffer,
  places that one again anywhere but at its old address and those after it at the lower level (which
  cannot be rolled back to again), and continues. Rolled back past the first buffer, it restarts with
  *split* bounds — a buffer over several bounds leaves one bound per covered bound, each with its own
  lives and the buffer's — and where that fails too, reports "vec overflow" with the top of a plan of
  the same kind on an unbounded space.

The speculation levels beyond this (level 1 pairs single buffers with multi-buffered ones, level 2
keeps DMA and scalar-touched buffers apart) never apply to the text ptojax writes: every buffer is
single and PTOAS marks none as DMA or scalar, so a level-2 placement is a level-0 one.
"""
from __future__ import annotations

from bisect import bisect_right

ALIGN = 32                                 # bytes: PTOAS's UB alignment on A2/A3 and A5 (256 bits)
UB = 196608                                # bytes of UB on A2/A3 (1572864 bits; A5: 253952)
_INF = float("inf")
_TOP, _LOW = 2, 0                          # speculation levels: the first try, and the fallback


def _merge(lives) -> tuple:
    """Sorted lives, those that meet or touch (``gen <= kill + 1``) joined (``MergeBufferVec``)."""
    out = []
    for begin, end in sorted(lives):
        if out and begin <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return tuple(out)


def _union(b: tuple, a) -> tuple:
    """:func:`_merge` of a merged life list ``b`` and the lives ``a``."""
    for begin, end in a:
        first = bisect_right(b, (begin, _INF)) - 1              # the last life starting by ``begin``
        if first < 0 or b[first][1] < begin - 1:
            first += 1
        stop = bisect_right(b, (end + 1, _INF))                 # lives from ``first`` to here touch it
        if first < stop:
            begin, end = min(begin, b[first][0]), max(end, b[stop - 1][1])
        b = b[:first] + ((begin, end),) + b[stop:]
    return b


def _meet(a, b) -> bool:
    """Whether two sorted, disjoint life lists share an operation (``GetOverlapBufferLife``)."""
    for begin, end in a:
        at = bisect_right(b, (end, _INF)) - 1       # the last life of ``b`` starting by ``end``
        if at >= 0 and b[at][1] >= begin:
            return True
    return False


def _peak(entries) -> int:
    """The most bytes live at one operation: a lower bound of any plan's top."""
    steps = {}
    for size, lives in entries:
        for begin, end in lives:
            steps[begin] = steps.get(begin, 0) + size
            steps[end + 1] = steps.get(end + 1, 0) - size
    live = peak = 0
    for at in sorted(steps):
        live += steps[at]
        peak = max(peak, live)
    return peak


class _Planner:
    """One outline plan over ``space`` bytes; ``split``: a buffer leaves one bound per bound it covers."""

    def __init__(self, entries, space, split):
        self.entries, self.space, self.split = entries, space, split
        self.offset = [0] * len(entries)
        self.reset()

    def reset(self):
        self.outline = [((), 0, self.space)]          # bounds: (lives, offset, extent)
        self.history = []                             # (entry, level, position, bounds inserted, replaced)
        self.level, self.start_at, self.avoid = _TOP, 1, (None, None)   # avoid: (entry, offset)
        self.next = 0

    def place(self, k: int, level: int) -> bool:
        """Place entry ``k`` at the first outline bound it fits from (``SpecAlloc``)."""
        size, lives = self.entries[k]
        outline, i = self.outline, 0
        while i < len(outline):
            offset, total, j = outline[i][1], 0, i
            while j < len(outline):
                total += outline[j][2]
                if (k, offset) == self.avoid or _meet(lives, outline[j][0]):
                    i = j
                    break
                if total >= size:
                    self.offset[k] = offset
                    self._cover(k, level, i, j, total)
                    return True
                j += 1
            i += 1
        return False

    def _cover(self, k, level, first, last, total):
        """Replace bounds ``first..last`` by the buffer's bound(s) and the rest of the last (``UpdateOutline``)."""
        size, lives = self.entries[k]
        covered, at = self.outline[first:last + 1], self.offset[k]
        if self.split:
            new = [(_union(b[0], lives), b[1], b[2] if n < len(covered) - 1 else at + size - b[1])
                   for n, b in enumerate(covered)]
        elif len(covered) == 1:
            new = [(_union(covered[0][0], lives), at, size)]
        else:
            new = [(_merge(lives + tuple(life for b in covered for life in b[0])), at, size)]
        rest = total - size
        if rest:
            tail = covered[-1]
            new.append((tail[0], tail[1] + tail[2] - rest, rest))
        self.outline[first:last + 1] = new
        self.history.append((k, level, first, len(new), covered))

    def roll_back(self, need: int) -> None:
        """Undo placements back to a top-level one that leaves ``need`` bytes room at its address
        (``RollBackForAllocFail``); the next entry to place is that one, at the level it had."""
        self.start_at = max(self.start_at, self.next)
        while self.history:
            k, level, first, count, covered = self.history.pop()
            self.outline[first:first + count] = covered
            self.next, self.level = k, level
            if level > _LOW:
                self.avoid = (k, self.offset[k] if k else None)
                if need > self.space if k == 0 else self.offset[k] + need > self.space:
                    continue
                return

    def run(self) -> bool:
        """Plan every entry (``PlanMemAddressOfWholeLocalBuffer``); False where PTOAS gives up."""
        while self.next < len(self.entries):
            k = self.next
            if self.place(k, _TOP if self.level == _TOP else _LOW):
                if k == self.start_at:            # past the entry that failed: the top level again
                    self.level = _TOP
                self.next = k + 1
                continue
            self.roll_back(self.entries[k][0])
            if self.level > _LOW and self.next > 0:
                self.level -= 1
            elif not self.split:
                self.split = True
                self.reset()
            else:
                return False
        return True

    def top(self) -> int:
        return max(o + e[0] for o, e in zip(self.offset, self.entries))


def plan(entries, capacity: int = UB) -> tuple[list[int] | None, int]:
    """PTOAS's plan of ``entries`` (``[(bytes, lives)]`` in planning order) in ``capacity`` bytes:
    ``(offsets, top)``, or where PTOAS fails, ``(None, the requirement it reports)`` (the top of its
    plan on an unbounded space)."""
    sizes = [size for size, _ in entries]
    if len(entries) < 2 or sum(sizes) < capacity:
        offsets = [sum(sizes[:k]) for k in range(len(sizes))]
        return (offsets if sum(sizes) <= capacity else None), sum(sizes)
    planner = _Planner(entries, capacity, split=False)
    if _peak(entries) <= capacity and planner.run():          # past the peak, no plan can succeed
        return planner.offset, planner.top()
    unbounded = _Planner(entries, 1 << 62, split=True)     # PlanMemAddressForLevel0
    for k in range(len(entries)):
        unbounded.place(k, _LOW)
    return None, unbounded.top()
