"""A polymorphic kernel's call on the MPMD runtime: the tasks of ceil(m/T) row blocks, scheduled on the
AIC/AIV cores like the static kernel of that size (trace, profile, report), priced at each block's valid
rows; under the user's ``jax.jit``, the one compile at every size; reshape steps in the Block graph."""
from __future__ import annotations

import collections
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from kernels import seed_kernel
from ptojax.errors import PtoArgumentError

HI = jax.lax.Precision.HIGHEST


def _softmax(x):
    with pj.tile(vec=(32, 64)):
        return pj.ops.softmax(x * 0.5, axis=-1)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# name: (kernel, polymorphic shapes, shapes at m, plain-JAX reference)
CASES = {
    "seed": (seed_kernel, ("m, 64", "m, 64", None), lambda m: [(m, 64), (m, 64), (64, 32)],
             lambda a, b, w: jnp.sum(jnp.matmul(a * 2.0 + b, w, precision=HI), axis=-1)),
    "softmax": (_softmax, ("m, 64",), lambda m: [(m, 64)], lambda x: jax.nn.softmax(x * 0.5, axis=-1)),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    fn, poly, shapes, reference = CASES[request.param]
    return pj.kernel(fn, polymorphic_shapes=poly), fn, shapes, reference


def _kinds(trace):
    return collections.Counter(t.core for t in trace.graph.tasks)


@pytest.mark.parametrize("m", [1, 17, 130])
def test_a_dynamic_call_makes_the_static_kernels_tasks(case, m):
    f, fn, shapes, reference = case
    args = [_rand(s, seed) for seed, s in enumerate(shapes(m))]
    out, trace = f.compiled_for(*args).run(*args)
    np.testing.assert_allclose(np.asarray(out), np.asarray(reference(*args)), rtol=1e-5, atol=1e-4)
    _, static = pj.kernel(fn).compiled_for(*args).run(*args)
    assert len(trace.graph.tasks) == len(static.graph.tasks)
    assert _kinds(trace) == _kinds(static)
    assert sum(len(t.preds) > 0 for t in trace.graph.tasks) == sum(len(t.preds) > 0 for t in static.graph.tasks)
    assert f.compiles == 1


def test_the_seed_schedule_overlaps_the_cores():
    f = pj.kernel(seed_kernel, polymorphic_shapes=("m, 64", "m, 64", None))
    args = [_rand(s, i) for i, s in enumerate([(1000, 64), (1000, 64), (64, 32)])]
    _, trace = f.compiled_for(*args).run(*args)
    assert _kinds(trace) == {"AIV": 2 * 32 + 32, "AIC": 16}       # ceil(1000/32) x 2, ceil(1000/32), ceil(1000/64)
    spans = collections.defaultdict(list)                         # tasks of one kind run side by side
    for start, tid, core, _, end in trace.rows:
        spans[trace.graph.tasks[tid].core].append((start, end))
    for kind, rows in spans.items():
        rows.sort()
        assert any(b[0] < a[1] for a, b in zip(rows, rows[1:])), kind
    busy = sum(end - start for rows in spans.values() for start, end in rows)
    assert trace.makespan < busy


def test_a_tail_block_is_priced_at_its_valid_rows():
    f = pj.kernel(_softmax, polymorphic_shapes=("m, 64",))
    x = _rand((33, 64), 0)                                        # a full block of 32 rows and a tail of 1
    _, trace = f.compiled_for(x).run(x)
    full, tail = sorted(trace.graph.tasks, key=lambda t: t.index)
    assert (full.index, tail.index) == ((0, 0), (1, 0))
    assert tail.cost < full.cost
    assert tail.bytes * 32 == full.bytes                          # the DMA moves the valid rows only


def test_profile_and_report_at_a_size(tmp_path):
    f = pj.kernel(seed_kernel, polymorphic_shapes=("m, 64", "m, 64", None))
    args = [_rand(s, i) for i, s in enumerate([(130, 64), (130, 64), (64, 32)])]
    compiled = f.compiled_for(*args)
    by_args, by_size = compiled.profile(*args), compiled.profile(m=130)
    assert by_args.makespan_us == by_size.makespan_us > 0
    assert by_args.tasks == 18
    assert compiled.profile(m=1000).makespan_us > by_args.makespan_us
    with pytest.raises(PtoArgumentError) as err:
        compiled.profile()
    assert str(err.value) == ("pj.kernel 'seed_kernel': profile of a polymorphic kernel needs the size: pass arguments "
                              "of the shapes (float32[m, 64], float32[m, 64], float32[64, 32]), or m alone: "
                              "compiled.profile(m=...)")
    profile = compiled.report(tmp_path / "seed.html", m=130)
    assert profile.makespan_us == by_size.makespan_us
    assert "seed_kernel (m = 130)" in (tmp_path / "seed.html").read_text()
    assert f.compiles == 1


def test_under_jit_one_compile_serves_every_size(case):
    f, _, shapes, reference = case
    g = jax.jit(lambda *args: f(*args) * 2.0)
    for m in (1, 17, 130):
        args = [_rand(s, seed) for seed, s in enumerate(shapes(m))]
        got = np.asarray(g(*args))
        assert got.shape[0] == m
        np.testing.assert_allclose(got, 2.0 * np.asarray(reference(*args)), rtol=1e-5, atol=1e-4)
    assert f.compiles == 1


def test_under_jit_the_dynamic_replay_is_inlined():
    """The jitted call inlines the dynamic module's replay (no host callback in the HLO) at every size,
    with the numbers of the eager call (the engine on the dynamic text) bit for bit; one compile."""
    f = pj.kernel(seed_kernel, polymorphic_shapes=CASES["seed"][1])
    g = jax.jit(f)
    for m in (1, 17, 130):
        args = [_rand(s, seed) for seed, s in enumerate(CASES["seed"][2](m))]
        assert "callback" not in g.lower(*args).as_text()
        np.testing.assert_array_equal(np.asarray(g(*args)), np.asarray(f(*args)))
    assert f.compiles == 1


def test_under_jit_a_scalar_operand_replays_as_xla():
    """A scalar the programs read as data steers no task: the polymorphic kernel's jitted call is its
    dynamic module's replay (it was a host callback: 'the values of argument 1 decide which tasks run')."""
    def scaled(x, s):
        with pj.tile(vec=(32, 64)):
            return x * s

    f = pj.kernel(scaled, polymorphic_shapes=("m, 64", None))
    x, s = _rand((17, 64), 0), np.float32(1.5)
    assert "callback" not in jax.jit(f).lower(x, s).as_text()
    assert callable(f.compiled_for(x, s).replay())
    for m in (17, 130):
        x = _rand((m, 64), m)
        np.testing.assert_array_equal(np.asarray(jax.jit(f)(x, s)), x * s)
    assert f.compiles == 1


def _biased(x, b):
    """A Block graph with a reshape step: the static bias viewed as a row."""
    with pj.tile(vec=(32, 64)):
        return jnp.exp(x) * pj.ops.reshape(b, (1, 64))


def test_a_reshape_step_of_a_static_tensor():
    f = pj.kernel(_biased, polymorphic_shapes=("m, 64", None))
    b = _rand((64,), 1)
    assert "pto.reshape[new_shape=(1, 64)]" in pj.kernel(_biased).lower(_rand((5, 64), 0), b).as_text("block")
    for m in (1, 17, 130):
        x = _rand((m, 64), m)
        out, trace = f.compiled_for(x, b).run(x, b)
        np.testing.assert_allclose(np.asarray(out), np.exp(x) * b, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(np.asarray(f(x, b)), f.compiled_for(x, b).dynamic.run([x, b], m)[0])
        assert len(trace.graph.tasks) == -(-m // 32)
    assert f.compiles == 1
    assert re.search(r"AICORE void exp_mul\((__gm__ float\* v\d+, )+int32_t v\d+\)", f.compiled_for(x, b).ptoas())


def test_a_row_view_of_three_dims():
    """Rows viewed as [m, 2, 32]: a block of one leading index whose tile holds its 2 rows."""
    def heads(x):
        with pj.tile(vec=(32, 64)):
            return pj.ops.reshape(jnp.exp(x), (x.shape[0], 2, 32)) * 2.0

    f = pj.kernel(heads, polymorphic_shapes=("m, 64",))
    for m in (1, 17):
        x = _rand((m, 64), m)
        np.testing.assert_allclose(np.asarray(f(x)), np.exp(x).reshape(m, 2, 32) * 2.0, rtol=1e-6, atol=1e-6)
    assert f.compiles == 1
    text = f.compiled_for(x).as_text("pto")
    assert "!pto.tensor_view<?x2x32xf32>" in text and "valid_row = %dyn_vr2" in text
    assert re.search(r"AICORE void exp\w*\((__gm__ float\* v\d+, )+int32_t v\d+\)", f.compiled_for(x).ptoas())


def test_eager_calls_replay_the_plan_of_their_size_on_new_values():
    """An eager call keeps its plan for the next call at the same size (the last ``KEPT_SIZES`` sizes):
    new values at a kept size, sizes past the kept ones and back, each as the plain function."""
    from ptojax.execute import KEPT_SIZES
    k = pj.kernel(_softmax, polymorphic_shapes=("m, 64",))
    sizes = [130, 17, 130, 1000, 5, 64, 33, 130, 17]
    assert len(set(sizes)) > KEPT_SIZES
    compiled = None
    for seed, m in enumerate(sizes):
        x = _rand((m, 64), seed)
        np.testing.assert_allclose(k(x), jax.nn.softmax(x * 0.5, axis=-1), rtol=2e-6, atol=1e-7)
        compiled = compiled or k.compiled_for(x)
        assert len(compiled._plans) <= KEPT_SIZES
    assert k.compiles == 1 and (130, ("mpmd", ())) in compiled._plans
