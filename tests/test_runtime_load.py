"""The runtime under load: random DAGs with real work, random durations and injected failures on the
threaded executor — no deadlock, the event-driven executor's results, failures named; determinism."""
import json
import random
import time

import jax
import numpy as np
import pytest

import ptojax as pj
from ptojax.mpmd import Machine, Plan, PtoTaskError, Region, Task, TaskGraph, run_threads, simulate
from kernels import KERNELS

MACHINE = Machine((("AIC", 24), ("AIV", 48)), 6, 2e-6, 1e-6, 1.42e12, "a3")


def working_dag(seed, max_tasks, fail_at=None):
    """Each task reads some earlier tasks' cells and writes its own: value = f(inputs, tid)."""
    rng = random.Random(seed)
    n = rng.randint(2, max_tasks)
    cells = np.zeros(n, np.int64)
    tasks = []
    for tid in range(n):
        inputs = rng.sample(range(tid), min(tid, rng.randint(0, 3)))

        def work(_ctx, tid=tid, inputs=tuple(inputs), sleep=rng.random() < 0.01):
            if tid == fail_at:
                raise ArithmeticError(f"injected failure in task {tid}")
            if sleep:
                time.sleep(0.0005)                     # a random straggler
            cells[tid] = (sum(int(cells[i]) for i in inputs) * 31 + tid) % 1_000_003

        tasks.append(Task(tid, f"p{tid % 7}", rng.choice(["AIC", "AIV"]), f"L{tid % 5}", rng.uniform(1e-7, 5e-5), work,
                          tuple(Region(i, (0,), (1,)) for i in inputs), (Region(tid, (0,), (1,)),), (tid,)))
    return Plan(TaskGraph(tasks), [], [], 1), cells


def test_threaded_executor_under_load_matches_the_event_driven_one():
    start = time.perf_counter()
    for seed in range(100):
        plan, cells = working_dag(seed, 2000)
        simulate(plan, MACHINE)
        expected = cells.copy()
        cells[:] = 0
        run_threads(plan, MACHINE, workers=1 + seed % 8)
        np.testing.assert_array_equal(cells, expected)
    assert time.perf_counter() - start < 120                  # every run ended (no deadlock)


@pytest.mark.slow
def test_thousand_dags_up_to_ten_thousand_tasks():
    for seed in range(1000):
        plan, cells = working_dag(seed, 10_000)
        simulate(plan, MACHINE)
        expected = cells.copy()
        cells[:] = 0
        run_threads(plan, MACHINE, workers=8)
        np.testing.assert_array_equal(cells, expected)


@pytest.mark.parametrize("executor", ["simulated", "threads"])
def test_injected_failures_are_named_and_never_hang(executor):
    for seed in range(20):
        plan, _ = working_dag(seed, 3000)
        victim = random.Random(seed).randrange(len(plan.graph))
        plan, _ = working_dag(seed, 3000, fail_at=victim)
        start = time.perf_counter()
        with pytest.raises(PtoTaskError, match=rf"task {victim} 'p{victim % 7}\({victim}\)' label 'L{victim % 5}' on "
                                               rf"A[IV][CV] .*ArithmeticError: injected failure in task {victim}"):
            if executor == "simulated":
                simulate(plan, MACHINE)
            else:
                run_threads(plan, MACHINE, workers=4)
        assert time.perf_counter() - start < 5.0


@pytest.mark.parametrize("name,kernel,args", KERNELS[::4], ids=[k[0] for k in KERNELS[::4]])
def test_bit_identical_across_runs_executors_and_workers(name, kernel, args):
    compiled = pj.kernel(kernel).lower(*args).compile()
    runs = [compiled.run(*args, executor="simulated") for _ in range(2)]
    runs += [pj.kernel(kernel, executor="threads", workers=w).lower(*args).compile().run(*args) for w in (1, 3, 8)]
    first = [np.asarray(x) for x in jax.tree.leaves(runs[0][0])]
    for out, _ in runs[1:]:
        for a, b in zip(first, jax.tree.leaves(out)):
            assert a.dtype == np.asarray(b).dtype
            np.testing.assert_array_equal(a.view(np.uint8), np.asarray(b).view(np.uint8))   # bit for bit
    traces = [json.dumps(r[1].profile().chrome_trace()) for r in runs[:2]]
    assert traces[0] == traces[1]


def test_batch_tapes_are_kept_safely_from_several_threads(monkeypatch):
    """The threaded executor's cores record batch tapes at once: keeping one (which sums and evicts
    the kept ones) while another core keeps or reorders them raised "OrderedDict mutated during
    iteration" inside a task (a flaky docs/runtime.md run in CI)."""
    import sys

    from helpers import in_threads
    from ptojax.ascend import textbatch

    monkeypatch.setattr(textbatch, "_TAPES", textbatch.collections.OrderedDict())
    monkeypatch.setattr(textbatch, "TAPES", 512)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                   # switch threads often: inside the sum, if unguarded

    def keep(worker):                             # the race shows as any exception
        for i in range(3000):
            textbatch._keep((worker, i), (None, None, None, 1))

    errors = in_threads(keep, 4)
    sys.setswitchinterval(interval)
    assert not errors, errors[0]
    assert len(textbatch._TAPES) <= textbatch.TAPES
