"""Which GM reads the L2 serves and which come from HBM, and which writes go back to HBM: one rule for
task costs, the simulated HBM channel and the lower bound.

Per block call, for each GM tensor its tasks read: ``R`` bytes read in all, ``D = min(R, tensor
bytes)`` distinct bytes.

- **Compulsory reads**: the ``D`` distinct bytes come from HBM unless the tensor is resident in L2:
  an earlier task of the run touched it, and its footprint and those of the tensors touched since fit
  in the L2 (its reuse distance, counted in whole footprints, is at most the capacity). A tensor's
  footprint is the box spanning every region of it calls touched (all of it once a call touched all
  of it). Of a resident tensor, the bytes a call reads outside its box -- at most ``D`` and the
  tensor's bytes outside the box -- come from HBM too, so two calls reading a tensor's two halves pay
  for both. A box holds no strides: calls reading interleaved parts (``x[::2]``, then ``x[1::2]``)
  share one footprint, and the second's first reads are hits.
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


def _hull(boxes):
    """The smallest box holding ``boxes`` ((lo, hi) pairs; None: a whole tensor, which holds any)."""
    if any(box is None for box in boxes):
        return None
    return tuple(map(min, zip(*(lo for lo, _ in boxes)))), tuple(map(max, zip(*(hi for _, hi in boxes))))


class Access:
    """One block call's reads or writes of one GM tensor: ``nbytes`` in all (regions read by several
    tasks counted each time), of a tensor of ``size`` bytes and ``itemsize``-byte elements, in the
    element boxes ``boxes`` ((lo, hi) pairs)."""

    __slots__ = ("nbytes", "size", "itemsize", "boxes")

    def __init__(self, size: int, itemsize: int):
        self.nbytes, self.size, self.itemsize, self.boxes = 0, size, itemsize, []

    def add(self, lo, hi) -> int:
        """Add the region ``[lo, hi)``; returns its bytes."""
        nbytes = _volume(lo, hi) * self.itemsize
        self.nbytes += nbytes
        self.boxes.append((lo, hi))
        return nbytes


class L2:
    """Residency of GM tensors in an L2 of ``capacity`` bytes, by reuse distance in program order, and
    their dirty (written, not yet written back) bytes."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.recent = _Recency()
        self.dirty: dict = {}               # tensor -> bytes written and still in L2, least recently touched first
        self.box: dict = {}                 # tensor -> the box of it the L2 holds (None: all of it)

    def _held(self, tensor) -> int:
        """The bytes of ``tensor`` the L2 holds: what fits beside the tensors touched after it."""
        return min(max(self.capacity - self.recent.since(tensor), 0), self.recent.last[tensor][1])

    def resident(self, tensor) -> bool:
        """Whether ``tensor`` was touched and it and the tensors touched since fit in the L2."""
        return tensor in self.recent.last and self._held(tensor) == self.recent.last[tensor][1]

    def touch(self, tensor, nbytes: int, written: float = 0) -> None:
        """Mark all of ``tensor`` (``nbytes``) most recently touched, ``written`` more of its bytes dirty."""
        self.box[tensor] = None
        self._touch(tensor, nbytes, written)

    def _touch(self, tensor, nbytes: int, written: float = 0) -> None:
        self.recent.touch(tensor, nbytes)
        dirty = self.dirty.pop(tensor, None)
        if dirty is not None or written:
            self.dirty[tensor] = min(nbytes, (dirty or 0) + written)

    def _touch_boxes(self, tensor, access: Access, written: float = 0) -> None:
        """Touch ``access``'s boxes of ``tensor``: the box of it the L2 holds grows to span them (a
        tensor's part pushed out is not taken off: its dirty bytes stay its own to write back)."""
        boxes = access.boxes + ([self.box[tensor]] if tensor in self.box else [])
        box = self.box[tensor] = _hull(boxes)
        nbytes = access.size if box is None else min(_volume(*box) * access.itemsize, access.size)
        self._touch(tensor, nbytes, written)

    def _unseen(self, tensor, access: Access, distinct: float) -> float:
        """The bytes of ``access``'s ``distinct`` bytes the L2 does not hold: all unless ``tensor`` is
        resident, else those outside the box of it the L2 holds."""
        if not self.resident(tensor):
            return distinct
        box = self.box.get(tensor)
        if box is None:
            return 0
        lo, hi = box
        outside = sum(_volume(a, b) - _volume(tuple(map(max, a, lo)), tuple(map(min, b, hi))) for a, b in access.boxes)
        return min(outside * access.itemsize, distinct, access.size - self.recent.last[tensor][1])

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
        total = hbm = 0.0
        for t, a in reads.items():
            hbm += self._unseen(t, a, distinct[t]) + miss * (a.nbytes - distinct[t])   # re-reads: L2 hits
            total += a.nbytes                                                          # while W fits
        for t, a in reads.items():
            self._touch_boxes(t, a)
        for t, a in writes.items():
            self._touch_boxes(t, a, min(a.nbytes, a.size))
        return (hbm / total if total else 0.0), self.evict()


__all__ = ["L2", "Access", "reuse_miss"]
