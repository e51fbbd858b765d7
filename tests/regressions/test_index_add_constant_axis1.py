"""Regression: the gradient of an axis-1 ``pj.ops.gather`` could not be compiled as a sim kernel.

``jax.grad(lambda x: jnp.sum(pj.ops.gather(x, idx, axis=1) * W))`` with a constant ``W`` transposes to
``pto.index_add[axis=1]`` of the constant cotangent ``W`` into constant zeros. The Tensor level folds the
leading dims of an inner-axis gather / index_add / scatter_update into rows (``rows_of``: the same op
along axis 0 of a row-major flattening), but it skipped that when every operand was a constant; a
``pto.*`` op is not folded at trace time either, so the axis-1 op reached the Tile level as it was and
instruction selection refused it: ``pto.mscatter of single elements (axis 1 of a [6, 8] tensor): rows
only (no real PTO form yet)``. ``index_add(x, idx, W, axis=1)`` with ``x`` an input worked. Constant
operands now take the row form too; the numbers equal plain JAX (eager and under ``jax.jit``)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from vendor_tools import PTOAS

# name: (shape, axis, indices, dtype)
CASES = {
    "repro: [6, 8] axis 1, a duplicate": ((6, 8), 1, [3, 0, 5, 5, 1], jnp.float32),
    "one index": ((6, 8), 1, [7], jnp.float32),
    "every column": ((6, 8), 1, list(range(8)), jnp.float32),
    "every column reversed, duplicates": ((6, 8), 1, [7, 6, 5, 4, 3, 2, 1, 0, 0, 7], jnp.float32),
    "float16": ((6, 8), 1, [3, 0, 5, 5, 1], jnp.float16),
    "bfloat16": ((6, 8), 1, [3, 0, 5, 5, 1], jnp.bfloat16),
    "[2, 3, 8] axis 1": ((2, 3, 8), 1, [2, 0, 2], jnp.float32),
    "[2, 3, 8] axis 2": ((2, 3, 8), 2, [2, 0, 2, 7], jnp.float32),
    "[4, 40] axis 1": ((4, 40), 1, [39, 0, 17, 17, 3, 39], jnp.float32),
}


def _case(name):
    shape, axis, idx, dtype = CASES[name]
    rng = np.random.default_rng(len(name))
    idx = jnp.asarray(idx, jnp.int32)
    x = jnp.asarray(rng.normal(size=shape), dtype)
    w = jnp.asarray(rng.normal(size=shape[:axis] + (len(idx),) + shape[axis + 1:]), dtype)
    return x, idx, w, axis


def _assert_matches(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype == np.float32:
        np.testing.assert_array_equal(got, want)
    else:   # a half's rounding of sums that may add in another order
        eps = float(jnp.finfo(want.dtype).eps)
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2 * eps, atol=2 * eps)


def _eager_and_jit(fn, x, want):
    kernel = pj.kernel(fn)
    _assert_matches(kernel(x), want)
    _assert_matches(jax.jit(kernel)(x), want)


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_of_an_inner_axis_gather_is_a_sim_kernel(name):
    x, idx, w, axis = _case(name)
    grad = jax.grad(lambda a: jnp.sum(pj.ops.gather(a, idx, axis=axis) * w))
    want = jax.grad(lambda a: jnp.sum(jnp.take(a, idx, axis=axis) * w))(x)
    _eager_and_jit(grad, x, want)


@pytest.mark.parametrize("name", list(CASES))
def test_index_add_of_constants_along_an_inner_axis(name):
    x, idx, w, axis = _case(name)
    at = (slice(None),) * axis + (idx,)
    zeros = jnp.zeros(x.shape, x.dtype)
    _eager_and_jit(lambda a: pj.ops.index_add(jnp.zeros(x.shape, x.dtype), idx, w, axis=axis), x,
                   zeros.at[at].add(w))
    base = jnp.asarray(np.random.default_rng(1).normal(size=x.shape), x.dtype)
    _eager_and_jit(lambda a: pj.ops.index_add(base, idx, w, axis=axis) + a, x, base.at[at].add(w) + x)


@pytest.mark.parametrize("name", ["repro: [6, 8] axis 1, a duplicate", "[2, 3, 8] axis 1"])
def test_gather_and_scatter_update_of_constants_along_an_inner_axis(name):
    x, idx, w, axis = _case(name)
    _eager_and_jit(lambda a: pj.ops.gather(x, idx, axis=axis) * 2, x, jnp.take(x, idx, axis=axis) * 2)
    unique = jnp.unique(idx)
    w = jnp.take(w, jnp.arange(len(unique)), axis=axis)
    at = (slice(None),) * axis + (unique,)
    _eager_and_jit(lambda a: pj.ops.scatter_update(x, unique, w, axis=axis) + a, x, x.at[at].set(w) + x)


def test_the_gradients_text_is_what_ptoas_assembles():
    x, idx, w, axis = _case("repro: [6, 8] axis 1, a duplicate")
    grad = jax.grad(lambda a: jnp.sum(pj.ops.gather(a, idx, axis=axis) * w))
    compiled = pj.kernel(grad).lower(x).compile()
    _assert_matches(compiled(x), jax.grad(lambda a: jnp.sum(a[:, idx] * w))(x))
    if PTOAS:
        compiled.ptoas()


def test_exact_gelu_of_a_constant():
    """The same guard kept ``pj.ops.gelu(c, approximate=False)`` of a constant off its erf form: the
    Tile level refused ``pto.tgelu (erf form) (no real PTO form yet)``."""
    c = np.linspace(-3, 3, 64 * 32, dtype=np.float32).reshape(64, 32)
    x = np.random.default_rng(1).standard_normal((64, 32)).astype(np.float32)
    kernel = pj.kernel(lambda x: x + pj.ops.gelu(c, approximate=False))
    want = np.asarray(x + jax.nn.gelu(c, approximate=False))
    for got in (kernel(x), jax.jit(kernel)(x)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, atol=2e-6)
