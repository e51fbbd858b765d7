"""Replayed plans: a compiled kernel whose orchestration read no input value runs its tasks again on
new inputs, with no orchestration and the same trace."""
import sys
import weakref
from pathlib import Path

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import fuzz
import ptojax as pj
from helpers import in_threads, rand
from ptojax.execute import execute
from kernels import KERNELS, scatter_rows

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import moe_router as M  # noqa: E402


def _rolled(args, shift=1):
    """Arguments of the same shapes and dtypes with other values (each rolled along its flat index)."""
    return [np.roll(np.asarray(a).reshape(-1), shift).reshape(np.shape(a)) for a in args]


def _fresh(compiled, args):
    """The kernel on ``args`` through a fresh orchestration (no kept plans)."""
    return execute(compiled.lowering, *args, compiled=compiled._code())


def _same(got, want):
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8))


@pytest.mark.parametrize("name,kernel,args", KERNELS, ids=[k[0] for k in KERNELS])
def test_replay_equals_a_fresh_orchestration(name, kernel, args):
    compiled = pj.kernel(kernel).compiled_for(*args)
    first, trace = compiled.run(*args)
    assert len(compiled.plans) == 1, name                  # no host read of an input: kept
    other = _rolled(args)
    got, replayed = compiled.run(*other)
    want, fresh = _fresh(compiled, other)
    _same(got, want)
    assert replayed is trace and replayed.rows == fresh.rows
    _same(first, _fresh(compiled, args)[0])                # the replay wrote new arrays, not the first results


@settings(max_examples=40, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fuzz.kernels(max_ops=5))
def test_random_kernels_replay_equal_a_fresh_orchestration(spec):
    """Random op chains (tests/fuzz.py), run on one input set and replayed on another."""
    fn, args = fuzz.build(spec)
    other = [fuzz.make_input(tuple(s), d, k, spec["seed"] * 1000 + 500 + i) for i, (s, d, k) in enumerate(spec["inputs"])]
    compiled = pj.kernel(fn).compiled_for(*args)
    first, _ = compiled.run(*args)
    got, _ = compiled.run(*other)
    assert bool(compiled.plans) == all(np.ndim(a) for a in args)     # a 0-d input may steer the host: not kept
    _same(got, _fresh(compiled, other)[0])
    _same(first, _fresh(compiled, args)[0])


def test_plans_that_read_inputs_on_the_host_are_not_kept():
    """The MoE layer's host reads its expert counts; a scalar input sets a loop's trip count."""
    moe = pj.kernel(M.moe_router).compiled_for(*M.inputs())
    for bias in M.ROUTINGS.values():
        args = (*M.inputs()[:2], bias, *M.inputs()[3:])
        (out, counts), _ = moe.run(*args)
        np.testing.assert_array_equal(counts, M.reference(*args)[1])
    assert not moe.plans

    def loop(x, n):
        with pj.tile(vec=(8, 64)):
            return jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, x)

    x = rand((16, 64), np.float32)
    compiled = pj.kernel(loop).compiled_for(x, np.int32(1))
    for n in (1, 3, 2):
        out, trace = compiled.run(x, np.int32(n))
        np.testing.assert_array_equal(out, _fresh(compiled, (x, np.int32(n)))[0])
        assert len(trace.records) == n * 2
    assert not compiled.plans


def test_replay_updates_donated_arrays_in_place_and_copies_read_only_ones():
    cache, rows = rand((64, 128), np.float32), rand((4, 128), np.float32, 1)
    slots = np.array([3, 60, -1, 7], np.int32)
    compiled = pj.kernel(scatter_rows, donate_argnums=0).lower(cache, rows, slots).compile()
    for step in range(3):
        buffer, new_rows = cache.copy(), rand((4, 128), np.float32, 2 + step)
        want = np.asarray(scatter_rows(cache, new_rows, slots))
        out, trace = compiled.run(buffer, new_rows, slots)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(buffer, want)                      # written in place
        assert "copy" not in {r.name for r in trace.records}
        frozen = cache.copy()
        frozen.flags.writeable = False
        out, trace = compiled.run(frozen, new_rows, slots)
        np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(frozen, cache)                      # copied, never written
        assert "copy" in {r.name for r in trace.records}
    assert len(compiled.plans) == 2                        # one plan per writability of the donated array


def test_a_kept_plan_lets_go_of_the_arrays_of_the_last_call():
    name, kernel, args = KERNELS[0]
    compiled = pj.kernel(kernel).compiled_for(*args)
    for _ in range(2):
        inputs = [np.array(a) for a in args]
        refs = [weakref.ref(a) for a in inputs]
        out, _ = compiled.run(*inputs)
        out_ref = weakref.ref(jax.tree.leaves(out)[0])
        del inputs, out
        assert all(r() is None for r in refs) and out_ref() is None


def test_threads_calling_one_compiled_kernel_get_their_own_results():
    """A call that finds the kept plan in use orchestrates its own; every result is right."""
    name, kernel, args = next(k for k in KERNELS if k[0] == "mlp-block")
    compiled = pj.kernel(kernel).compiled_for(*args)
    inputs = [_rolled(args, shift) for shift in range(8)]
    wants = [_fresh(compiled, a)[0] for a in inputs]

    def work(k):
        for i in range(6):
            j = (k + i) % len(inputs)
            _same(compiled.run(*inputs[j])[0], wants[j])

    errors = in_threads(work, 4)
    assert not errors and len(compiled.plans) == 1
