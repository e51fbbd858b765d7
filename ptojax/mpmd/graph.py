"""Tasks and their dependency graph.

A task is one block instance: a callable that does its work, a predicted duration, the core kind
that runs it, a label, and the GM regions it reads and writes. Dependencies come from region
overlap in program order — read-after-write, write-after-read, write-after-write — and each task
keeps a fan-in counter of unfinished predecessors (PTO2's ``fanin``). The graph is validated before
a run (acyclic, every wait satisfiable) and ranked by HEFT's upward rank for the ready queues.
"""
from __future__ import annotations

import dataclasses
import gc
import itertools
from typing import Callable

import numpy as np

from ..errors import PtoError


class PtoTaskError(PtoError, RuntimeError):
    """A task failed while running."""


class PtoTaskGraphError(PtoError, ValueError):
    """A task graph that cannot run: a cycle, or a task waiting on something that never completes."""


def _meet(lo, hi, lo2, hi2) -> bool:
    """Whether the boxes ``[lo, hi)`` and ``[lo2, hi2)`` overlap."""
    if len(lo) == 1:                                    # the common case, without the loop
        return lo[0] < hi2[0] and lo2[0] < hi[0]
    for a, b, c, d in zip(lo, hi, lo2, hi2):
        if not (a < d and c < b):
            return False
    return True


@dataclasses.dataclass(frozen=True, slots=True)
class Region:
    """A box ``[lo, hi)`` of GM buffer ``buffer``."""

    buffer: int
    lo: tuple[int, ...]
    hi: tuple[int, ...]

    def overlaps(self, other: "Region") -> bool:
        return self.buffer == other.buffer and _meet(self.lo, self.hi, other.lo, other.hi)

    @property
    def size(self) -> int:
        n = 1
        for a, b in zip(self.lo, self.hi):
            n *= max(0, b - a)
        return n


@dataclasses.dataclass(eq=False, slots=True)
class Task:
    """One unit of work for one core."""

    tid: int
    name: str                       # program name
    core: str                       # core kind, e.g. "AIC" or "AIV"
    label: str
    cost: float                     # predicted seconds on its core
    run: Callable[[], None] | None
    reads: tuple[Region, ...] = ()
    writes: tuple[Region, ...] = ()
    index: tuple[int, ...] = ()     # tile coordinates of the block instance
    stage: int = 0                  # the block call it came from (for the barrier-per-stage baseline)
    bytes: int = 0                  # GM bytes it moves
    batch: tuple | None = None      # (group, item): tasks of one group may run together (Plan.batches)
    scatters: frozenset = frozenset()   # buffers it writes only by unique-index scatters: the other tasks
                                        # of its block call (stage) that do so write other rows of them
    binding: int = -1               # the entry of Plan.bindings its body reads its GM arrays from
    hbm: int = 0                    # GM bytes it reads from HBM (the L2 rule, mpmd/l2.py); the rest hit L2
    preds: list = dataclasses.field(default_factory=list)
    succs: list = dataclasses.field(default_factory=list)
    rank: float = 0.0

    def describe(self) -> str:
        index = "(" + ",".join(map(str, self.index)) + ")"
        label = f" label '{self.label}'" if self.label else ""
        return f"task {self.tid} '{self.name}{index}'{label} on {self.core}"


class _Boxes(list):
    """The boxes ``(lo, hi, position)`` accessed so far in one GM buffer (its reads, or its writes), in
    the order they were added, indexed so that :meth:`near` finds the ones a new box may meet without
    scanning them all.

    The index is a uniform grid hash, built once the buffer has more than ``_SCAN`` boxes, with the
    extent of the first box as cell size (at least 1 per dim). A box is listed in every cell it covers;
    one that covers more than ``_CELLS`` cells, or whose rank differs from the first box's, goes on the
    ``large`` list instead, which every query scans. A query covering more than ``_CELLS`` cells scans all.
    """

    __slots__ = ("step", "cells", "large")
    _SCAN = 8
    _CELLS = 64

    def __init__(self):
        self.cells: dict[tuple, list[int]] | None = None    # cell -> indices of its boxes, once built

    def _cells(self, lo, hi):
        """The cells of box ``[lo, hi)``, or None for more than ``_CELLS`` cells or another rank.

        Per dim, ``_meet``'s test ``a < d and c < b`` implies that the integer ranges
        ``[min(a, b - 1), max(a, b - 1)]`` and ``[min(c, d - 1), max(c, d - 1)]`` intersect — for empty
        and inverted boxes too — so boxes that meet share a cell.
        """
        if len(lo) != len(self.step) or len(hi) != len(self.step):
            return None
        ranges, count = [], 1
        for a, b, step in zip(lo, hi, self.step):
            first, last = (a, b - 1) if a < b else (b - 1, a)
            cells = range(first // step, last // step + 1)
            count *= len(cells)
            if count > self._CELLS:
                return None
            ranges.append(cells)
        return itertools.product(*ranges)

    def _file(self, k):
        lo, hi, _ = self[k]
        cells = self._cells(lo, hi)
        if cells is None:
            self.large.append(k)
        else:
            for cell in cells:
                self.cells.setdefault(cell, []).append(k)

    def add(self, lo, hi, position):
        self.append((lo, hi, position))
        if self.cells is not None:
            self._file(len(self) - 1)
        elif len(self) > self._SCAN:
            first_lo, first_hi, _ = self[0]
            self.step = tuple(max(1, b - a) for a, b in zip(first_lo, first_hi))
            self.cells, self.large = {}, []
            for k in range(len(self)):
                self._file(k)

    def near(self, lo, hi) -> list[tuple]:
        """A superset of the boxes that meet ``[lo, hi)``, in the order they were added."""
        cells = None if self.cells is None else self._cells(lo, hi)
        if cells is None:
            return self
        found = set(self.large)
        for cell in cells:
            found.update(self.cells.get(cell, ()))
        return [self[k] for k in sorted(found)]


class TaskGraph:
    """Tasks in program order with dependencies from region overlap."""

    def __init__(self, tasks: list[Task]):
        self.tasks = tasks
        collecting = gc.isenabled()
        gc.disable()                # linking makes many small objects and no garbage: no collections
        try:
            self._link()
            self._rank(self._order())
        finally:
            if collecting:
                gc.enable()

    def _link(self):
        tasks = self.tasks
        writers: dict[int, _Boxes] = {}                 # buffer -> the boxes written so far
        readers: dict[int, _Boxes] = {}
        nothing = _Boxes()
        for i, task in enumerate(tasks):
            preds = {}
            for region in task.reads:                        # read after write
                for lo, hi, j in writers.get(region.buffer, nothing).near(region.lo, region.hi):
                    other = tasks[j]
                    if other.tid not in preds and _meet(lo, hi, region.lo, region.hi):
                        preds[other.tid] = other
            for region in task.writes:                       # write after write / after read
                disjoint = region.buffer in task.scatters
                for lo, hi, j in writers.get(region.buffer, nothing).near(region.lo, region.hi):
                    other = tasks[j]
                    if disjoint and other.stage == task.stage and region.buffer in other.scatters:
                        continue
                    if other.tid not in preds and _meet(lo, hi, region.lo, region.hi):
                        preds[other.tid] = other
                for lo, hi, j in readers.get(region.buffer, nothing).near(region.lo, region.hi):
                    other = tasks[j]
                    if other is not task and other.tid not in preds and _meet(lo, hi, region.lo, region.hi):
                        preds[other.tid] = other
            preds.pop(task.tid, None)
            task.preds = [preds[tid] for tid in sorted(preds)]
            for p in task.preds:
                p.succs.append(task)
            for region in task.reads:
                boxes = readers.get(region.buffer)
                if boxes is None:
                    boxes = readers[region.buffer] = _Boxes()
                boxes.add(region.lo, region.hi, i)
            for region in task.writes:
                boxes = writers.get(region.buffer)
                if boxes is None:
                    boxes = writers[region.buffer] = _Boxes()
                boxes.add(region.lo, region.hi, i)

    def validate(self):
        """Every predecessor is a task of this graph and the graph is acyclic (Kahn's algorithm)."""
        self._order()

    def _order(self) -> list[Task]:
        """The tasks in a dependency order; raises as :meth:`validate` says."""
        fanin = {t: len(t.preds) for t in self.tasks}
        for task in self.tasks:
            for p in task.preds:
                if p not in fanin:
                    raise PtoTaskGraphError(f"pto runtime: {task.describe()} waits on {p.describe()}, which is not in "
                                            "the graph and would never complete")
        order = [t for t in self.tasks if not t.preds]
        for task in order:                                   # grows while it is walked
            for s in task.succs:
                fanin[s] -= 1
                if not fanin[s]:
                    order.append(s)
        if len(order) != len(self.tasks):
            stuck = [t for t in self.tasks if fanin[t] > 0][:3]
            raise PtoTaskGraphError("pto runtime: the task graph has a cycle; stuck: "
                                    + "; ".join(t.describe() for t in stuck))
        return order

    def _rank(self, order: list[Task]):
        """HEFT upward rank: a task's cost plus the longest chain of costs after it; ``place[tid]``: the
        task's position in the ready queues' order (rank descending, then task id). The executor reads
        the graph by task id, as arrays: ``by_rank``, ``place``, ``costs``, HBM bytes ``hbm``, the successors
        ``succ_ids[succ_start[t]:succ_start[t + 1]]``, ``fanin``, core kinds (``core_kinds[core_codes]``)
        and stages (numbered in order: ``stage_codes``, ``stage_sizes``)."""
        for task in reversed(order):
            succs = task.succs
            task.rank = task.cost + (max([s.rank for s in succs]) if succs else 0.0)
        ranked = np.argsort(np.array([-t.rank for t in self.tasks], dtype=float), kind="stable")
        place = np.empty(len(ranked), dtype=np.int64)
        place[ranked] = np.arange(len(ranked))
        self.by_rank, self.place = ranked.astype(np.int64), place
        self.succ_start = np.zeros(len(self.tasks) + 1, np.int64)
        np.cumsum([len(t.succs) for t in self.tasks], out=self.succ_start[1:])
        self.succ_ids = np.array([s.tid for t in self.tasks for s in t.succs], np.int64)
        self.costs = np.array([t.cost for t in self.tasks], np.float64)
        self.hbm = np.array([t.hbm for t in self.tasks], np.float64)
        self.fanin = np.array([len(t.preds) for t in self.tasks], np.int64)
        self.core_kinds, codes = np.unique(np.array([t.core for t in self.tasks], dtype=str), return_inverse=True)
        self.core_codes = codes.astype(np.int64).reshape(len(self.tasks))
        stages, stage = np.unique(np.array([t.stage for t in self.tasks], np.int64), return_inverse=True)
        self.stage_codes = stage.astype(np.int64).reshape(len(self.tasks))   # stage order numbers
        self.stage_sizes = np.bincount(self.stage_codes, minlength=len(stages)).astype(np.int64)

    def topological(self) -> list[Task]:
        fanin = {t: len(t.preds) for t in self.tasks}
        out, ready = [], [t for t in self.tasks if not t.preds]
        ready.reverse()
        while ready:
            task = ready.pop()
            out.append(task)
            for s in reversed(task.succs):
                fanin[s] -= 1
                if fanin[s] == 0:
                    ready.append(s)
        return out

    def critical_path(self) -> list[Task]:
        path, candidates = [], [t for t in self.tasks if not t.preds]
        while candidates:
            task = max(candidates, key=lambda t: (t.rank, -t.tid))
            path.append(task)
            candidates = task.succs
        return path

    def __len__(self):
        return len(self.tasks)


def make_graph(tasks: list[Task]) -> TaskGraph:
    return TaskGraph(tasks)


__all__ = ["PtoTaskError", "PtoTaskGraphError", "Region", "Task", "TaskGraph", "make_graph"]
