"""Traces and profiles: what ran where and when, the lower bound, and the swimlane.

``Trace.profile()`` gives the makespan, the lower bound
``max(critical path, cube work / AIC count, vector work / AIV count, HBM bytes / HBM bandwidth,
tasks × scheduler cost / schedulers, phases)``, where the critical path counts each task's dispatch
overhead, the HBM bytes are those the L2 rule (:mod:`~ptojax.mpmd.l2`) sends to HBM -- the same bytes
the task costs price at the HBM rate and the simulated run streams through the die's HBM channel --
and ``phases`` is the release / delivery bound of chained phases (:func:`_phase_bound`); the term
that binds is :attr:`Bound.binding`,
utilisation per core kind, time per label, the critical path's tasks (the chain that sets the
critical-path term) and the largest idle gaps.
``Profile.save(path)`` writes a Chrome trace (Perfetto reads it): one
lane per core (cube lanes first), a complete event per task with its details (``points``: the grid
points, or tiles, it ran; ``cost_us``: its predicted cost, which the slice's duration exceeds by any
wait for the HBM channel; ``bytes``: the GM bytes it moves, ``hbm_bytes`` those read from HBM), flow arrows for
dependencies. ``Profile.swimlane(path)`` draws the same picture to PNG/SVG (needs matplotlib).
"""
from __future__ import annotations

import colorsys
import dataclasses
import functools
import gc
import json
import os
import reprlib
from pathlib import Path

import numpy as np

from ..errors import PtoArgumentError, PtoUnsupportedError


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    tid: int
    name: str
    label: str
    kind: str
    core: int
    dispatch: float
    start: float
    end: float
    stage: int
    preds: tuple[int, ...]
    index: tuple[int, ...]
    host: bool = False

    @property
    def title(self) -> str:
        return self.label or self.name

    @property
    def lane(self) -> tuple[str, int]:
        """The swimlane it ran on: ``(core kind, core)``, or ``("host", thread)`` on a run on host threads."""
        return ("host", self.core) if self.host else (self.kind, self.core)


@dataclasses.dataclass(frozen=True, eq=False)
class Trace:
    """What one run recorded: where and when each task ran, the machine and task graph.

    ``columns`` holds five NumPy arrays -- start, tid, core, dispatch, end -- with one entry per task,
    sorted by start then task id (times in seconds; ``core`` is the lane within the task's core kind,
    or the host thread); :attr:`rows` gives them as ``(start, tid, core, dispatch, end)`` tuples and
    :attr:`records` as :class:`Record` objects, both built on first use.
    """

    columns: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    machine: object
    graph: object
    mode: str
    host: bool = False
    threads: int = 0            # host threads of a host run
    source: object = None       # what ran, as its caller names it (a compiled kernel's signature): reports check it

    @functools.cached_property
    def rows(self) -> tuple[tuple[float, int, int, float, float], ...]:
        """One ``(start, tid, core, dispatch, end)`` tuple per task, in :attr:`columns` order."""
        collecting = gc.isenabled()
        gc.disable()                # many small objects and no garbage: no collections
        try:
            return tuple(zip(*[column.tolist() for column in self.columns]))
        finally:
            if collecting:
                gc.enable()

    @property
    def makespan(self) -> float:
        """End of the last task, in seconds."""
        end = self.columns[4]
        return float(end.max()) if len(end) else 0.0

    @functools.cached_property
    def records(self) -> tuple[Record, ...]:
        """A :class:`Record` per task, in :attr:`rows` order."""
        tasks, host = self.graph.tasks, self.host
        return tuple([Record(tid, t.name, t.label, t.core, core, dispatch, start, end, t.stage,
                             tuple([p.tid for p in t.preds]), t.index, host)
                      for start, tid, core, dispatch, end in self.rows for t in (tasks[tid],)])

    def profile(self) -> "Profile":
        """The figures of this run: a :class:`Profile`."""
        return Profile(self)


@dataclasses.dataclass(frozen=True)
class Bound:
    critical_path: float
    cube: float
    vector: float
    bandwidth: float
    scheduler: float
    phases: float = 0.0

    @property
    def value(self) -> float:
        return max(dataclasses.astuple(self))

    @property
    def binding(self) -> str:
        """The name of the largest term (the first of equals)."""
        terms = dataclasses.asdict(self)
        return max(terms, key=lambda k: terms[k])


def _phase_bound(graph, m, overhead: float, order, head: dict) -> tuple[float, str]:
    """The release / delivery bound of chained phases. Take a set S of the tasks of one core kind (or
    of the AICPU schedulers), none of which can start before ``r`` (their earliest start over their
    dependency chains) and each of which has a chain of at least ``q`` still to run after it. The run
    lasts at least ``r`` + the time the cores need for S + ``q``. A core runs one task at a time and
    gets the next one ``overhead`` after it is idle (the schedulers decide and dispatch then), so the
    cores need at least S's work plus a gap per task over the cores, and -- tasks not splitting --
    ``ceil(|S| / cores)`` of S's shortest tasks and their gaps on one core (the waves). S ranges over
    the tasks released at ``r`` or later with a tail of ``q`` or more, for every release and up to
    32 tails; phases that wait for one another add up. ``order``: the tasks in a dependency order;
    ``head``: each task's earliest start, by task id. Returns the bound and what dominates in it: the resource of
    the set (a core kind, or ``scheduler``) where its work is the largest part, else ``chain`` (the
    release before the set or the tail after it)."""
    tail: dict = {}                         # from a task's end to the end of the run, at least
    for t in reversed(order):
        tail[t.tid] = max([overhead + s.cost + tail[s.tid] for s in t.succs], default=0.0)
    tasks = graph.tasks
    if not tasks:
        return 0.0, ""
    release = np.asarray(head, np.float64)
    cost = np.array([t.cost for t in tasks])
    after = np.array([tail[t.tid] for t in tasks])
    kind = np.array([t.core for t in tasks])
    lanes = [(k, kind == k, count, release, cost, after, overhead) for k, count in m.cores]
    lanes.append(("scheduler", np.ones(len(tasks), bool), m.schedulers, release - overhead,
                  np.full(len(tasks), m.schedule_cost), m.dispatch_latency + cost + after, 0.0))
    best, lane = 0.0, ""
    for name, mine, count, r, c, q, gap in lanes:
        by_release = np.argsort(-r[mine], kind="stable")
        r, c, q = r[mine][by_release], c[mine][by_release], q[mine][by_release]
        tails = np.unique(q)
        for floor in tails[np.linspace(0, len(tails) - 1, min(len(tails), 32)).astype(int)]:
            keep = q >= floor               # prefixes: the tasks released at r[i] or later
            rk, ck = r[keep], c[keep]
            n = np.arange(1, len(ck) + 1)
            need = np.maximum((np.cumsum(ck) + n * gap) / count,
                              np.ceil(n / count) * (np.minimum.accumulate(ck) + gap)) - gap
            qk = np.minimum.accumulate(q[keep])
            j = int(np.argmax(rk + need + qk))
            if rk[j] + need[j] + qk[j] > best:
                best = float(rk[j] + need[j] + qk[j])
                lane = name if need[j] >= max(rk[j], qk[j]) else "chain"
    return best, lane


# Distinct colours for labels (Tableau 10, then lighter companions), then hues a golden angle apart.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#86bcb6", "#f1ce63", "#a0cbe8", "#ffbe7d", "#8cd17d", "#d4a6c8", "#fabfd2", "#d7b5a6",
           "#79706e", "#499894")


def colour(i: int) -> str:
    """The ``i``-th label colour (``#rrggbb``): :data:`PALETTE`, then a new hue for each further label."""
    if i < len(PALETTE):
        return PALETTE[i]
    j = i - len(PALETTE)
    r, g, b = colorsys.hls_to_rgb((j * 0.381966) % 1.0, (0.45, 0.62, 0.32)[j % 3], 0.55)
    return "#" + "".join(f"{round(v * 255):02x}" for v in (r, g, b))


def output_path(path, where: str, suffixes: tuple = ()) -> Path:
    """``path`` (a str or ``os.PathLike``) as a :class:`~pathlib.Path` a file can be written to: not a
    folder, in a folder that exists and takes it, ending in one of ``suffixes`` (any when empty); else a
    :class:`PtoArgumentError` from ``where`` naming it (before any work is done)."""
    if not isinstance(path, (str, os.PathLike)):
        raise PtoArgumentError(f"{where}: the path must be a str or os.PathLike, not {type(path).__name__} "
                               f"({reprlib.repr(path)})")
    out = Path(path)
    if out.is_dir():
        raise PtoArgumentError(f"{where}: {str(out)!r} is a folder, not a file")
    if suffixes and out.suffix.lower() not in suffixes:
        raise PtoArgumentError(f"{where}: {str(out)!r} must end in {' or '.join(suffixes)}")
    if not out.parent.is_dir():
        raise PtoArgumentError(f"{where}: cannot write {str(out)!r}: no folder {str(out.parent)!r}")
    existed = out.exists()
    try:                                    # a folder that takes no files (read-only, /proc): said now
        with open(out, "ab"):
            pass
    except OSError as err:
        raise PtoArgumentError(f"{where}: cannot write {str(out)!r}: {err.strerror or err}") from None
    if not existed:
        out.unlink(missing_ok=True)
    return out


class Profile:
    """Figures of one run; times in microseconds unless the name says otherwise.

    Attributes: ``makespan_us``; ``lower_bound_us`` and ``bound`` (its terms, in seconds:
    ``critical_path``, ``cube``, ``vector``, ``bandwidth`` (HBM bytes / HBM bandwidth), ``scheduler``, ``phases``;
    ``bound.binding`` names the largest); ``tasks`` (count);
    ``lanes`` (``(kind, count)``: the chip's core kinds, or ``("host", threads)`` for a run on host
    threads) and ``utilisation`` and ``idle_us`` per lane kind; ``label_us`` (summed task time per label, largest
    first); ``critical_path`` (task ids); ``trace`` (the :class:`Trace`).
    """

    def __init__(self, trace: Trace):
        self.trace = trace
        m, tasks = trace.machine, trace.graph.tasks
        work: dict[str, float] = {}
        for t in tasks:
            work[t.core] = work.get(t.core, 0.0) + t.cost
        overhead = m.schedule_cost + m.dispatch_latency     # every task waits this long after it is ready
        graph = trace.graph
        order = graph.topological()
        # earliest ends: each task + its dispatch overhead along the longest chain (the critical path's rule)
        end = graph.ends(overhead)
        ps, has = graph.pred_start, np.diff(graph.pred_start) > 0
        last = np.zeros(len(end))                           # the predecessors' last end
        if has.any():
            last[has] = np.maximum.reduceat(end[graph.pred_ids], ps[:-1][has])
        head = overhead + last                              # earliest start
        cp = float(end.max()) if len(end) else 0.0
        counts = dict(m.cores)
        phases, self.phase_lane = _phase_bound(trace.graph, m, overhead, order, head)
        self.bound = Bound(cp, work.get("AIC", 0.0) / counts.get("AIC", 1), work.get("AIV", 0.0) / counts.get("AIV", 1),
                           sum(t.hbm for t in tasks) / m.bandwidth, len(tasks) * m.schedule_cost / m.schedulers, phases)
        self.makespan_us = trace.makespan * 1e6
        # the terms bound the makespan exactly; summed in another order, one may pass it by a rounding
        rounding = trace.makespan < self.bound.value <= trace.makespan * (1 + 1e-9)
        self.lower_bound_us = (trace.makespan if rounding else self.bound.value) * 1e6
        self.tasks = len(tasks)
        busy: dict[str, float] = {}
        per_label: dict[str, float] = {}
        for r in trace.records:
            kind = "host" if r.host else r.kind
            busy[kind] = busy.get(kind, 0.0) + (r.end - r.start)
            per_label[r.title] = per_label.get(r.title, 0.0) + (r.end - r.start)
        span = trace.makespan
        # the lanes time was spent on: the chip's cores, or the host threads of a host run
        self.lanes = ((("host", trace.threads or len({r.core for r in trace.records}) or 1),) if trace.host
                      else tuple(m.cores))
        self.utilisation = {k: busy.get(k, 0.0) / (span * n) if span else 0.0 for k, n in self.lanes}
        self.idle_us = {k: (span * n - busy.get(k, 0.0)) * 1e6 for k, n in self.lanes}
        self.label_us = {k: v * 1e6 for k, v in sorted(per_label.items(), key=lambda kv: -kv[1])}
        self.critical_path = [t.tid for t in graph.critical_path(overhead)]     # the chain of bound.critical_path

    @property
    def binding(self) -> str:
        """The binding bound term, ``phases`` with what dominates its phase: ``phases (scheduler)`` --
        the AICPU schedulers' dispatches (fewer, larger tasks) --, ``phases (AIC)`` / ``phases (AIV)``
        -- that core kind's tasks between a release and a tail --, or ``phases (chain)`` -- the chain
        before or after the set (long tasks or dependencies)."""
        term = self.bound.binding
        return f"{term} ({self.phase_lane})" if term == "phases" and self.phase_lane else term

    def bubbles(self, count: int = 5):
        """The ``count`` largest idle gaps between consecutive tasks on one core: (gap µs, kind, core,
        after task).

        Gaps are taken per swimlane (:attr:`Record.lane`): on a run on host threads ``kind`` is ``host``
        and ``core`` the thread, which runs tasks of every core kind."""
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise PtoArgumentError(f"Profile.bubbles: count must be an int >= 0, got {count!r}")
        lanes: dict = {}
        for r in self.trace.records:
            lanes.setdefault(r.lane, []).append(r)
        gaps = []
        for (kind, core), recs in lanes.items():
            recs.sort(key=lambda r: r.start)
            for a, b in zip(recs, recs[1:]):
                if b.start > a.end:
                    gaps.append(((b.start - a.end) * 1e6, kind, core, a.tid))
        return sorted(gaps, reverse=True)[:count]

    def summary(self) -> str:
        """A few lines of text: makespan, lower bound and its terms, utilisation, time per label."""
        if not self.tasks:
            return f"{self.trace.mode}: 0 tasks (the kernel runs no tasks on the chip)"
        if self.trace.host:                 # wall time of host threads: the chip's bound does not apply
            lines = [f"{self.trace.mode}: {self.tasks} tasks, makespan {self.makespan_us:.2f} us on the host's clock "
                     f"(the simulated chip's lower bound is {self.lower_bound_us:.2f} us)"]
        else:
            lines = [f"{self.trace.mode}: {self.tasks} tasks, makespan {self.makespan_us:.2f} us, lower bound "
                     f"{self.lower_bound_us:.2f} us ({self.makespan_us / max(self.lower_bound_us, 1e-12):.2f}x, "
                     f"bound by {self.binding})",
                     "  bound: " + ", ".join(f"{k} {v * 1e6:.2f} us" for k, v in dataclasses.asdict(self.bound).items())]
        lines.append("  utilisation: " + ", ".join(f"{k} {u:.0%}" for k, u in self.utilisation.items()))
        lines.append("  time per label, summed over cores: "
                     + ", ".join(f"{k} {v:.2f} us" for k, v in self.label_us.items()))
        return "\n".join(lines)

    # ------------------------------------------------------------------------------------- export
    def chrome_trace(self) -> dict:
        """The Chrome trace (``traceEvents``) as a dict; :meth:`save` writes it as JSON."""
        trace, m = self.trace, self.trace.machine
        lanes, events = {}, []
        if trace.host:                     # every thread of the run, as the utilisation counts them
            keys = [("host", i) for i in range(max([trace.threads or 0] + [r.core + 1 for r in trace.records]))]
        else:
            keys = [(kind, i) for kind, n in m.cores for i in range(n)]
        for i, key in enumerate(keys):
            lanes[key] = i
            events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": i, "args": {"name": f"{key[0]} {key[1]}"}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": i, "args": {"sort_index": i}})
        events.insert(0, {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": f"ptojax {m.name} ({trace.mode})"}})
        lane_of, end_of, tasks = {}, {}, trace.graph.tasks
        for r in trace.records:
            lane, t = lanes[r.lane], tasks[r.tid]
            lane_of[r.tid], end_of[r.tid] = lane, r.end
            events.append({"ph": "X", "name": r.title, "cat": r.kind, "pid": 0, "tid": lane, "ts": r.start * 1e6,
                           "dur": (r.end - r.start) * 1e6,
                           "args": {"task": r.tid, "program": r.name, "label": r.label, "core": f"{r.kind} {r.core}",
                                    "tile": list(r.index), "points": t.points, "cost_us": float(t.cost) * 1e6,
                                    "bytes": int(t.bytes), "hbm_bytes": int(t.hbm), "dispatched_us": r.dispatch * 1e6, "stage": r.stage, "waits_for": list(r.preds)}})
        flow = 0
        for r in trace.records:
            for p in r.preds:
                flow += 1
                events.append({"ph": "s", "id": flow, "name": "dep", "cat": "dep", "pid": 0, "tid": lane_of[p],
                               "ts": end_of[p] * 1e6})
                events.append({"ph": "f", "bp": "e", "id": flow, "name": "dep", "cat": "dep", "pid": 0,
                               "tid": lane_of[r.tid], "ts": r.start * 1e6})
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def save(self, path) -> None:
        """Write the Chrome trace JSON to ``path`` (a str or ``os.PathLike``; open it in Perfetto or
        chrome://tracing)."""
        path = output_path(path, "Profile.save")
        with open(path, "w") as f:        # one string: json.dumps encodes in C, json.dump in Python chunks
            f.write(json.dumps(self.chrome_trace(), indent=None, separators=(",", ":")))

    def swimlane(self, path) -> None:
        """Draw the swimlane (one row per used core, colours per label) to ``path`` (a str or
        ``os.PathLike`` ending in .png or .svg)."""
        path = output_path(path, "Profile.swimlane", (".png", ".svg"))
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise PtoUnsupportedError("pto profile: the swimlane image needs matplotlib (pip install 'ptojax[plot]')") \
                from None
        records = self.trace.records
        lanes = sorted({(r.lane[0] != "AIC", *r.lane) for r in records})
        row = {(k, c): i for i, (_, k, c) in enumerate(lanes)}
        titles = sorted({r.title for r in records})
        colours = {t: colour(i) for i, t in enumerate(titles)}
        fig, ax = plt.subplots(figsize=(12, max(2.0, 0.3 * len(lanes) + 1)))
        bars: dict = {}                                   # one collection per lane and label: fast at many tasks
        for r in records:
            bars.setdefault((r.lane, r.title), []).append((r.start * 1e6, (r.end - r.start) * 1e6))
        for (lane, title), spans in bars.items():
            ax.broken_barh(spans, (row[lane] - 0.4, 0.8), facecolors=colours[title], edgecolor="black", linewidth=0.3)
        ax.set_yticks(range(len(lanes)), [f"{k} {c}" for _, k, c in lanes])
        ax.invert_yaxis()
        ax.set_xlabel("time (us)")
        ax.set_title(f"{self.trace.mode}: makespan {self.makespan_us:.2f} us, lower bound {self.lower_bound_us:.2f} us")
        if titles:                                        # a run of no tasks: the axes and the title alone
            ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours[t]) for t in titles], labels=titles,
                      loc="upper right", fontsize=7)
        fig.tight_layout()
        fig.savefig(path, format=path.suffix[1:].lower())
        plt.close(fig)
