"""Executors: run a :class:`~ptojax.mpmd.orchestrator.Plan` and record a trace.

* :func:`simulate` — deterministic, event-driven, on a simulated clock: cores of each kind take the
  highest-ranked ready task as soon as they are idle; each dispatch costs AICPU scheduler time (on the
  least busy of the machine's schedulers) plus a dispatch latency; a task runs for its predicted
  cost, longer when the die's HBM channel is behind with its HBM bytes (``Task.hbm``, mpmd/l2.py). Policy ``"mpmd"`` releases a task when its inputs are ready; ``"spmd"`` adds a global barrier
  after every block call (the baseline). The event loop is ``schedule.py``. Same plan →
  the same trace, byte for byte. The task bodies run after the timeline is built: when the plan has
  batch runners (``Plan.batches``), in a dependency order that runs the ready tasks of one group as
  one batch (``BATCH_MIN`` of them or more); otherwise one by one in simulated completion order. Tasks that are ready together never
  touch each other's GM regions, so every dependency order gives the same numbers. :func:`replay`
  runs a replayable plan's bodies again the same way, on the trace it already has.
* :func:`run_threads` — the same tasks on host threads with real concurrency (``workers`` threads
  pulling from one ranked ready queue); the trace holds wall-clock times. With batch runners, a thread
  takes its share of the ready tasks of one group (up to 1/``workers`` of the group) and runs them as one batch,
  whose wall time its tasks share evenly, one after another on the thread's lane.

A task that raises stops the run: :class:`PtoTaskError` names the task, program, label and core;
threads are joined first and no output is returned.
"""
from __future__ import annotations

import collections
import dataclasses
import gc
import heapq
import threading
import time
from typing import Callable

import numpy as np

from ..errors import PtoArgumentError
from .graph import PtoTaskError
from .orchestrator import Plan
from .schedule import dispatch
from .trace import Trace


@dataclasses.dataclass(frozen=True)
class Machine:
    """The target-agnostic machine model the executors schedule on."""

    cores: tuple[tuple[str, int], ...]     # core kinds in lane order, e.g. (("AIC", 24), ("AIV", 48))
    schedulers: int = 6                    # AICPU scheduler threads
    schedule_cost: float = 2e-6            # AICPU seconds spent per dispatched task
    dispatch_latency: float = 1e-6         # from the dispatch decision to the core starting
    bandwidth: float = 1.6e12              # HBM bytes per second of the die: the simulated channel and the bound
    name: str = "machine"

    def count(self, kind: str) -> int:
        return dict(self.cores)[kind]


def _fail(task, core, exc):
    raise PtoTaskError(f"pto runtime: {task.describe()} (core {core}) failed: {type(exc).__name__}: {exc}") from exc


def simulate(plan: Plan, machine: Machine, *, policy: str = "mpmd", execute: bool = True,
             worker: Callable[[], object] | None = None) -> Trace:
    """Event-driven execution of ``plan`` on ``machine``; see the module docstring."""
    if policy not in ("mpmd", "spmd"):
        raise PtoArgumentError(f"pto runtime: policy {policy!r} is not 'mpmd' or 'spmd'")
    graph = plan.graph
    kinds = [k for k, _ in machine.cores]
    missing = [k for k in graph.core_kinds.tolist() if k not in kinds]
    if missing:
        task = next(t for t in graph.tasks if t.core == missing[0])
        raise PtoArgumentError(f"pto runtime: {task.describe()} needs a {task.core} core; the machine has {kinds}")
    kind = np.array([kinds.index(k) for k in graph.core_kinds.tolist()], np.int64)[graph.core_codes]
    ctx = worker() if (execute and worker) else None
    cores = np.array([count for _, count in machine.cores], np.int64)
    collecting = gc.isenabled()
    gc.disable()                # the schedule makes many small objects and no garbage: no collections
    try:
        start, tid, core, decided, end = dispatch(
            kind, graph.by_rank, graph.costs, graph.hbm / machine.bandwidth, graph.succ_start,
            graph.succ_ids, graph.fanin, graph.stage_codes, graph.stage_sizes, cores, machine.schedulers,
            machine.schedule_cost, machine.dispatch_latency, policy == "spmd")
        if len(tid) != len(graph):
            raise PtoTaskError(f"pto runtime: {len(graph) - len(tid)} task(s) never became ready")
    finally:
        if collecting:
            gc.enable()
    trace = Trace(_columns(start, tid, core, decided, end), machine, plan.graph, "simulated " + policy)
    if execute:
        _execute(plan, ctx, trace.rows)
    return trace


def _columns(start, tid, core, decided, end) -> tuple:
    """The dispatches (sequences, one entry each) as the arrays of :attr:`Trace.columns`: sorted by
    start, then task id."""
    columns = [np.asarray(start, np.float64), np.asarray(tid, np.int64), np.asarray(core, np.int64),
               np.asarray(decided, np.float64), np.asarray(end, np.float64)]
    start, tid = columns[0], columns[1]
    order = np.argsort(start, kind="stable")
    if len(order) > 1:                      # then by task id within runs of equal starts
        start = start[order]
        new = np.append(True, start[1:] != start[:-1])
        order = order[np.argsort(np.cumsum(new) * (int(tid.max()) + 1) + tid[order], kind="stable")]
    return tuple(column[order] for column in columns)


def replay(plan: Plan, trace: Trace, worker: Callable[[], object] | None = None, *, ctx=None) -> None:
    """Run the task bodies of ``plan`` again (after :meth:`Plan.rebind`) as :func:`simulate` ran them
    for ``trace``, its trace: the timeline does not depend on the inputs' values, so it is not rebuilt,
    nor is the order of the bodies (kept on the plan). ``ctx``: a worker context to run them with
    (default: a new one from ``worker``)."""
    if plan.steps is None:
        plan.steps = _steps(plan, trace.rows)
    _run_steps(plan, ctx if ctx is not None else (worker() if worker else None), plan.steps, trace.rows)


def _execute(plan: Plan, ctx, done) -> None:
    """Run the task bodies, given the timeline's rows ``done``."""
    _run_steps(plan, ctx, _steps(plan, done), done)


BATCH_MIN = 2          # ready tasks of one group that run as one batch (the backend runs it as it sees fit)


def _steps(plan: Plan, done) -> list:
    """The order the task bodies run in: (batch group or None, tasks). With batch runners
    (``Plan.batches``): a dependency order that puts tasks of one group (``Task.batch``) that are ready
    together into one step (``BATCH_MIN`` of them or more; ready tasks never depend on each other, so
    the results equal any one-by-one run). Otherwise one task per step, in simulated completion order."""
    tasks = plan.graph.tasks
    if not plan.batches:
        return [(None, [tasks[row[1]]]) for row in sorted(done, key=lambda row: row[4]) if tasks[row[1]].run is not None]
    steps = []
    fanin = [len(t.preds) for t in tasks]
    finished = [False] * len(tasks)
    ready = [t.tid for t in tasks if not t.preds]       # a heap: the lowest ready task id goes first
    waiting: dict = {}                                  # group -> its ready task ids
    for tid in ready:
        if tasks[tid].batch is not None:
            waiting.setdefault(tasks[tid].batch[0], []).append(tid)
    while ready:
        tid = heapq.heappop(ready)
        if finished[tid]:
            continue
        task = tasks[tid]
        members = [tid] if task.batch is None else sorted(waiting.pop(task.batch[0]))
        group = [tasks[m] for m in members if tasks[m].run is not None]    # not run already at a host sync
        if task.batch is None or len(group) < BATCH_MIN:
            steps += [(None, [t]) for t in group]
        else:
            steps.append((task.batch[0], group))
        for m in members:
            finished[m] = True
            for succ in tasks[m].succs:
                s = succ.tid
                fanin[s] -= 1
                if not fanin[s]:
                    heapq.heappush(ready, s)
                    if succ.batch is not None:
                        waiting.setdefault(succ.batch[0], []).append(s)
    return steps


def _run_steps(plan: Plan, ctx, steps, done) -> None:
    """Run ``steps`` (:func:`_steps`). A task that fails is reported with its core (from ``done``)."""
    for _, members in steps:
        _run_group(plan, members, ctx, lambda task, exc: _fail_on_core(task, done, exc))


def _run_group(plan: Plan, members, ctx, fail) -> None:
    """Run ``members`` (tasks with bodies, of one batch group where more than one): as one batch where
    they are ``BATCH_MIN`` or more; a failing batch is rerun task by task to name the task.
    ``fail(task, exc)`` raises."""
    batch_exc = None
    if len(members) >= BATCH_MIN:
        try:
            plan.batches[members[0].batch[0]]([t.batch[1] for t in members], ctx)
            return
        except Exception as exc:  # noqa: BLE001 - find the task that fails on its own
            batch_exc = exc
    for task in members:
        try:
            task.run(ctx)
        except Exception as exc:  # noqa: BLE001 - reported with the task's identity
            fail(task, exc)
    if batch_exc is not None:
        fail(members[0], batch_exc)


def _fail_on_core(task, done, exc):
    core = next(row[2] for row in done if row[1] == task.tid)
    _fail(task, f"{task.core} {core}", exc)


def run_threads(plan: Plan, machine: Machine, *, workers: int = 4, worker: Callable[[], object] | None = None) -> Trace:
    """Run ``plan`` on ``workers`` host threads; see the module docstring."""
    if workers < 1:
        raise PtoArgumentError(f"pto runtime: workers must be >= 1, got {workers}")
    tasks = plan.graph.tasks
    fanin = [len(t.preds) for t in tasks]
    ready: list = []                        # a heap of (-rank, tid)
    waiting: dict = {}                      # batch group -> its ready task ids (taken ones included)
    taken = [False] * len(tasks)
    sizes = collections.Counter(t.batch[0] for t in tasks if t.batch is not None)
    cond = threading.Condition()
    state = {"left": len(tasks), "error": None}
    rows: list = []
    origin = time.perf_counter()

    def push(task):
        heapq.heappush(ready, (-task.rank, task.tid))
        if task.batch is not None and plan.batches:
            waiting.setdefault(task.batch[0], []).append(task.tid)

    def any_ready() -> bool:
        while ready and taken[ready[0][1]]:          # taken with a mate of their group
            heapq.heappop(ready)
        return bool(ready)

    def take() -> list:
        """The next task and, when it has a batch group, the thread's share of its group's ready tasks."""
        task = tasks[heapq.heappop(ready)[1]]
        tid = task.tid
        members = [tid]
        if task.batch is not None and plan.batches:
            mates = [m for m in waiting.pop(task.batch[0]) if not taken[m] and m != tid]
            share = -(-sizes[task.batch[0]] // workers) - 1
            members += mates[:share]
            if mates[share:]:
                waiting[task.batch[0]] = mates[share:]
        for m in members:
            taken[m] = True
        return [tasks[m] for m in members]

    def fail(task, exc):
        raise _Failed(task) from exc

    def loop(lane):
        ctx = worker() if worker else None
        while True:
            with cond:
                while not any_ready() and state["left"] and state["error"] is None:
                    cond.wait(0.05)
                if state["error"] is not None or not state["left"]:
                    return
                members = take()
            start = time.perf_counter() - origin
            try:
                _run_group(plan, [t for t in members if t.run is not None], ctx, fail)
            except _Failed as failed:
                with cond:
                    state["error"] = (failed.task, lane, failed.__cause__)
                    cond.notify_all()
                return
            end = time.perf_counter() - origin
            step = (end - start) / len(members)       # a batch's time shared out: one task at a time per lane
            with cond:
                for k, task in enumerate(members):
                    rows.append((start + k * step, task.tid, lane, start + k * step, start + (k + 1) * step))
                    for succ in task.succs:
                        fanin[succ.tid] -= 1
                        if fanin[succ.tid] == 0:
                            push(succ)
                state["left"] -= len(members)
                cond.notify_all()

    for task in tasks:
        if not task.preds:
            push(task)
    threads = [threading.Thread(target=loop, args=(i,), name=f"ptojax-worker-{i}", daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if state["error"] is not None:
        task, lane, exc = state["error"]
        _fail(task, f"host thread {lane}", exc)
    return Trace(_columns(*(zip(*rows) if rows else [()] * 5)), machine, plan.graph, f"threads x{workers}", host=True,
                 threads=workers)


class _Failed(Exception):
    """A task body that raised (its exception the cause)."""

    def __init__(self, task):
        super().__init__(task.describe())
        self.task = task
