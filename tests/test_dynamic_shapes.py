"""Dynamic shapes: kernels traced with ``jax.export`` symbolic dimensions.

An ``xla`` kernel exports once with a symbolic row count, serialises, and runs at every size with the
numbers of plain JAX; the Tensor level prints the symbols; levels that need concrete sizes, the
``sim`` backend and shape checks JAX cannot decide for every size raise errors that say so.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from kernels import seed_kernel
from ptojax.errors import PtoShapeError, PtoUnsupportedError

O = pj.ops
SIZES = (1, 17, 64, 130, 1000)
(M,) = jax.export.symbolic_shape("m")
HI = jax.lax.Precision.HIGHEST


def _softmax(x):
    with pj.tile(vec=(32, 64)):
        return O.softmax(x * 0.5, axis=-1)


def _matmul_k_tail(a, w):
    """K = 100 on a cube tile of K 64: a full K step and a tail of 36."""
    with pj.tile(cube=(64, 64, 32)):
        return O.matmul(a, w)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# name: (kernel, symbolic shapes, shapes at size m, plain-JAX reference)
CASES = {
    "seed": (seed_kernel, [(M, 64), (M, 64), (64, 32)], lambda m: [(m, 64), (m, 64), (64, 32)],
             lambda a, b, w: jnp.sum(jnp.matmul(a * 2.0 + b, w, precision=HI), axis=-1)),
    "softmax": (_softmax, [(M, 64)], lambda m: [(m, 64)], lambda x: jax.nn.softmax(x * 0.5, axis=-1)),
    "matmul-k-tail": (_matmul_k_tail, [(M, 100), (100, 48)], lambda m: [(m, 100), (100, 48)],
                      lambda a, w: jnp.matmul(a, w, precision=HI)),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def exported(request):
    """(the case, its kernel exported once with a symbolic m, then serialised and deserialised)."""
    fn, shapes, _, _ = CASES[request.param]
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    exp = jax.export.export(jax.jit(pj.kernel(fn, backend="xla")))(*specs)
    return request.param, exp, jax.export.deserialize(exp.serialize())


def test_export_keeps_the_symbolic_signature(exported):
    name, exp, restored = exported
    _, shapes, _, _ = CASES[name]
    assert [a.shape for a in exp.in_avals] == [tuple(s) for s in shapes]
    # a deserialised module has its own symbolic scope: compare the avals as text
    assert list(map(str, restored.in_avals + restored.out_avals)) == list(map(str, exp.in_avals + exp.out_avals))
    assert str(exp.out_avals[0].shape[0]) == "m"


@pytest.mark.parametrize("m", SIZES)
def test_one_export_runs_at_every_size(exported, m):
    name, _, restored = exported
    _, _, shapes, reference = CASES[name]
    args = [_rand(s, seed) for seed, s in enumerate(shapes(m))]
    got = np.asarray(restored.call(*args))
    want = np.asarray(reference(*args))
    assert got.shape == want.shape and got.shape[0] == m
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_symbolic_reshape_slices_and_gathers_export():
    def fn(x, i):
        with pj.tile(vec=(16, 32)):
            y = x.reshape(-1, 25) * 2.0
            return y.reshape(x.shape)[1:] - x[:-1], jnp.take(x, i, axis=1)

    k = pj.kernel(fn, backend="xla")
    exp = jax.export.export(jax.jit(k))(jax.ShapeDtypeStruct((M, 50), jnp.float32),
                                        jax.ShapeDtypeStruct((7,), jnp.int32))
    idx = np.array([0, 49, 3, 3, 17, 1, 2], np.int32)
    for m in (2, 17):
        x = _rand((m, 50), m)
        got = exp.call(x, idx)
        np.testing.assert_allclose(got[0], x[1:] * 2.0 - x[:-1], rtol=1e-6)
        np.testing.assert_array_equal(got[1], x[:, idx])


# ---------------------------------------------------------------------------------------- the levels
def _specs():
    return [jax.ShapeDtypeStruct((M, 64), jnp.float32)] * 2


def _add_exp(a, b):
    with pj.tile(vec=(32, 32)):
        return jnp.exp(a * 2.0 + b)


def test_tensor_level_prints_the_symbols():
    assert pj.kernel(_add_exp, backend="xla").lower(*_specs()).as_text("tensor") == (
        "kernel(%0:f32[m,64], %1:f32[m,64]):\n"
        "  %2:f32[m,64] = pto.mul(%0, 2.0)    # vec=32x32\n"
        "  %3:f32[m,64] = pto.add(%2, %1)    # vec=32x32\n"
        "  %4:f32[m,64] = pto.exp(%3)    # vec=32x32\n"
        "  return %4")


LEVEL_ERROR = ("pto lowering: the {level} level needs concrete sizes, but argument 0 is float32[m,64] "
               "(symbolic m); argument 1 is float32[m,64] (symbolic m); the tensor level and backend='xla' "
               "take symbolic dimensions (jax.export), lower with concrete shapes for the tile, block and "
               "pto levels")


@pytest.mark.parametrize("level", ["tile", "block", "pto"])
def test_lower_levels_name_the_symbolic_dims(level):
    lowered = pj.kernel(_add_exp, backend="xla").lower(*_specs())
    with pytest.raises(PtoUnsupportedError) as err:
        lowered.as_text(level)
    assert str(err.value) == LEVEL_ERROR.format(level=level)


def test_a_symbolic_lowering_has_no_block_graph():
    low = pj.kernel(_add_exp, backend="xla").lower(*_specs()).lowering
    for get, level in ((lambda: low.tile, "tile"), (lambda: low.block, "block"), (lambda: low.programs, "block")):
        with pytest.raises(PtoUnsupportedError) as err:
            get()
        assert str(err.value) == LEVEL_ERROR.format(level=level)


def test_sim_backend_needs_concrete_sizes():
    with pytest.raises(PtoUnsupportedError) as err:
        jax.export.export(jax.jit(pj.kernel(_add_exp)))(*_specs())
    assert str(err.value) == (
        "pj.kernel '_add_exp': the simulated backend (backend='sim') needs concrete sizes, but argument 0 is "
        "float32[m,64] (symbolic m); argument 1 is float32[m,64] (symbolic m); use backend='xla' for "
        "jax.export with symbolic shapes")


# ------------------------------------------------------------------------------------- shape rules
def test_symbols_that_do_not_broadcast():
    with pytest.raises(PtoShapeError) as err:
        jax.make_jaxpr(O.add)(jax.ShapeDtypeStruct((M, 64), jnp.float32), jax.ShapeDtypeStruct((3, 64), jnp.float32))
    assert str(err.value) == ("pto.add: shapes (m, 64), (3, 64) do not broadcast "
                              "(NumPy rules: trailing dimensions equal or 1)")


def test_an_undecidable_window_asks_for_a_constraint():
    def window(x):
        return O.view(x, (10, 10), (3, 4), valid_shape=(7, 10))

    with pytest.raises(PtoShapeError) as err:
        jax.make_jaxpr(window)(jax.ShapeDtypeStruct((M, 50), jnp.float32))
    assert str(err.value) == (
        "pto.view: cannot decide whether window dim 0 (offset 3, valid 7, size 10) of the input (m, 50) satisfies "
        "0 <= offset, 0 <= valid <= size and offset + valid <= m for every value of the symbolic dimensions; "
        "state the bound as a constraint: jax.export.symbolic_shape(..., constraints=...)")

    (m10,) = jax.export.symbolic_shape("m", constraints=("m >= 10",))
    exp = jax.export.export(jax.jit(pj.kernel(window, backend="xla")))(jax.ShapeDtypeStruct((m10, 50), jnp.float32))
    for m in (10, 23):
        x = _rand((m, 50), m)
        want = np.zeros((10, 10), np.float32)
        want[:7] = x[3:10, 4:14]
        np.testing.assert_array_equal(exp.call(x), want)


def test_symbolic_reshape_sizes_must_agree():
    with pytest.raises(PtoShapeError) as err:
        jax.make_jaxpr(lambda x: O.reshape(x, (M, 32)))(jax.ShapeDtypeStruct((M, 64), jnp.float32))
    assert str(err.value) == "pto.reshape: cannot reshape (m, 64) (64*m elements) to (m, 32) (32*m elements)"


def test_verify_runs_the_symbolic_levels_at_several_sizes():
    def fn(a, b):
        with pj.tile(vec=(32, 32)):
            return jnp.sum(jnp.exp(a * 0.5 - b), axis=-1), jnp.take(a, jnp.array([3, 0, 63], jnp.int32), axis=1)

    low = pj.lower(fn, *_specs())
    for m in (1, 130):
        a, b = _rand((m, 64), 1), _rand((m, 64), 2)
        assert set(low.verify(a, b)) == {"tensor"}
        total, picked = low.evaluate("tensor", a, b)
        np.testing.assert_allclose(total, np.exp(a * 0.5 - b).sum(-1), rtol=1e-5)
        np.testing.assert_array_equal(picked, a[:, [3, 0, 63]])
