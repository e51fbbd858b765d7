"""Coverage gaps from a sweep of the jnp API, each checked against ``jax.jit`` of the same function.

- ``jnp.sort`` / ``argsort`` of bool were refused (the sorts take numbers): they sort as int8.
- A reduction over an empty axis (``jnp.max(x, 0, initial=-inf)``, ``jnp.any`` of no rows, ``logsumexp``)
  was a PtoShapeError; its result is the reduction's identity, folded at trace time.
- ``lax.optimization_barrier`` and ``lax.reduce_precision`` had no translation.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

RNG = np.random.default_rng(3)
ROWS = RNG.normal(size=(6, 37)).astype(np.float32)
NONE = np.zeros((0, 8), np.float32)
# float16's flush edge, its rounding edges, overflow, subnormals of float32, NaN and signed zeros
EDGES = np.float32([-1e-6, 1e-6, -3e-40, 2.0 ** -14 * (1 - 2.0 ** -12), 2.0 ** -15 * 1.5, 2.0 ** -14,
                    np.nan, -np.inf, 65519, 65520, -0.0, 1.0001, 3.14159, -7e4] * 8).reshape(4, 28)


def _same(got, want):
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w, equal_nan=True) and np.array_equal(np.signbit(g), np.signbit(w))


@pytest.mark.parametrize("fn", [
    lambda a: jnp.sort(a > 0, -1), lambda a: jnp.argsort(a > 0, -1), lambda a: jnp.argsort(a > 0, 0, descending=True),
], ids=["sort", "argsort", "argsort-descending"])
def test_a_bool_sort_is_the_sort_of_its_int8(fn):
    _same(pj.kernel(fn)(ROWS), jax.jit(fn)(ROWS))


@pytest.mark.parametrize("fn", [
    lambda a: jnp.max(a, 0, initial=-jnp.inf), lambda a: jnp.min(a, 0, initial=jnp.inf), lambda a: jnp.any(a > 0, 0),
    lambda a: jnp.all(a > 0, 0), lambda a: jnp.prod(a, 0), lambda a: jax.nn.logsumexp(a, 0),
    lambda a: jnp.max(a.astype(jnp.int32), 0, initial=-5) + 1,
], ids=["max", "min", "any", "all", "prod", "logsumexp", "int-max"])
def test_a_reduction_over_an_empty_axis_is_its_identity(fn):
    _same(pj.kernel(fn)(NONE), jax.jit(fn)(NONE))


def test_an_optimization_barrier_passes_its_operands():
    def fn(a):
        x, y = jax.lax.optimization_barrier((a + 1, a * 2))
        return jnp.maximum(x, y)
    _same(pj.kernel(fn)(ROWS), jax.jit(fn)(ROWS))


@pytest.mark.parametrize("bits", [(5, 10), (8, 7), (8, 23), (11, 52)])
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_reduce_precision_rounds_and_flushes_as_xla(bits, jit):
    def fn(a):
        return jax.lax.reduce_precision(a * 1.0, *bits)
    kernel = pj.kernel(fn)
    _same((jax.jit(kernel) if jit else kernel)(EDGES), jax.jit(fn)(EDGES))


def test_reduce_precision_to_another_format_names_the_formats_it_takes():
    with pytest.raises(pj.PtoUnsupportedError, match=r"reduce_precision.*float16's \(5, 10\)"):
        pj.kernel(lambda a: jax.lax.reduce_precision(a, 4, 3))(ROWS)
