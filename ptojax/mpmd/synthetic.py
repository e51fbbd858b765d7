"""Synthetic task graphs for testing and benchmarking the schedulers."""
from __future__ import annotations

import random

from .graph import Region, Task, TaskGraph
from .orchestrator import Plan


def layered_dag(seed: int, stages: int = 6, width: tuple[int, int] = (3, 40), fan_in: int = 3,
                cost: tuple[float, float] = (1e-6, 20e-6), hbm: float = 0.0) -> Plan:
    """A random layered DAG: each stage's tasks (1/3 cube, 2/3 vector) write a region of their own and
    read up to ``fan_in`` regions written by earlier stages; stage = one block call. ``hbm``: each task
    reads up to ``hbm`` times its GM bytes from HBM (drawn uniformly; 0: none)."""
    rng = random.Random(seed)
    tasks, produced = [], []
    for stage in range(stages):
        for _ in range(rng.randint(*width)):
            tid = len(tasks)
            core = rng.choice(["AIC", "AIV", "AIV"])
            reads = tuple(Region(b, (0,), (1,)) for b in rng.sample(produced, min(len(produced), rng.randint(0, fan_in))))
            task = Task(tid, f"p{stage}", core, f"S{stage}", rng.uniform(*cost), None, reads,
                        (Region(tid, (0,), (1,)),), (tid,), stage, rng.randint(1_000, 100_000))
            if hbm:
                task.hbm = int(task.bytes * rng.uniform(0.0, hbm))
            tasks.append(task)
        produced = list(range(len(tasks)))
    return Plan(TaskGraph(tasks), [], [], stages)
