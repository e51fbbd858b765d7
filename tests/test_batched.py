"""Batched execution of block instances: the same bits as running them one by one."""
import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import fuzz

import ptojax as pj
from ptojax.ascend.batched import _lane_params, execute_lanes
from ptojax.ascend.cost import CUSTOM
from ptojax.ascend import program
from ptojax.ascend.semantics import SEMANTICS, execute
from ptojax.mpmd import PtoTaskError
from kernels import KERNELS
from semantic_cases import CASES as SEMANTIC_CASES
from helpers import batched_outputs, bits


@pytest.mark.parametrize("lane_code", [True, False], ids=["lane-code", "interpreter-lanes"])
@pytest.mark.parametrize("name,kernel,args", KERNELS, ids=[k[0] for k in KERNELS])
def test_batched_run_equals_one_by_one(name, kernel, args, lane_code):
    compiled = pj.kernel(kernel).compiled_for(*args)
    want, trace_one, groups = batched_outputs(compiled, args, batched=False)
    got, trace_batched, _ = batched_outputs(compiled, args, batched=True, lane_code=lane_code)
    assert groups > 0
    assert trace_one.rows == trace_batched.rows                 # batching never changes the timeline
    for w, g in zip(want, got):
        assert w.dtype == g.dtype and w.shape == g.shape
        np.testing.assert_array_equal(bits(g), bits(w))


def test_batches_shared_by_threads_equal_one_by_one(monkeypatch):
    """Every batch split between three threads (however small): the same bits."""
    monkeypatch.setattr(program, "_THREADS", 3)
    monkeypatch.setattr(program, "_BYTES_PER_THREAD", 1)
    program._pool.cache_clear()
    try:
        for name, kernel, args in KERNELS:
            compiled = pj.kernel(kernel).compiled_for(*args)
            want, _, _ = batched_outputs(compiled, args, batched=False)
            got, _, _ = batched_outputs(compiled, args, batched=True)
            for w, g in zip(want, got):
                np.testing.assert_array_equal(bits(g), bits(w), err_msg=name)
    finally:
        program._pool.cache_clear()


def _lane_variants(a, lanes=3):
    """``a`` and variants with the same shape and dtype but other values (rolled, reversed)."""
    flat = np.asarray(a).reshape(-1)
    out = [flat, np.roll(flat, 1), flat[::-1]]
    return np.stack([v.reshape(np.shape(a)) for v in out[:lanes]])


@pytest.mark.parametrize("name,args,params,tol,atol_scale", SEMANTIC_CASES)
def test_every_instruction_on_lanes_equals_lane_by_lane(name, args, params, tol, atol_scale):
    """Each semantics case on three lanes of different data: one call with the lane axis (or the
    lane-by-lane fallback) gives each lane's own result, bit for bit; 0-d operands are shared scalars."""
    laned = [np.ndim(a) > 0 for a in args]
    stacked = [_lane_variants(a) if t else np.asarray(a) for a, t in zip(args, laned)]
    got = execute_lanes(name, stacked, laned, params, 3)
    want = [execute(name, *[s[i] if t else s for s, t in zip(stacked, laned)], **params) for i in range(3)]
    got = got if isinstance(got, tuple) else (got,)
    want = [w if isinstance(w, tuple) else (w,) for w in want]
    for k, g in enumerate(got):
        w = np.stack([lane[k] for lane in want])
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.shape, w.shape)
        np.testing.assert_array_equal(bits(g), bits(w))


def test_the_lane_axis_is_used_by_most_instructions():
    """The fallback (one call per lane) is the exception among the built-in instructions: indexed
    updates and gathers, and ``tci`` (its one operand, the grid index, differs from lane to lane)."""
    fallback = {name for name in set(SEMANTICS) - set(CUSTOM) if _lane_params(name, {"axes": (0,), "axis": 0, "new_shape": (1,),
                                                                "shape": (1,), "permutation": (0,),
                                                                "offsets": (0,), "valid_shape": (1,),
                                                                "pads": ((0, 0),)}, 1, 2) is None}
    assert fallback <= {"tgather", "mgather", "tindex_add", "tscatter_update", "mscatter", "tci"}, fallback


@pytest.mark.parametrize("cols", [2, 64])
def test_a_failing_grid_point_in_a_batch_names_its_own_task(cols):
    """A batch that raises (on one thread, or shared by several: 256 instances) is rerun task by task:
    the error names the task whose tile fails."""
    def check(x):
        if (x > 100).any():
            raise ValueError("a value above 100")
        return x

    op = pj.tiles.register_op("tcheck_small", reference=lambda x: x, numpy=check)
    try:
        window = pj.tiles.window((32, 32))

        def f(x):
            body = lambda i, ins, outs: [pj.tiles.store(outs[0], op(pj.tiles.load(ins[0], i, window)), i, window)]
            return pj.tiles.grid(body, (4, cols), x, jax.ShapeDtypeStruct(x.shape, x.dtype))

        x = np.zeros((128, 32 * cols), np.float32)
        x[70, 40] = 101.0                                        # in the tile at grid point (2, 1)
        compiled = pj.kernel(f).compiled_for(x)
        with pytest.raises(PtoTaskError, match=rf"task {2 * cols + 1} 'lambda\(2,1\)'.*a value above 100"):
            compiled.run(x)
        out, _ = compiled.run(np.ones_like(x))
        np.testing.assert_array_equal(out, np.ones_like(x))
    finally:
        pj.tiles.unregister_op("tcheck_small")


@settings(max_examples=60, derandomize=True, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fuzz.kernels(max_ops=5))
def test_random_kernels_batched_equal_one_by_one(spec):
    """Random op chains (tests/fuzz.py: tiles reused across ops, layouts, reductions, casts), as lane
    code and on the interpreter's lanes."""
    fn, args = fuzz.build(spec)
    compiled = pj.kernel(fn).compiled_for(*args)
    want, _, _ = batched_outputs(compiled, args, batched=False)
    for lane_code in (True, False):
        got, _, _ = batched_outputs(compiled, args, batched=True, lane_code=lane_code)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(bits(g), bits(w), err_msg=f"{fuzz.describe(spec)} lane code {lane_code}")


def test_outputs_written_tile_by_tile_skip_the_fill_and_others_keep_it():
    """A GM output that the tasks write completely, tile by tile, is not filled first (its scratch array
    may hold an earlier run's data); one they write only in part (a padded copy) keeps its fill."""
    from ptojax.mpmd import orchestrator as O

    x = np.arange(64 * 96, dtype=np.float32).reshape(64, 96)

    def f(x):
        with pj.tile(vec=(16, 32)):
            return x * 2.0, pj.ops.pad(x, [(0, 8), (0, 0)], -1.0)

    compiled = pj.kernel(f).compiled_for(x)
    for _ in range(3):                                   # later runs reuse the pooled scratch arrays
        doubled, padded = compiled.run(x)[0]
        np.testing.assert_array_equal(doubled, x * 2)
        np.testing.assert_array_equal(padded, np.pad(x, [(0, 8), (0, 0)], constant_values=-1.0))
    w = O._windows
    calls = [e for e in compiled.lowering.block.jaxpr.eqns if e.primitive.name == "pto.block_call"]
    volumes = {v.aval.shape: sum(O._tiled_volume(w(p.body.jaxpr, len(p.shape)), len(e.invars) + k, p.shape,
                                                 v.aval.shape) for p in e.params["spec"].parts)
               for e in calls for k, v in enumerate(e.outvars)}
    assert volumes[(64, 96)] == 64 * 96                  # x * 2: every element written once
    assert volumes[(72, 96)] < 72 * 96                   # the pad's copy leaves the padding to the fill


def test_a_large_batch_shared_by_threads_equals_one_by_one():
    """A block call of 512 instances: its batch is split between threads (when the machine has more
    than one CPU), with the same bits as running the instances one by one."""
    x = np.random.default_rng(5).standard_normal((256, 512)).astype(np.float32)

    def f(x):
        with pj.tile(vec=(8, 32)):
            return jax.numpy.exp(x * 0.5) - x * x     # 32 x 16 tiles: one block call of 512 instances

    compiled = pj.kernel(f).compiled_for(x)
    want, _, _ = batched_outputs(compiled, (x,), batched=False)
    got, trace, _ = batched_outputs(compiled, (x,), batched=True)
    assert len(trace.records) >= 512
    for w, g in zip(want, got):
        np.testing.assert_array_equal(bits(g), bits(w))
