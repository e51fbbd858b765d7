"""Synthetic task graphs for testing and benchmarking the schedulers."""
from __future__ import annotations

import random

import numpy as np

from .graph import Region, Task, TaskGraph, TaskTable
from .orchestrator import Plan


def layered_dag(seed: int, stages: int = 6, width: tuple[int, int] = (3, 40), fan_in: int = 3,
                cost: tuple[float, float] = (1e-6, 20e-6), hbm: float = 0.0) -> Plan:
    """A random layered DAG: each stage's tasks (1/3 cube, 2/3 vector) write a region of their own and
    read up to ``fan_in`` regions written by earlier stages; stage = one block call. ``hbm``: each task
    reads up to ``hbm`` times its GM bytes from HBM (drawn uniformly; 0: none). The graph is built from
    the tasks' columns (:class:`TaskTable`); its :class:`Task` objects are made on first use."""
    rng = random.Random(seed)
    kinds = ("AIC", "AIV")
    core, costs, stage_of, nbytes, hbms, reads = [], [], [], [], [], []
    produced = []
    for stage in range(stages):
        for _ in range(rng.randint(*width)):
            core.append(kinds.index(rng.choice(["AIC", "AIV", "AIV"])))
            reads.append(rng.sample(produced, min(len(produced), rng.randint(0, fan_in))))
            costs.append(rng.uniform(*cost))
            nbytes.append(rng.randint(1_000, 100_000))
            hbms.append(int(nbytes[-1] * rng.uniform(0.0, hbm)) if hbm else 0)
            stage_of.append(stage)
        produced = list(range(len(core)))
    n = len(core)
    counts = np.fromiter(map(len, reads), np.int64, n)
    at = np.arange(n, dtype=np.int64)
    owner = np.concatenate([np.repeat(at, counts), at])         # each task's reads, then its write
    count = len(owner)
    buffer = np.concatenate([np.fromiter((b for r in reads for b in r), np.int64, int(counts.sum())), at])
    table = TaskTable(np.array(costs, np.float64), np.array(hbms, np.float64), np.array(core, np.int64), kinds,
                      np.array(stage_of, np.int64), owner, buffer, np.zeros((count, 1), np.int64),
                      np.ones((count, 1), np.int64), np.arange(count) >= count - n, np.zeros(count, bool))

    def make():
        return [Task(tid, f"p{stage}", kinds[k], f"S{stage}", c, None, tuple(Region(b, (0,), (1,)) for b in r),
                     (Region(tid, (0,), (1,)),), (tid,), stage, size, hbm=h)
                for tid, (k, c, r, stage, size, h) in enumerate(zip(core, costs, reads, stage_of, nbytes, hbms))]

    return Plan(TaskGraph.of_table(table, make), [], [], stages)
