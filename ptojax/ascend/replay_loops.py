"""Repeated trips of a replayed task graph rolled into one ``lax.fori_loop``.

The runtime orchestrates a kernel's loops (``lax.scan``, ``fori_loop``, a Python loop) trip by trip,
so the replay's step list (:mod:`~ptojax.ascend.replay_graph`) repeats: the same block calls at the
same block indices, on GM buffers that each trip allocates afresh. :func:`roll` finds the longest
such repetitions and keeps one where every buffer of a trip plays the same part in every trip:

* **outer** — the same buffer in every trip (an input, an accumulator written in place);
* **fresh** — a buffer each trip allocates (zeros, a constant, a fill: its initial value per trip,
  stacked into a table where the trips differ), read by no later trip but the next one and, for the
  last trip's, after the loop;
* **carried** — the buffer another part held in the previous trip (the carry of a ``scan``: the
  previous trip's fresh buffer, or a carry passed on), the first trip's a buffer from before the loop.

Anything else (a buffer that changes part but not as a carry, an earlier trip's buffer read after the
loop) leaves the steps unrolled. The loop's state holds the outer, fresh and carried buffers under the
first trip's buffer ids, so the first trip's steps are its body.
"""
from __future__ import annotations

import dataclasses

import numpy as np

MIN_TRIPS = 4              # fewer repetitions stay unrolled
MAX_PERIOD = 256           # the longest trip (steps) looked for
MAX_TABLE = 64 << 20       # bytes of per-trip initial values a loop may carry as a table


@dataclasses.dataclass(frozen=True)
class Step:
    """A block call (``name`` at ``blocks`` on GM buffers ``keys``) or a copy (``name`` None,
    ``keys`` = (source, destination))."""

    name: str | None
    keys: tuple
    blocks: tuple = ()

    def signature(self) -> tuple:
        seen: dict = {}
        return self.name, self.blocks, tuple(seen.setdefault(k, len(seen)) for k in self.keys)


@dataclasses.dataclass(frozen=True)
class Loop:
    """``trips`` runs of ``body`` (the first trip's steps on the first trip's buffer ids, rolled in
    turn). A trip starts from the buffers ``carry`` as the previous trip left them: each carried
    buffer of ``moves`` (carried id, id) takes the other's value, each fresh buffer its initial value
    (``inits[id]``: one array, or a table indexed by the trip); ``last``: id → the last trip's buffer
    in its place, for the ones read after the loop."""

    body: tuple
    trips: int
    moves: tuple
    inits: dict
    last: dict
    outer: tuple               # the buffers every trip shares

    @property
    def carry(self) -> tuple:
        return tuple(sorted({*self.outer, *(q for _, q in self.moves), *self.last}))

    @property
    def steps(self) -> int:
        """Steps written out."""
        return sum(s.steps if isinstance(s, Loop) else 1 for s in self.body)


def roll(steps: list, initial, layout, outputs: set) -> list:
    """``steps`` with its repetitions of at least :data:`MIN_TRIPS` trips as :class:`Loop` items.
    ``initial(id)``: a buffer's initial value (NumPy) or None for a kernel input; ``layout(id)``: its
    (size, dtype); ``outputs``: the buffer ids read after ``steps``."""
    n = len(steps)
    if n < MIN_TRIPS:
        return list(steps)
    codes: dict = {}
    sig = np.array([codes.setdefault(s.signature(), len(codes)) for s in steps])
    refs: dict = {}
    for i, s in enumerate(steps):
        for k in s.keys:
            refs.setdefault(k, []).append(i)
    for k in outputs:
        refs.setdefault(k, []).append(n)
    periods = np.arange(1, min(MAX_PERIOD, n // MIN_TRIPS) + 1)
    trips = np.stack([1 + _runs(sig[p:] == sig[:-p], n) // p for p in periods])    # trips[p - 1, i]
    cover = np.where(trips >= MIN_TRIPS, trips * periods[:, None], 0)
    out, i = [], 0
    while i < n:
        loop = None
        for p in np.argsort(-cover[:, i], kind="stable")[:4]:
            if cover[p, i] == 0:
                break
            loop = _longest(steps, i, int(periods[p]), int(trips[p, i]), refs, initial, layout)
            if loop:
                break
        if loop:
            out.append(dataclasses.replace(loop, body=tuple(roll(list(loop.body), _inner(loop), layout,
                                                                 set(loop.carry)))))
            i += loop.trips * len(loop.body)
        else:
            out.append(steps[i])
            i += 1
    return out


def _longest(steps, start: int, period: int, trips: int, refs: dict, initial, layout) -> Loop | None:
    """The loop of the most trips, up to ``trips``, at ``start``: two loops in a row with the same
    body (two layers of an RNN) repeat as one but roll as two."""
    loop = _loop(steps, start, period, trips, refs, initial, layout)
    if loop:
        return loop
    best, lo, hi = None, MIN_TRIPS, trips - 1
    while lo <= hi:                                # the trips that roll are a prefix: bisect its end
        mid = (lo + hi) // 2
        found = _loop(steps, start, period, mid, refs, initial, layout)
        if found:
            best, lo = found, mid + 1
        else:
            hi = mid - 1
    return best


def _inner(loop: Loop):
    """The initial values within a trip of ``loop``: a fresh buffer's where every trip starts it alike,
    None (set before the trip) for the rest."""
    def value(k):
        v = loop.inits.get(k)
        return v if v is not None and v.ndim == 1 else None
    return value


def _runs(equal: np.ndarray, n: int) -> np.ndarray:
    """Per position of ``equal`` (padded to ``n``), how many entries from it on are True."""
    equal = np.concatenate([equal, np.zeros(n - len(equal), bool)])
    at = np.arange(n)
    next_false = np.minimum.accumulate(np.where(equal, n, at)[::-1])[::-1]
    return next_false - at


def _classes(keys: list) -> list:
    """Each key's class: the order of its first occurrence."""
    seen: dict = {}
    return [seen.setdefault(k, len(seen)) for k in keys]


def _loop(steps, start: int, period: int, trips: int, refs: dict, initial, layout) -> Loop | None:
    """The repetition at ``start`` as a :class:`Loop`, or None where a buffer's part differs between
    trips (see the module docstring)."""
    keys = [[k for s in steps[start + t * period:start + (t + 1) * period] for k in s.keys] for t in range(trips)]
    classes = _classes(keys[0])
    if any(_classes(trip) != classes for trip in keys[1:]):
        return None                                           # buffers alias differently in some trip
    firsts = []                                               # each class's first position
    for i, c in enumerate(classes):
        if c == len(firsts):
            firsts.append(i)
    table = np.array([[trip[i] for i in firsts] for trip in keys]).T.tolist()    # [class][trip] -> buffer id
    bounds = [start + t * period for t in range(trips + 1)]

    inits, outer = {}, set()
    for ids in table:
        if len(set(ids)) == 1:
            outer.add(ids[0])
        elif len(set(ids)) == trips and all(bounds[t] <= refs[k][0] < bounds[t + 1] for t, k in enumerate(ids)):
            values = [initial(k) for k in ids]
            if any(v is None or v.shape != values[0].shape or v.dtype != values[0].dtype for v in values):
                return None
            same = all(v.tobytes() == values[0].tobytes() for v in values[1:])     # -0.0 is not 0.0
            if not same and sum(v.nbytes for v in values) > MAX_TABLE:
                return None
            inits[ids[0]] = values[0] if same else np.stack(values)
    moves, known = [], {ids[0]: ids for ids in table if ids[0] in inits or ids[0] in outer}
    while len(known) < len(table):                          # carried: the previous trip's buffer of a known class
        found = [(ids, q) for ids in table if ids[0] not in known for q, prev in known.items()
                 if q not in outer and prev[:-1] == ids[1:]]
        if not found:
            return None
        for ids, q in found:
            if layout(ids[0]) != layout(q):
                return None
            moves.append((ids[0], q))
            known[ids[0]] = ids
    last = {ids[-1] for ids in table if ids[0] not in outer}
    if any(refs[k][-1] >= bounds[-1] for ids in table if ids[0] not in outer for k in ids if k not in last):
        return None                                           # an earlier trip's buffer read after the loop
    return Loop(tuple(steps[start:bounds[1]]), trips, tuple(moves), inits,
                {ids[0]: ids[-1] for ids in table if ids[0] not in outer and refs[ids[-1]][-1] >= bounds[-1]},
                tuple(sorted(outer)))


__all__ = ["Loop", "Step", "roll"]
