"""Executors: run a :class:`~ptojax.mpmd.orchestrator.Plan` and record a trace.

* :func:`simulate` — deterministic, event-driven, on a simulated clock: cores of each kind take the
  highest-ranked ready task as soon as they are idle; each dispatch costs AICPU scheduler time (on the
  least busy of the machine's schedulers) plus a dispatch latency; a task runs for its predicted
  cost. Policy ``"mpmd"`` releases a task when its inputs are ready; ``"spmd"`` adds a global barrier
  after every block call (the baseline). Task bodies execute in simulated completion order, so the
  numbers are those of a real schedule. Same plan → the same trace, byte for byte.
* :func:`run_threads` — the same tasks on host threads with real concurrency (``workers`` threads
  pulling from one ranked ready queue); the trace holds wall-clock times.

A task that raises stops the run: :class:`PtoTaskError` names the task, program, label and core;
threads are joined first and no output is returned.
"""
from __future__ import annotations

import dataclasses
import heapq
import threading
import time
from typing import Callable

from ..errors import PtoArgumentError, PtoError
from .orchestrator import Plan
from .trace import Record, Trace


class PtoTaskError(PtoError, RuntimeError):
    """A task failed while running."""


@dataclasses.dataclass(frozen=True)
class Machine:
    """The target-agnostic machine model the executors schedule on."""

    cores: tuple[tuple[str, int], ...]     # core kinds in lane order, e.g. (("AIC", 24), ("AIV", 48))
    schedulers: int = 6                    # AICPU scheduler threads
    schedule_cost: float = 2e-6            # AICPU seconds spent per dispatched task
    dispatch_latency: float = 1e-6         # from the dispatch decision to the core starting
    bandwidth: float = 1.6e12              # GM bytes per second, for the lower bound
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
    tasks = plan.graph.tasks
    kinds = [k for k, _ in machine.cores]
    for task in tasks:
        if task.core not in kinds:
            raise PtoArgumentError(f"pto runtime: {task.describe()} needs a {task.core} core; the machine has {kinds}")
    ctx = worker() if (execute and worker) else None
    fanin = [len(t.preds) for t in tasks]
    stage_left: dict[int, int] = {}
    for t in tasks:
        stage_left[t.stage] = stage_left.get(t.stage, 0) + 1
    stages = sorted(stage_left)
    current = [0]                                       # index into stages (spmd)
    held: dict[int, list] = {}                          # spmd: ready tasks of later stages
    ready = {k: [] for k in kinds}
    idle = {k: list(range(n)) for k, n in machine.cores}
    for k in idle:
        heapq.heapify(idle[k])
    schedulers = [(0.0, i) for i in range(machine.schedulers)]   # (free at, index): a heap
    events: list = []
    seq = [0]
    records: list[Record] = []

    def push(time_, kind, payload):
        seq[0] += 1
        heapq.heappush(events, (time_, seq[0], kind, payload))

    def release(task, now):
        if policy == "spmd" and task.stage != stages[current[0]]:
            held.setdefault(task.stage, []).append(task)
            return
        heapq.heappush(ready[task.core], (-task.rank, task.tid))

    def dispatch(now):
        for kind in kinds:
            while ready[kind] and idle[kind]:
                _, tid = heapq.heappop(ready[kind])
                task = tasks[tid]
                core = heapq.heappop(idle[kind])
                free, s = schedulers[0]                     # the least busy AICPU scheduler
                decided = max(now, free) + machine.schedule_cost
                heapq.heapreplace(schedulers, (decided, s))
                start = decided + machine.dispatch_latency
                end = start + task.cost
                records.append(Record(task.tid, task.name, task.label, kind, core, decided, start, end, task.stage,
                                      tuple(p.tid for p in task.preds), task.index))
                push(end, "done", (task, core))

    for task in tasks:
        if not task.preds:
            release(task, 0.0)
    dispatch(0.0)
    while events:
        now, _, _, payload = heapq.heappop(events)
        task, core = payload
        if execute and task.run is not None:
            try:
                task.run(ctx)
            except Exception as exc:  # noqa: BLE001 - reported with the task's identity
                _fail(task, f"{task.core} {core}", exc)
        heapq.heappush(idle[task.core], core)
        for succ in task.succs:
            fanin[succ.tid] -= 1
            if fanin[succ.tid] == 0:
                release(succ, now)
        stage_left[task.stage] -= 1
        if policy == "spmd":
            while current[0] < len(stages) - 1 and stage_left[stages[current[0]]] == 0:
                current[0] += 1
                for t in held.pop(stages[current[0]], []):
                    release(t, now)
        dispatch(now)
    if len(records) != len(tasks):
        raise PtoTaskError(f"pto runtime: {len(tasks) - len(records)} task(s) never became ready")
    return Trace(tuple(sorted(records, key=lambda r: (r.start, r.tid))), machine, plan.graph, "simulated " + policy)


def run_threads(plan: Plan, machine: Machine, *, workers: int = 4, worker: Callable[[], object] | None = None) -> Trace:
    """Run ``plan`` on ``workers`` host threads; see the module docstring."""
    if workers < 1:
        raise PtoArgumentError(f"pto runtime: workers must be >= 1, got {workers}")
    tasks = plan.graph.tasks
    fanin = [len(t.preds) for t in tasks]
    ready = [(-t.rank, t.tid) for t in tasks if not t.preds]
    heapq.heapify(ready)
    cond = threading.Condition()
    state = {"left": len(tasks), "error": None}
    records: list[Record] = []
    origin = time.perf_counter()

    def loop(lane):
        ctx = worker() if worker else None
        while True:
            with cond:
                while not ready and state["left"] and state["error"] is None:
                    cond.wait(0.05)
                if state["error"] is not None or not state["left"]:
                    return
                _, tid = heapq.heappop(ready)
            task = tasks[tid]
            start = time.perf_counter() - origin
            try:
                if task.run is not None:
                    task.run(ctx)
            except Exception as exc:  # noqa: BLE001 - handed to the caller with the task's identity
                with cond:
                    state["error"] = (task, lane, exc)
                    cond.notify_all()
                return
            end = time.perf_counter() - origin
            with cond:
                records.append(Record(task.tid, task.name, task.label, task.core, lane, start, start, end, task.stage,
                                      tuple(p.tid for p in task.preds), task.index, host=True))
                for succ in task.succs:
                    fanin[succ.tid] -= 1
                    if fanin[succ.tid] == 0:
                        heapq.heappush(ready, (-succ.rank, succ.tid))
                state["left"] -= 1
                cond.notify_all()

    threads = [threading.Thread(target=loop, args=(i,), name=f"ptojax-worker-{i}", daemon=True) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if state["error"] is not None:
        task, lane, exc = state["error"]
        _fail(task, f"host thread {lane}", exc)
    return Trace(tuple(sorted(records, key=lambda r: (r.start, r.tid))), machine, plan.graph, f"threads x{workers}")
