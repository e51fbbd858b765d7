"""Tasks and their dependency graph.

A task is one block instance: a callable that does its work, a predicted duration, the core kind
that runs it, a label, and the GM regions it reads and writes. Dependencies come from region
overlap in program order — read-after-write, write-after-read, write-after-write — and each task
keeps a fan-in counter of unfinished predecessors (PTO2's ``fanin``). The graph is built as arrays
(CSR edges, NumPy) from the tasks' columns (:class:`TaskTable`: taken from the Task objects, or given
as they are, the Task objects then made on first use); its edges point forward in program order, so it
is acyclic with every wait satisfiable (:meth:`TaskGraph.validate` checks links set by hand), and it is
ranked by HEFT's upward rank for the ready queues.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import itertools
import operator
from typing import Callable

import numpy as np

from ..errors import PtoError


class PtoTaskError(PtoError, RuntimeError):
    """A task failed while running."""


class PtoTaskGraphError(PtoError, ValueError):
    """A task graph that cannot run: a cycle, or a task waiting on something that never completes."""


def _meet(lo, hi, lo2, hi2) -> bool:
    """Whether the boxes ``[lo, hi)`` and ``[lo2, hi2)`` overlap."""
    if len(lo) == 1 == len(lo2):                        # the common case, without the loop
        return lo[0] < hi2[0] and lo2[0] < hi[0]
    for a, b, c, d in zip(lo, hi, lo2, hi2):
        if not (a < d and c < b):
            return False
    return True


@dataclasses.dataclass(frozen=True, slots=True)
class Region:
    """A box ``[lo, hi)`` of GM buffer ``buffer``; a box of a reshaped view of it also gives ``view``,
    the box in the view's terms ``(lo, hi, view shape)`` (``[lo, hi)`` then holds it)."""

    buffer: int
    lo: tuple[int, ...]
    hi: tuple[int, ...]
    view: tuple | None = None

    @property
    def size(self) -> int:
        n = 1
        for a, b in zip(self.lo, self.hi):
            n *= max(0, b - a)
        return n


def _lazy(name: str, doc: str, empty=None) -> property:
    """A :class:`Task` attribute its graph links lazily: reading or writing it first takes the links
    the graph made (``Task._linked``); ``empty()`` stands in for a value never set."""
    def get(task):
        if task._graph is not None:
            task._linked()
        value = getattr(task, name)
        if value is None and empty is not None:
            value = empty()
            setattr(task, name, value)
        return value

    def put(task, value):
        if task._graph is not None:
            task._linked()
        setattr(task, name, value)

    return property(get, put, doc=doc)


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
    points: int = 1                 # grid points (tiles) it runs: more than one with tiles_per_block
    call: int = -1                  # its block call's place in the block-level jaxpr (lowering.block_graph.
                                    # call_sites), the same in every run of a loop; -1: a runtime copy
    _preds: list | None = dataclasses.field(default=None, init=False, repr=False)
    _succs: list | None = dataclasses.field(default=None, init=False, repr=False)
    _rank: float = dataclasses.field(default=0.0, init=False, repr=False)
    _graph: "TaskGraph | None" = dataclasses.field(default=None, init=False, repr=False)  # links not yet made

    def _linked(self):
        """Take the links its graph made (a task no longer in its graph's list keeps none)."""
        self._graph.link_tasks()
        self._graph = None

    preds = _lazy("_preds", "The tasks it waits on, by task id (set by its :class:`TaskGraph`).", list)
    succs = _lazy("_succs", "The tasks that wait on it, in program order (set by its :class:`TaskGraph`).", list)
    rank = _lazy("_rank", "HEFT upward rank: its cost plus the longest chain of costs after it (set by its "
                 ":class:`TaskGraph`).")

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
            first, last = first // step, last // step
            count *= last - first + 1
            if count > self._CELLS:
                return None
            ranges.append(range(first, last + 1))
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


@contextlib.contextmanager
def _no_collections():
    """No garbage collections inside: building a graph makes many small objects and no garbage."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


_FIELDS = operator.attrgetter("reads", "writes", "stage", "scatters", "cost", "hbm", "core")
_ACCESS = operator.attrgetter("buffer", "lo", "hi")
_GRAPH = Task._graph.__set__
_FAR = np.iinfo(np.int64).max


def _box_arrays(los, his):
    """The boxes ``[lo, hi)`` as two int64 arrays of shape (boxes, rank); a box of lower rank is padded
    with dims every box meets in (``_meet`` compares the dims both boxes have). None when a coordinate
    does not fit in int64."""
    count = len(los)
    dl = np.fromiter(map(len, los), np.int64, count)
    dh = np.fromiter(map(len, his), np.int64, count)
    dims = np.minimum(dl, dh)
    rank = int(dims.max()) if count else 0
    lo = np.full((count, rank), -_FAR, np.int64)
    hi = np.full((count, rank), _FAR, np.int64)
    chain = itertools.chain.from_iterable
    try:
        if (dl == rank).all() and (dh == rank).all():
            lo[:] = np.fromiter(chain(los), np.int64, count * rank).reshape(count, rank)
            hi[:] = np.fromiter(chain(his), np.int64, count * rank).reshape(count, rank)
        else:
            for d in np.unique(dims[dims > 0]).tolist():
                rows = np.flatnonzero(dims == d)
                lo[rows, :d] = np.fromiter(chain(los[r][:d] for r in rows.tolist()), np.int64, rows.size * d).reshape(-1, d)
                hi[rows, :d] = np.fromiter(chain(his[r][:d] for r in rows.tolist()), np.int64, rows.size * d).reshape(-1, d)
    except OverflowError:
        return None
    return lo, hi


@dataclasses.dataclass(eq=False)
class TaskTable:
    """Tasks as NumPy columns, in program order (task id = row): what a :class:`TaskGraph` is built from.

    Per task: ``cost`` (seconds on its core), ``hbm`` (GM bytes it reads from HBM), ``core`` (its core
    kind, an index into ``kinds``) and ``stage`` (its block call). Per region access, in any order:
    ``task`` (the task's id), ``buffer``, the box ``[lo, hi)`` (int64 arrays of shape (accesses, rank); a
    box of lower rank is padded with dims every box meets in), ``write`` (else a read) and ``scatter``
    (a write of a buffer the task writes only by unique-index scatters, :attr:`Task.scatters`).
    ``boxes``: the boxes as coordinate tuples (lo's, hi's) instead, where some do not fit in int64
    (``lo`` and ``hi`` are then None)."""

    cost: np.ndarray
    hbm: np.ndarray
    core: np.ndarray
    kinds: tuple[str, ...]
    stage: np.ndarray
    task: np.ndarray
    buffer: np.ndarray
    lo: np.ndarray | None
    hi: np.ndarray | None
    write: np.ndarray
    scatter: np.ndarray
    boxes: tuple | None = None

    @classmethod
    def of(cls, tasks: list[Task]) -> "TaskTable":
        """The columns of ``tasks`` (``tid`` = position); accesses: every task's reads, then its writes."""
        n = len(tasks)
        if not n:
            return cls(np.zeros(0), np.zeros(0), np.zeros(0, np.int64), (), np.zeros(0, np.int64),
                       np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 0), np.int64),
                       np.zeros((0, 0), np.int64), np.zeros(0, bool), np.zeros(0, bool))
        reads, writes, stages, scatters, costs, hbms, cores = zip(*map(_FIELDS, tasks))
        nr = np.fromiter(map(len, reads), np.int64, n)
        nw = np.fromiter(map(len, writes), np.int64, n)
        chain = itertools.chain.from_iterable
        accesses = list(map(_ACCESS, chain((chain(reads), chain(writes)))))
        count = len(accesses)
        buffers, los, his = zip(*accesses) if count else ((), (), ())
        at = np.arange(n, dtype=np.int64)
        owner = np.concatenate([np.repeat(at, nr), np.repeat(at, nw)])
        written = np.zeros(count, bool)
        written[count - int(nw.sum()):] = True
        scatter = np.zeros(count, bool)
        scattering = list(itertools.compress(range(n), map(bool, scatters)))
        if scattering:
            first_write = (count - int(nw.sum()) + np.cumsum(nw) - nw).tolist()
            for i in scattering:
                rows = range(first_write[i], first_write[i] + len(writes[i]))
                scatter[rows.start:rows.stop] = [buffers[r] in scatters[i] for r in rows]
        boxes = _box_arrays(los, his)
        kinds = sorted(set(cores))
        return cls(np.array(costs, np.float64), np.array(hbms, np.float64),
                   np.fromiter(map(dict(zip(kinds, range(len(kinds)))).__getitem__, cores), np.int64, n),
                   tuple(kinds), np.array(stages, np.int64), owner, np.array(buffers, np.int64),
                   *(boxes or (None, None)), written, scatter, None if boxes else (los, his))


def _cells(table) -> np.ndarray:
    """Per access, a cell number that only accesses of its buffer whose boxes may meet share: where
    every box of a buffer is non-empty and lies within one cell of the grid whose step is the largest
    extent of the buffer's boxes (per dim: tiles, tail tiles included), boxes in different cells never
    meet and the cell is the box's; elsewhere 0 (the buffer's accesses are paired as one group)."""
    count = len(table.task)
    cell = np.zeros(count, np.int64)
    if table.lo is None or not count or not 0 < table.lo.shape[1] < 63:
        return cell
    key, rank = table.buffer, table.lo.shape[1]
    padded = (table.lo == -_FAR) & (table.hi == _FAR)              # a dim of a box of lower rank
    extreme = (table.lo <= -_FAR) | (table.hi >= _FAR)
    lo, hi = np.where(extreme, 0, table.lo), np.where(extreme, 1, table.hi)   # padded dims: one cell
    pattern = padded @ (1 << np.arange(rank, dtype=np.int64))     # which dims, as bits
    order = np.argsort(key, kind="stable")
    starts = np.flatnonzero(np.append(True, key[order][1:] != key[order][:-1]))
    extent = hi - lo
    ends = np.append(starts[1:], count)
    per = np.repeat(np.arange(len(starts)), ends - starts)       # each sorted access's buffer number
    step = np.maximum.reduceat(extent[order], starts)[per]
    same = (np.minimum.reduceat(pattern[order], starts) == np.maximum.reduceat(pattern[order], starts))[per]
    ok = np.empty(count, bool)                                   # the same padded dims per buffer
    ok[order] = same & (extreme == padded)[order].all(1) & (extent[order] > 0).all(1) & (lo[order] % step == 0).all(1)
    fits = np.logical_and.reduceat(ok[order], starts)[per]
    rows = order[fits]
    if not rows.size:
        return cell
    at = lo[rows] // step[fits]
    at -= at.min(0)
    span = at.max(0) + 1
    if float(np.prod(span.astype(np.float64))) < 2.0 ** 62:      # the cell's row-major number
        cell[rows] = at @ np.append(np.cumprod(span[::-1])[::-1][1:], 1)
    else:
        cell[rows] = np.unique(at, axis=0, return_inverse=True)[1].reshape(-1)
    return cell


def _index_pairs(rows, owner, written, scatter, los, his, stages, n) -> list[int]:
    """``later * n + earlier`` for the tasks whose accesses meet, of the accesses ``rows`` of one buffer
    (in program order), through its spatial index (:class:`_Boxes`): a read waits on the earlier
    writes, a write on the earlier writes and reads, except the writes by unique-index scatters of
    one block call (``scatter``) on each other."""
    writes, reads = _Boxes(), _Boxes()
    keys = []
    k, m = 0, len(rows)
    while k < m:
        o = owner[rows[k]]
        e = k + 1
        while e < m and owner[rows[e]] == o:
            e += 1
        for r in rows[k:e]:                             # this task's accesses against the earlier ones
            lo, hi = los[r], his[r]
            disjoint = written[r] and scatter[r]
            for blo, bhi, j in writes.near(lo, hi):
                if disjoint and scatter[j] and stages[owner[j]] == stages[o]:
                    continue
                if _meet(blo, bhi, lo, hi):
                    keys.append(o * n + owner[j])
            if written[r]:
                for blo, bhi, j in reads.near(lo, hi):
                    if _meet(blo, bhi, lo, hi):
                        keys.append(o * n + owner[j])
        for r in rows[k:e]:
            (writes if written[r] else reads).add(los[r], his[r], r)
        k = e
    return keys


def _ranges(starts, counts):
    """The indices ``starts[i]:starts[i] + counts[i]``, concatenated."""
    total = int(counts.sum())
    offsets = np.cumsum(counts) - counts
    return np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, counts)


class TaskGraph:
    """Tasks in program order (``tid`` = position) with dependencies from region overlap.

    The graph is built as arrays, from the tasks' columns (:class:`TaskTable`): every region access is
    a row (buffer, box, task, read or write); the rows of one buffer are paired in program order with
    NumPy (a read with the earlier writes, a write with every earlier access) and the pairs whose boxes
    meet are the edges. The accesses of a buffer whose boxes are tiles of one grid are paired only
    within their tile's cell (:func:`_cells`); a buffer whose pairs would still be too many is linked
    through its spatial index (:class:`_Boxes`) instead. Edges only point forward in program order, so
    the graph is acyclic; the upward ranks are computed level by level from the sinks. The tasks get
    their ``preds`` (by task id), ``succs`` (in program order) and ``rank`` on first use.
    :meth:`of_table` builds a graph from columns alone: its :attr:`tasks` are made on first use."""

    _PAIRS_PER_ACCESS = 16      # a buffer pairs its accesses with NumPy up to this many pairs per access

    def __init__(self, tasks: list[Task]):
        self._tasks, self._make = tasks, None
        with _no_collections():
            self._build(TaskTable.of(tasks))

    @classmethod
    def of_table(cls, table: TaskTable, make: Callable[[], list[Task]]) -> "TaskGraph":
        """The graph of the tasks ``table`` holds; ``make()`` makes them as :class:`Task` objects, on first
        use of :attr:`tasks`."""
        graph = cls.__new__(cls)
        graph._tasks, graph._make = None, make
        graph._build(table)
        return graph

    @property
    def tasks(self) -> list[Task]:
        """The tasks, by task id."""
        if self._tasks is None:
            with _no_collections():
                tasks = self._make()
            if len(tasks) != self.n:
                raise PtoTaskGraphError(f"pto runtime: {len(tasks)} tasks made for a task table of {self.n}")
            collections.deque(map(_GRAPH, tasks, itertools.repeat(self, self.n)), 0)   # links made on first use
            self._tasks = tasks
        return self._tasks

    def _build(self, table: TaskTable):
        self.table, self.n = table, len(table.cost)
        self._ends: dict = {}                               # overhead -> ends(overhead)
        with _no_collections():
            self._link(table)
            self._rank(table)

    def _link(self, table: TaskTable):
        """The edges as CSR arrays: ``pred_ids[pred_start[t]:pred_start[t + 1]]`` and
        ``succ_ids[succ_start[t]:succ_start[t + 1]]``, both ascending."""
        n, owner, buffer, written, scatter = self.n, table.task, table.buffer, table.write, table.scatter
        count = len(owner)
        cell = _cells(table)
        s = np.lexsort((owner, cell, buffer))               # rows by buffer (and cell), then program order
        b_s, o_s, w_s = buffer[s], owner[s], written[s]
        new = np.ones(count, bool)
        new[1:] = (b_s[1:] != b_s[:-1]) | (cell[s[1:]] != cell[s[:-1]])
        first = np.flatnonzero(new)                         # the first row of each buffer
        group = np.cumsum(new) - 1
        gs = first[group]
        pos = np.arange(count, dtype=np.int64)
        cw = np.zeros(count + 1, np.int64)                  # writes before each row
        np.cumsum(w_s, out=cw[1:])
        candidates = np.where(w_s, pos - gs, cw[:-1] - cw[gs])     # earlier rows each row may wait on
        sizes = np.diff(np.append(first, count))
        pairs = np.add.reduceat(candidates, first) if count else candidates
        vectorised = pairs <= self._PAIRS_PER_ACCESS * sizes + 256
        if table.lo is None:                                # coordinates beyond int64: all by index
            vectorised[:] = False
        edges = []
        mine = vectorised[group]
        later, earlier = [], []
        for rows, base in ((np.flatnonzero(mine & w_s), None), (np.flatnonzero(mine & ~w_s), np.flatnonzero(w_s))):
            c = candidates[rows]
            total = int(c.sum())
            if not total:
                continue
            offset = np.cumsum(c) - c
            lo_at = gs[rows] if base is None else cw[gs[rows]]
            k = np.arange(total, dtype=np.int64) + np.repeat(lo_at - offset, c)
            later.append(np.repeat(rows, c))
            earlier.append(k if base is None else base[k])
        if later:
            later, earlier = np.concatenate(later), np.concatenate(earlier)
            keep = o_s[later] != o_s[earlier]
            lo, hi = table.lo[s], table.hi[s]
            for d in range(lo.shape[1]):
                keep &= (lo[earlier, d] < hi[later, d]) & (lo[later, d] < hi[earlier, d])
            sc_s = scatter[s]
            if sc_s.any():
                st = table.stage
                keep &= ~(w_s[earlier] & w_s[later] & sc_s[earlier] & sc_s[later]
                          & (st[o_s[earlier]] == st[o_s[later]]))
            edges.append(o_s[later[keep]] * n + o_s[earlier[keep]])
        indexed = np.flatnonzero(~vectorised).tolist()
        if indexed:
            owner_l, written_l, scatter_l = owner.tolist(), written.tolist(), scatter.tolist()
            los, his = table.boxes or (table.lo.tolist(), table.hi.tolist())
            stages = table.stage.tolist()
        for g in indexed:                                   # buffers with many tiles: the spatial index
            rows = s[first[g]:first[g] + sizes[g]].tolist()
            edges.append(np.array(_index_pairs(rows, owner_l, written_l, scatter_l, los, his, stages, n), np.int64))
        key = np.sort(np.concatenate(edges)) if edges else np.zeros(0, np.int64)
        if key.size:
            key = key[np.append(True, key[1:] != key[:-1])]      # once each
        succ_of, pred_of = np.divmod(key, n) if n else (key, key)
        self.pred_start = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(succ_of, minlength=n), out=self.pred_start[1:])
        self.pred_ids = pred_of
        by_pred = np.argsort(pred_of, kind="stable")
        self.succ_ids = succ_of[by_pred]
        self.succ_start = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(pred_of, minlength=n), out=self.succ_start[1:])

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

    def _rank(self, table: TaskTable):
        """HEFT upward rank: a task's cost plus the longest chain of costs after it; ``by_rank``: the tasks
        in the ready queues' order (rank descending, then task id). The executor reads the graph by task
        id, as arrays: ``by_rank``, ``costs``, HBM bytes ``hbm``, the successors
        ``succ_ids[succ_start[t]:succ_start[t + 1]]``, ``fanin``, core kinds (``core_kinds[core_codes]``,
        the kinds in use, sorted) and stages (numbered in order: ``stage_codes``, ``stage_sizes``)."""
        n = self.n
        self.costs = cost = np.asarray(table.cost, np.float64)
        rank = self._upward(cost)
        self.by_rank = np.argsort(-rank, kind="stable").astype(np.int64)
        self.hbm = np.asarray(table.hbm, np.float64)
        self.fanin = np.diff(self.pred_start)
        used = np.flatnonzero(np.bincount(table.core, minlength=len(table.kinds)))
        kinds = sorted(table.kinds[k] for k in used.tolist())
        code = np.zeros(len(table.kinds), np.int64)
        code[used] = [kinds.index(table.kinds[k]) for k in used.tolist()]
        self.core_kinds = np.array(kinds, dtype=str)
        self.core_codes = code[table.core]
        stages, stage = np.unique(table.stage, return_inverse=True)
        self.stage_codes = stage.astype(np.int64).reshape(n)        # stage order numbers
        self.stage_sizes = np.bincount(self.stage_codes, minlength=len(stages)).astype(np.int64)
        self.ranks = rank
        if self._tasks is not None:
            collections.deque(map(_GRAPH, self._tasks, itertools.repeat(self, n)), 0)   # links made on first use

    def link_tasks(self):
        """Give the tasks their ``preds``, ``succs`` and ``rank`` as Python objects, from the arrays
        (done on first use: the executors read the arrays)."""
        with _no_collections():
            tasks, n = self.tasks, self.n
            objects = np.empty(n, object)
            objects[:] = tasks
            preds, succs = objects[self.pred_ids].tolist(), objects[self.succ_ids].tolist()
            ps, ss = self.pred_start.tolist(), self.succ_start.tolist()
            for task, a, b, c, d, r in zip(tasks, ps, ps[1:], ss, ss[1:], self.ranks.tolist()):
                if task._graph is self:                # not taken over by a later graph
                    task._preds, task._succs, task._rank, task._graph = preds[a:b], succs[c:d], r, None

    def _upward(self, cost):
        """The upward ranks: each task's cost plus the largest rank of its successors."""
        return self._chains(cost, self.succ_start, self.succ_ids, self.pred_start, self.pred_ids, reverse=True)

    def _chains(self, cost, ss, si, ps, pi, reverse, overhead=0.0):
        """Per task, ``(overhead + the largest value of its neighbours ss/si (0 for none)) + cost``, where
        ps/pi are the opposite links: from the tasks without neighbours on, one level of tasks at a time
        (those whose neighbours all have theirs) while levels are wide; the rest one by one in program
        order (``reverse``: reverse program order, as the neighbours are later)."""
        n = len(cost)
        outdeg, indeg = np.diff(ss), np.diff(ps)
        left = outdeg.copy()
        rank = np.zeros(n)
        done = np.zeros(n, bool)
        level = np.flatnonzero(outdeg == 0)
        while level.size >= 16:
            c = outdeg[level]
            r = overhead + np.zeros(level.size)
            inner = c > 0
            if inner.any():
                f, k = level[inner], c[inner]
                r[inner] = overhead + np.maximum.reduceat(rank[si[_ranges(ss[f], k)]], np.cumsum(k) - k)
            rank[level] = r + cost[level]
            done[level] = True
            preds, counts = np.unique(pi[_ranges(ps[level], indeg[level])], return_counts=True)
            left[preds] -= counts
            level = preds[left[preds] == 0]
        rest = np.flatnonzero(~done).tolist()
        if rest:
            rk, ssl, sil, cl = rank.tolist(), ss.tolist(), si.tolist(), cost.tolist()
            for i in (reversed(rest) if reverse else rest):
                a, b = ssl[i], ssl[i + 1]
                rk[i] = (overhead + (max([rk[j] for j in sil[a:b]]) if a != b else 0.0)) + cl[i]
            rank = np.array(rk, np.float64)
        return rank

    def ends(self, overhead: float = 0.0) -> np.ndarray:
        """Each task's earliest end (seconds) when every task starts ``overhead`` after its last
        predecessor ends (at ``overhead`` without one) and runs for its cost: the longest chain of tasks
        ending at it, each counting its cost plus ``overhead``. Its largest value is the lower bound's
        ``critical_path`` term (with the dispatch overhead), and :meth:`critical_path` that chain."""
        key = float(overhead)
        if key not in self._ends:
            self._ends[key] = self._chains(self.costs, self.pred_start, self.pred_ids, self.succ_start,
                                           self.succ_ids, reverse=False, overhead=key)
        return self._ends[key]

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

    def critical_path(self, overhead: float = 0.0) -> list[Task]:
        """The longest dependency chain, each task counting its cost plus ``overhead`` (:meth:`ends`):
        back from the task that ends last, through the predecessor that ends last (the first in program
        order of equals)."""
        if not self.n:
            return []
        end = self.ends(overhead)
        path = [int(np.argmax(end))]
        ps, pi = self.pred_start, self.pred_ids
        while ps[path[-1]] != ps[path[-1] + 1]:
            preds = pi[ps[path[-1]]:ps[path[-1] + 1]]
            path.append(int(preds[np.argmax(end[preds])]))
        tasks = self.tasks
        return [tasks[t] for t in reversed(path)]

    def __len__(self):
        return self.n


def make_graph(tasks: list[Task]) -> TaskGraph:
    return TaskGraph(tasks)


__all__ = ["PtoTaskError", "PtoTaskGraphError", "Region", "Task", "TaskGraph", "TaskTable", "make_graph"]
