"""Which GM reads the L2 serves and which come from HBM, and which writes go back to HBM: one rule for
task costs, the simulated HBM channel and the lower bound.

Per block call, for each GM tensor its tasks read: ``R`` bytes read in all, ``D = min(R, tensor
bytes)`` distinct bytes.

- **Compulsory reads**: the ``D`` distinct bytes come from HBM unless the tensor is resident in L2:
  an earlier task of the run touched it, and its footprint and those of the tensors touched since fit
  in the L2 (its reuse distance, counted in whole footprints, is at most the capacity). A tensor's
  footprint is the bytes of it calls touched (the union of their regions, through any reshaped view:
  runs of byte offsets). Of a resident tensor, the bytes a call reads outside its footprint -- at most
  ``D`` -- come from HBM too, so two calls reading a tensor's two halves, or its even and odd rows or
  columns, pay for both. (A call reading a tensor in more than 65 536 runs holds runs less than an L2
  line apart as one: a large tensor's even columns then hold its odd ones too, as whole lines would.)
- **Re-reads** (the other ``R - D`` bytes, tiles read by several blocks) hit L2 while the call's
  working set ``W`` (the distinct bytes it reads) fits in the L2; past it a fraction ``1 - L2 / W``
  of them misses to HBM.
- **Writes** land in L2 (write-back); a call's outputs stream out, are not re-read by it and do not
  count in its working set, but they are touched (resident for later calls, touched after the call's
  reads). The distinct bytes a call writes are dirty: added to the tensor's dirty bytes, at most its
  size.
- **Write-back**: the L2 holds, of each tensor, what of it fits in the capacity left by the tensors
  touched after it (most recent first, whole footprints); after each call, the dirty bytes of a tensor
  past what it holds are written back to HBM by that call -- the call's own writes past the capacity,
  and dirty data of earlier calls that this call's traffic pushed out. So at most ``capacity`` dirty
  bytes are ever left in L2; they are written back after the run, unpriced. A copy task (which writes
  its copy through to HBM) pays for the dirty bytes its touches push out the same way.

The rule depends on the program order only, never on the schedule, so every schedule pays the same
HBM bytes: the cost model prices them at the per-core HBM rate, the simulated run streams them
through one die-wide HBM channel, and the lower bound's ``bandwidth`` term is their total over the
die's HBM bandwidth.
"""
from __future__ import annotations

import math

import numpy as np


MANY_RUNS = 1 << 16     # runs of one access past which close ones (under LINE bytes apart) merge
LINE = 512              # bytes: the L2's line in PyPTO's cost-model config (HW notes §3.6)


def reuse_miss(working_set: float, capacity: float) -> float:
    """The fraction of re-reads that miss an L2 of ``capacity`` bytes under a ``working_set``."""
    if working_set <= capacity or working_set <= 0:
        return 0.0
    return 1.0 - capacity / working_set


class _Recency:
    """Bytes of the tensors touched since a point of the program order: each tensor counted once, at its
    last touch (a Fenwick tree over touch numbers, so that a run of many small tensors -- a scan's steps
    -- costs a logarithm per touch, not a walk of all of them)."""

    def __init__(self):
        self.tree = [0] * 1024
        self.last: dict = {}                # tensor -> (its last touch number, its bytes)
        self.count = self.total = 0

    def _add(self, i: int, delta: int) -> None:
        i += 1
        while i <= len(self.tree):
            self.tree[i - 1] += delta
            i += i & -i

    def _upto(self, i: int) -> int:         # bytes of the touches numbered below ``i``
        out = 0
        while i > 0:
            out += self.tree[i - 1]
            i -= i & -i
        return out

    def touch(self, tensor, nbytes: int) -> None:
        if tensor in self.last:
            i, old = self.last[tensor]
            self._add(i, -old)
            self.total -= old
        if self.count == len(self.tree):                 # full: twice the room, rebuilt
            self.tree = [0] * (2 * len(self.tree))
            for i, b in self.last.values():
                self._add(i, b)
        self.last[tensor] = (self.count, nbytes)
        self._add(self.count, nbytes)
        self.total += nbytes
        self.count += 1

    def since(self, tensor) -> int:
        """Bytes of the tensors touched after ``tensor`` (touched) last was."""
        i, _ = self.last[tensor]
        return self.total - self._upto(i + 1)


def _volume(lo, hi) -> int:
    n = 1
    for a, b in zip(lo, hi):
        n *= max(0, b - a)
    return n


class Access:
    """One block call's reads or writes of one GM tensor of ``shape`` and ``itemsize``-byte elements:
    ``nbytes`` in all (regions read by several tasks counted each time), in the element boxes ``boxes``
    (``(shape, lo, hi)``: the box ``[lo, hi)`` of the tensor seen as ``shape``, a reshape of it)."""

    __slots__ = ("nbytes", "shape", "size", "itemsize", "boxes", "_runs")

    def __init__(self, shape: tuple, itemsize: int):
        self.nbytes, self.shape, self.itemsize, self.boxes = 0, tuple(shape), itemsize, {}
        self.size = _volume((0,) * len(self.shape), self.shape) * itemsize
        self._runs = False

    def add(self, lo, hi, shape=None) -> int:
        """Add the box ``[lo, hi)`` (of the tensor seen as ``shape``, by default its own); returns its bytes."""
        nbytes = _volume(lo, hi) * self.itemsize
        self.nbytes += nbytes
        self.boxes[self.shape if shape is None else tuple(shape), tuple(lo), tuple(hi)] = None
        self._runs = False
        return nbytes

    def runs(self) -> tuple | None:
        """The bytes of the tensor the boxes cover, as sorted disjoint runs ``(starts, ends)`` of byte
        offsets (int64 arrays); None: all of it. Past :data:`MANY_RUNS` runs, runs of a box less than
        :data:`LINE` bytes apart (a column-strided view's elements) count as one, with the bytes between."""
        if self._runs is False:
            self._runs = self._covered()
        return self._runs

    def _covered(self):
        alike: dict = {}                            # (shape, extents) -> the boxes' first corners
        for shape, lo, hi in self.boxes:
            alike.setdefault((shape, tuple(b - a for a, b in zip(lo, hi))), []).append(lo)
        starts, ends = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for (shape, extent), corners in alike.items():
            if not shape or extent == shape:
                return None
            if min(extent) <= 0:
                continue
            j = len(shape) - 1                      # dims j+1.. are whole: runs along dim j are contiguous
            while extent[j] == shape[j]:
                j -= 1
            strides = np.cumprod((1,) + shape[:0:-1], dtype=np.int64)[::-1]
            width = extent[j] * int(strides[j])     # elements per run
            while (j and len(corners) * math.prod(extent[:j]) > MANY_RUNS
                   and (strides[j - 1] - width) * self.itemsize < LINE):
                j -= 1                              # runs along dim j close together: one run
                width += (extent[j] - 1) * int(strides[j])
            first = np.zeros(1, np.int64)           # each run's first element, from a box's corner
            for d in range(j):
                first = np.add.outer(first, np.arange(extent[d], dtype=np.int64) * strides[d]).ravel()
            first = np.add.outer(np.asarray(corners, np.int64) @ strides, first).ravel() * self.itemsize
            starts.append(first)
            ends.append(first + width * self.itemsize)
        runs = _merged(np.concatenate(starts), np.concatenate(ends))
        return None if _bytes(runs) == self.size else runs


def _merged(starts, ends) -> tuple:
    """The union of the byte runs ``[starts, ends)`` as sorted disjoint runs."""
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    new = np.ones(len(starts), bool)
    new[1:] = starts[1:] > np.maximum.accumulate(ends)[:-1]
    at = np.flatnonzero(new)
    return starts[at], np.maximum.reduceat(ends, at)


def _bytes(runs) -> int:
    return int((runs[1] - runs[0]).sum())


def _union(held, runs, size: int) -> tuple | None:
    """The union of two sets of runs (``()``: none; None: all ``size`` bytes); None if it is all."""
    if runs is None or held == ():
        return runs
    union = _merged(np.concatenate((held[0], runs[0])), np.concatenate((held[1], runs[1])))
    return None if _bytes(union) == size else union


class L2:
    """Residency of GM tensors in an L2 of ``capacity`` bytes, by reuse distance in program order, and
    their dirty (written, not yet written back) bytes."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.recent = _Recency()
        self.dirty: dict = {}               # tensor -> bytes written and still in L2, least recently touched first
        self.footprint: dict = {}           # tensor -> the runs of it calls touched (None: all of it)

    def _held(self, tensor) -> int:
        """The bytes of ``tensor`` the L2 holds: what fits beside the tensors touched after it."""
        return min(max(self.capacity - self.recent.since(tensor), 0), self.recent.last[tensor][1])

    def resident(self, tensor) -> bool:
        """Whether ``tensor`` was touched and it and the tensors touched since fit in the L2."""
        return tensor in self.recent.last and self._held(tensor) == self.recent.last[tensor][1]

    def touch(self, tensor, nbytes: int, written: float = 0) -> None:
        """Mark all of ``tensor`` (``nbytes``) most recently touched, ``written`` more of its bytes dirty."""
        self.footprint[tensor] = None
        self._touch(tensor, nbytes, written)

    def _touch(self, tensor, nbytes: int, written: float = 0) -> None:
        self.recent.touch(tensor, nbytes)
        dirty = self.dirty.pop(tensor, None)
        if dirty is not None or written:
            self.dirty[tensor] = min(nbytes, (dirty or 0) + written)

    def _grown(self, tensor, access: Access):
        """``tensor``'s footprint grown by ``access``'s bytes (None: all of it)."""
        held = self.footprint.get(tensor, ())
        return None if held is None else _union(held, access.runs(), access.size)

    def _touch_runs(self, tensor, grown, size: int, written: float = 0) -> None:
        """Touch ``tensor`` (``size`` bytes), its footprint now ``grown`` (a tensor's part pushed out is not
        taken off: its dirty bytes stay its own to write back)."""
        self.footprint[tensor] = grown
        self._touch(tensor, size if grown is None else _bytes(grown), written)

    def _unseen(self, tensor, grown, size: int, distinct: float) -> float:
        """The bytes of a call's ``distinct`` bytes of ``tensor`` the L2 does not hold: all unless it is
        resident, else those outside its footprint (what the call's bytes grow it by: ``grown``)."""
        if not self.resident(tensor):
            return distinct
        held = self.footprint[tensor]
        if held is None:
            return 0
        return min((size if grown is None else _bytes(grown)) - _bytes(held), distinct)

    def evict(self) -> float:
        """Write back the dirty bytes the L2 no longer holds; returns how many. The least recently touched
        dirty tensors first: once one is held whole, every later one is too."""
        evicted, gone = 0.0, []
        for tensor, dirty in self.dirty.items():         # (no copy: a loop's calls leave many dirty tensors)
            held = self._held(tensor)
            if dirty > held:
                evicted += dirty - held
                if held:
                    self.dirty[tensor] = held
                else:
                    gone.append(tensor)
            if held == self.recent.last[tensor][1]:
                break
        for tensor in gone:
            del self.dirty[tensor]
        return evicted

    def hbm_fraction(self, reads: dict, writes: dict) -> tuple[float, float]:
        """(The fraction of one block call's read bytes that come from HBM, the dirty bytes it writes
        back to HBM); the call's tensors are then marked touched, its writes dirty. ``reads`` and
        ``writes``: tensor -> its :class:`Access`."""
        distinct = {t: min(a.nbytes, a.size) for t, a in reads.items()}
        miss = reuse_miss(sum(distinct.values()), self.capacity)
        grown = {t: self._grown(t, a) for t, a in reads.items()}
        total = hbm = 0.0
        for t, a in reads.items():          # re-reads hit the L2 while the working set fits
            hbm += self._unseen(t, grown[t], a.size, distinct[t]) + miss * (a.nbytes - distinct[t])
            total += a.nbytes
        for t, a in reads.items():
            self._touch_runs(t, grown[t], a.size)
        for t, a in writes.items():
            self._touch_runs(t, self._grown(t, a), a.size, min(a.nbytes, a.size))
        return (hbm / total if total else 0.0), self.evict()


__all__ = ["L2", "Access", "reuse_miss"]
