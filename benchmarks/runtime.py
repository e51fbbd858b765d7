"""MPMD runtime benchmarks: dependency-driven (MPMD) vs barrier-per-stage (SPMD) schedules on random
DAGs (half of them reading from HBM), makespan against the lower bound, and the scheduler's throughput
end to end (building the task graph from the tasks' columns, then dispatching it) on a 100 000-task DAG,
and ``compiled.profile()`` end to end (orchestration, task graph, dispatch, profile) on a real kernel of
62 500 tasks.

Run: ``python benchmarks/runtime.py``; the exit status is 1 when a target fails (throughput >= 250 000
tasks/s; no makespan below its bound; MPMD faster than SPMD on average; the kernel's profile raises). Ratios come from one run on
one machine; the throughput is host time, the schedule figures simulated time on the a3 machine model.
"""
import gc
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj

from ptojax.ascend.targets import A3
from ptojax.execute import machine
from ptojax.mpmd import Plan, TaskGraph, simulate
from ptojax.mpmd.synthetic import layered_dag


TARGET_TASKS_PER_S = 250_000


def policies(count=50) -> bool:
    """MPMD against SPMD and the lower bound on ``count`` random DAGs; True when no makespan is below its
    bound and MPMD is faster than SPMD on average."""
    m = machine(A3)
    ratios, bounds = [], []
    for seed in range(count):
        plan = layered_dag(seed, hbm=100.0 * (seed % 2))        # odd seeds read from HBM
        mpmd = simulate(plan, m, policy="mpmd", execute=False).profile()
        spmd = simulate(plan, m, policy="spmd", execute=False).profile()
        ratios.append(mpmd.makespan_us / spmd.makespan_us)
        bounds += [mpmd.makespan_us / mpmd.lower_bound_us, spmd.makespan_us / spmd.lower_bound_us]
    print(f"MPMD / SPMD makespan over {count} random DAGs: mean {np.mean(ratios):.3f}, "
          f"best {min(ratios):.3f}, worst {max(ratios):.3f}")
    print(f"makespan / lower bound: mean {np.mean(bounds):.3f}, least {min(bounds):.4f} (never below 1), "
          f"worst {max(bounds):.3f}")
    return min(bounds) >= 1 - 1e-9 and float(np.mean(ratios)) < 1.0


def throughput(tasks=100_000, repeats=3):
    """The scheduler end to end on a layered ``tasks``-task DAG: build the task graph from the tasks'
    columns (:class:`TaskTable`: dependencies, ranks), then schedule it on the cost model (no task
    bodies), ``repeats`` times; print and return the median tasks/s. Printed apart: what is made
    on first use -- the tasks' ``preds``/``succs`` lists, which the scheduler does not read, and the
    trace's ``rows`` tuples (its columns are arrays) -- and the graph built from the :class:`Task`
    objects instead (``TaskGraph(tasks)``, as the orchestrator builds it)."""
    stages = 50
    plan = layered_dag(7, stages=stages, width=(tasks // stages, tasks // stages), fan_in=2)
    table, n, m = plan.graph.table, len(plan.graph), machine(A3)
    builds, dispatches, links, rows, objects = [], [], [], [], []
    for _ in range(repeats):
        gc.collect()                                # a collection owed by earlier allocations is not timed
        start = time.perf_counter()
        graph = TaskGraph.of_table(table, lambda: plan.graph.tasks)
        built = time.perf_counter()
        trace = simulate(Plan(graph, [], [], stages), m, execute=False)
        builds.append(built - start)
        dispatches.append(time.perf_counter() - built)
        start = time.perf_counter()
        graph.link_tasks()                          # the tasks' preds/succs lists: made on first use, not timed above
        links.append(time.perf_counter() - start)
        start = time.perf_counter()
        if len(trace.rows) != n:                    # the (start, tid, core, dispatch, end) tuples: made on first use
            raise RuntimeError(f"the schedule has {len(trace.rows)} rows for {n} tasks")
        rows.append(time.perf_counter() - start)
        gc.collect()
        start = time.perf_counter()
        TaskGraph(graph.tasks)
        objects.append(time.perf_counter() - start)
    totals = [b + d for b, d in zip(builds, dispatches)]
    k = int(np.argsort(totals)[len(totals) // 2])   # the median run
    print(f"scheduler end to end: {n} tasks in {totals[k]:.3f} s (graph {builds[k]:.3f} s, dispatch "
          f"{dispatches[k]:.3f} s; median of {repeats}; best {n / min(totals):,.0f} tasks/s) = {n / totals[k]:,.0f} "
          f"tasks/s (graph alone {n / builds[k]:,.0f}, dispatch alone {n / dispatches[k]:,.0f}); simulated makespan "
          f"{trace.makespan * 1e3:.2f} ms; "
          f"made on first use: the tasks' preds/succs lists {min(links):.3f} s, the trace's rows "
          f"{min(rows):.3f} s; the graph built from the Task objects instead: {min(objects):.3f} s")
    return n / totals[k]


def kernel_profile(rows=250, cols=250) -> float:
    """``compiled.profile()`` end to end on an elementwise kernel of ``rows * cols`` tasks (one (8, 16) tile
    each): orchestration (twice: once to find that no argument steers the schedule, once on zeros), the
    task graph, the dispatch on the cost model and the profile; print and return its tasks/s."""
    @pj.kernel
    def scale(x):
        with pj.tile(vec=(8, 16)):
            return x * 2.0 + 1.0

    compiled = scale.lower(jax.ShapeDtypeStruct((8 * rows, 16 * cols), jnp.float32)).compile()
    gc.collect()
    start = time.perf_counter()
    profile = compiled.profile()
    seconds = time.perf_counter() - start
    if profile.tasks != rows * cols:
        raise RuntimeError(f"the profile has {profile.tasks} tasks, expected {rows * cols}")
    print(f"compiled.profile() end to end: {profile.tasks} tasks of an elementwise kernel in {seconds:.2f} s = "
          f"{profile.tasks / seconds:,.0f} tasks/s (simulated makespan {profile.makespan_us / 1e3:.2f} ms)")
    return profile.tasks / seconds


def main() -> int:
    ok = policies()
    rate = throughput()
    kernel_profile()            # a measure that raises exits non-zero
    fast = rate >= TARGET_TASKS_PER_S
    print(f"{'PASS' if fast else 'FAIL'} scheduler throughput {rate:,.0f} tasks/s (target >= {TARGET_TASKS_PER_S:,})")
    print(f"{'PASS' if ok else 'FAIL'} every makespan at or above its lower bound; MPMD faster than SPMD on average")
    return 0 if ok and fast else 1


if __name__ == "__main__":
    sys.exit(main())
