"""Regressions from a probe of data-steered kernels (loops the runtime runs on the host, MoE).

Loops with no end: ``fori_loop(0, n, ...)`` with ``n`` from data (``2**31 - 1``) hung: a body of scalar work makes no task,
so ``MAX_TASKS`` never stopped it, and one task per trip made the unrolling quadratic (the L2 model
copied its dirty tensors per call; Python's collector walked every task made so far), so the task
limit was hours away. A loop stops at ``MAX_TRIPS`` trips now — before its first where its bounds
say so — and unrolling costs the same per trip however long the loop.

A profile without task bodies of a kernel whose host reads device data said ``execute=False``, an
argument of the orchestrator, not the ``compute=False`` the user passed.
"""
import gc
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from ptojax.mpmd import orchestrator

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from examples import moe_router as M  # noqa: E402

X = np.ones((8, 32), np.float32)


def scalar_count(x, n):
    with pj.tile(vec=(8, 32)):
        s = lax.fori_loop(0, n, lambda i, s: s + 1, jnp.int32(0))
        return x * s.astype(jnp.float32)


def one_task_per_trip(x, n):
    with pj.tile(vec=(8, 32)):
        return lax.fori_loop(0, n, lambda i, c: c + 1.0, x)


@pytest.mark.parametrize("fn", [scalar_count, one_task_per_trip])
def test_a_loop_of_too_many_trips_from_data_stops_before_it_starts(fn):
    start = time.perf_counter()
    for run in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
        with pytest.raises(Exception, match="a while loop of the kernel has 2,147,483,647 trips: .* at most "
                                            "100,000 .*MAX_TRIPS"):
            run(X, np.int32(2**31 - 1))
    assert time.perf_counter() - start < 60       # (a hang otherwise: not a timing of the runtime)


def test_the_same_loops_within_the_limit_compute():
    for fn in (scalar_count, one_task_per_trip):
        for n in (0, 1, 7):
            np.testing.assert_array_equal(pj.kernel(fn)(X, np.int32(n)), jax.jit(fn)(X, np.int32(n)))


def test_a_while_loop_that_does_not_end_stops_at_the_trip_limit(monkeypatch):
    monkeypatch.setattr(orchestrator, "MAX_TRIPS", 300)

    def forever(x, n):                       # its condition reads data the body does not change
        with pj.tile(vec=(8, 32)):
            return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] * 1, c[1] + 1), (jnp.int32(0), x))[1]

    with pytest.raises(pj.PtoOrchestrationError, match="a while loop of the kernel ran 300 trips and goes on"):
        pj.kernel(forever)(X, np.int32(5))


def test_unrolling_pauses_the_cyclic_collector_and_restores_it(monkeypatch):
    """Its full passes walked every task made so far: a loop of one block call per trip took 0.8 ms a
    trip at 16 000 trips against 0.46 ms at 4 000."""
    seen, run = [], orchestrator._Orchestrator.run
    monkeypatch.setattr(orchestrator._Orchestrator, "run", lambda self, *a: seen.append(gc.isenabled()) or run(self, *a))
    assert gc.isenabled()
    pj.kernel(one_task_per_trip)(X, np.int32(3))
    assert seen and not any(seen) and gc.isenabled()


def test_a_profile_without_task_bodies_of_a_steered_kernel_names_compute_false():
    args = M.inputs(seed=0)
    with pytest.raises(pj.PtoOrchestrationError, match=r"depends on device data .* this run executes none \(a run "
                                                        r"or profile with compute=False"):
        pj.kernel(M.moe_router).lower(*args).compile().profile(*args, compute=False)
