"""MPMD runtime benchmarks: dependency-driven (MPMD) vs barrier-per-stage (SPMD) schedules on random
DAGs, makespan against the lower bound, and scheduler throughput on a 100 000-task DAG.

Run: ``python benchmarks/runtime.py``. Ratios come from one run on one machine; the throughput lines
(building the task graph, then the executor) are host time, the schedule figures are simulated time on
the a3 machine model.
"""
import gc
import time

import numpy as np

from ptojax.ascend.targets import A3
from ptojax.execute import machine
from ptojax.mpmd import TaskGraph, simulate
from ptojax.mpmd.synthetic import layered_dag


def policies(count=50):
    m = machine(A3)
    ratios, bounds = [], []
    for seed in range(count):
        plan = layered_dag(seed)
        mpmd = simulate(plan, m, policy="mpmd", execute=False).profile()
        spmd = simulate(plan, m, policy="spmd", execute=False).profile()
        ratios.append(mpmd.makespan_us / spmd.makespan_us)
        bounds.append(mpmd.makespan_us / mpmd.lower_bound_us)
    print(f"MPMD / SPMD makespan over {count} random DAGs: mean {np.mean(ratios):.3f}, "
          f"best {min(ratios):.3f}, worst {max(ratios):.3f}")
    print(f"MPMD makespan / lower bound: mean {np.mean(bounds):.3f}, worst {max(bounds):.3f}")


def throughput(tasks=100_000, repeats=3):
    """Schedule a layered ``tasks``-task DAG on the cost model (no task bodies), ``repeats`` times; print
    and return the median tasks/s."""
    stages = 50
    plan = layered_dag(7, stages=stages, width=(tasks // stages, tasks // stages), fan_in=2)
    n = len(plan.graph)
    for task in plan.graph.tasks:                   # unlink the tasks and time building the same graph again
        task.preds, task.succs = [], []
    gc.collect()                                    # a collection owed by earlier allocations is not timed
    start = time.perf_counter()
    TaskGraph(plan.graph.tasks)
    build = time.perf_counter() - start
    print(f"task graph (link, validate, rank): {n} tasks in {build:.2f} s = {n / build:,.0f} tasks/s")
    m = machine(A3)
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        trace = simulate(plan, m, execute=False)
        times.append(time.perf_counter() - start)
    seconds = float(np.median(times))
    print(f"event-driven executor: {n} tasks in {seconds:.2f} s (median of {repeats}) = {n / seconds:,.0f} tasks/s "
          f"(simulated makespan {trace.makespan * 1e3:.2f} ms)")
    return n / seconds


if __name__ == "__main__":
    policies()
    throughput()
