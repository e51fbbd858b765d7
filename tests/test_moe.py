"""Dynamic shapes: the orchestrator reads device data (synchronises), and the MoE example built on it."""
from __future__ import annotations

import collections
import itertools
import runpy
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from helpers import F16, F32, assert_close, rand
from ptojax import ops as O
from ptojax.ascend.program import AscendBackend, compile_kernel
from ptojax.ascend.targets import A3
from ptojax.execute import machine
from ptojax.mpmd import PtoOrchestrationError, PtoTaskError, orchestrate, simulate

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from examples import moe_router as M  # noqa: E402
PER_TILE = {"Gather": 2, "ExpertFFN": 4, "Scatter": 1}      # tasks per expert tile: index add + gather; 3 matmuls + silu


def _device_bound(x):
    """A loop whose trip count is computed in the kernel: round(x[0, 0])."""
    with pj.tile(vec=(8, 64)):
        n = O.cast(O.sum(x[:1, :1], axis=(0, 1)), jnp.int32)
        return jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)


class _Counting:
    """An AscendBackend whose task bodies count their runs (and can be made to fail)."""

    def __init__(self, low, fail=None):
        self.inner = AscendBackend(compile_kernel(low), A3)
        self.runs = collections.Counter()
        self.keys = itertools.count()
        self.fail = fail

    def task(self, part, points, arrays):
        work, cost, nbytes = self.inner.task(part, points, arrays)
        key = next(self.keys)

        def run(ctx):
            if part.program.name == self.fail:
                raise FloatingPointError("injected")
            self.runs[key] += 1
            work(ctx)

        return run, cost, nbytes

    def copy_cost(self, nbytes):
        return self.inner.copy_cost(nbytes)

    def fill_cost(self, nbytes):
        return self.inner.fill_cost(nbytes)

    def worker(self):
        return self.inner.worker()


def _plan(low, x, backend, **kw):
    return orchestrate(low.block.jaxpr, low.block.consts, [x], backend, **kw)


@pytest.mark.parametrize("n", [0, 3, 5])
def test_a_bound_computed_in_the_kernel_is_read_by_the_host(n):
    x = rand((16, 64), F32, 1, -1, 1)
    x[0, 0] = n
    low = pj.lower(_device_bound, x)
    backend = _Counting(low)
    plan = _plan(low, x, backend)
    assert plan.syncs == 1
    synced = [t for t in plan.graph.tasks if t.run is None]
    assert [t.name for t in synced] == ["view+sum+cast"]                   # ran at the sync: the bound's one program
    trace = simulate(plan, machine(A3), worker=backend.worker)
    assert len(trace.records) == 1 + 2 * n                                  # the loop body is 2 tasks of 8 rows
    assert set(backend.runs.values()) == {1} and len(backend.runs) == len(plan.graph.tasks)
    assert_close(plan.results()[0], np.asarray(jax.jit(_device_bound)(x)), F32)
    ends = {r.tid: r.end for r in trace.records}
    cast = next(r.tid for r in trace.records if r.name == "view+sum+cast")
    assert all(r.start >= ends[cast] for r in trace.records if r.tid > cast)   # nothing emitted before the read


def test_reading_device_data_without_executing_is_an_error():
    x = rand((16, 64), F32, 1, -1, 1)
    x[0, 0] = 2
    low = pj.lower(_device_bound, x)
    with pytest.raises(PtoOrchestrationError, match=r"pto runtime: the host op 'pto\.lt' depends on device data "
                       r"\(GM tensor int32\[\] written by task 0 'view\+sum\+cast\(0,0\)' on AIV\); .* this run "
                       r"executes none \(a run or profile with compute=False"):
        _plan(low, x, _Counting(low), execute=False)


def test_a_task_failing_at_a_sync_names_the_task():
    x = rand((16, 64), F32, 1, -1, 1)
    low = pj.lower(_device_bound, x)
    with pytest.raises(PtoTaskError, match=r"task 0 'view\+sum\+cast\(0,0\)' on AIV failed while the host read device "
                       r"data for the host op 'pto\.lt': FloatingPointError: injected"):
        _plan(low, x, _Counting(low, fail="view+sum+cast"))


# ------------------------------------------------------------------------------------ the MoE example
@pytest.fixture(scope="module")
def moe():
    kernel = pj.kernel(M.moe_router)
    base = M.inputs()
    return kernel, kernel.lower(*base).compile(), base


def _routed(base, bias):
    return (*base[:2], bias, *base[3:])


def test_one_compiled_moe_kernel_serves_every_routing(moe):
    kernel, compiled, base = moe
    fixed, totals = None, []
    for name, bias in M.ROUTINGS.items():
        args = _routed(base, bias)
        (out, counts), trace = compiled.run(*args)
        want, want_counts = M.reference(*args)
        np.testing.assert_array_equal(counts, want_counts)
        assert_close(out, want, F16)      # fp16 operands, one fp16 rounding (the SwiGLU product), fp32 accumulation
        tiles = int(np.sum(-(-counts // M.ROWS)))
        labels = M.tasks_per_label(trace)
        for label, per_tile in PER_TILE.items():
            assert labels.get(label, 0) == per_tile * tiles, (name, label, labels)
        rest = {k: v for k, v in labels.items() if k not in PER_TILE}
        assert rest["Count"] == M.EXPERTS
        assert fixed is None or rest == fixed                               # routing and combine do not vary
        fixed = rest
        totals.append((tiles, len(trace.records)))
        if name == "expert 0 takes all, expert 3 none":
            assert counts[0] == M.TOKENS and counts[3] == 0
    assert [t for t, _ in totals] == [8, 8, 4]
    assert totals[2][1] == totals[0][1] - 7 * 4                             # 4 tiles fewer, 7 tasks each
    args = _routed(base, M.ROUTINGS["experts 6 and 7 only"])
    out, counts = kernel(*args)                                             # the kernel object: its cache
    jitted, _ = jax.jit(kernel)(*args)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(out))
    threads, _ = compiled.run(*args, executor="threads")
    np.testing.assert_array_equal(threads[0], np.asarray(out))
    assert list(np.asarray(counts)) == [0] * 6 + [M.TOKENS] * 2
    assert kernel.compiles == 1


def test_expert_tiles_wait_for_the_host_to_read_their_bound(moe):
    _, compiled, base = moe
    (_, counts), trace = compiled.run(*_routed(base, M.ROUTINGS["expert 0 takes all, expert 3 none"]))
    records = sorted(trace.records, key=lambda r: r.tid)
    count_ends = [r.end for r in records if r.label == "Count"]
    loop = [r for r in records if r.label in PER_TILE]
    per_tile = sum(PER_TILE.values())
    start = 0
    for e, n in enumerate(-(-counts // M.ROWS)):
        mine = loop[start:start + per_tile * n]
        start += per_tile * n
        assert all(r.start >= max(count_ends[:e + 1]) for r in mine), e
    assert start == len(loop)
    first_gather = min(r.start for r in loop)
    assert first_gather > min(r.start for r in records if r.label == "Count")


def test_moe_on_the_xla_backend_matches_the_reference():
    kernel = pj.kernel(M.moe_router, backend="xla")
    fn = jax.jit(kernel)
    base = M.inputs(seed=3)
    for bias in (M.ROUTINGS["learned"], M.ROUTINGS["experts 6 and 7 only"]):
        args = _routed(base, bias)
        out, counts = fn(*args)
        want, want_counts = M.reference(*args)
        np.testing.assert_array_equal(np.asarray(counts), want_counts)
        assert_close(np.asarray(out), want, F16)
    assert kernel.compiles == 1


def test_moe_example_runs(capsys):
    runpy.run_path(str(ROOT / "examples" / "moe_router.py"), run_name="__main__")
    text = capsys.readouterr().out
    assert text.count("(reference agrees)") == len(M.ROUTINGS) and "compiles: 1" in text


def test_moe_shapes_it_cannot_group_are_rejected():
    x, w_router, bias, w_gate, w_up, w_down = M.inputs()
    kernel = pj.kernel(M.moe_router)
    with pytest.raises(pj.PtoShapeError, match=r"moe_router: 24 tokens is not a positive multiple of the expert tile's 16 rows"):
        kernel.lower(x[:24], w_router, bias, w_gate, w_up, w_down)
    with pytest.raises(pj.PtoShapeError, match=r"moe_router: 7 gate, 8 up and 8 down weights for 8 experts"):
        kernel.lower(x, w_router, bias, w_gate[:7], w_up, w_down)
