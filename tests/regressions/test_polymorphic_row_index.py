"""Polymorphic kernels with an iota of the symbolic rows: under ``jax.jit`` the replay walked every
block as the first, so rows past the first tile restarted the iota (``jnp.arange(m)`` at m = 513 was
0..255, 0..255, 0); such a kernel now runs on the host runtime under jit, as the eager call does. A
``vec`` tile of 300 columns made the row vector's tile 300, which splits every template: it takes the
default tile."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


def _plus_index(x):
    return jnp.max(x, 1) * 2 + jnp.arange(x.shape[0], dtype=jnp.float32)


def _every_third_row(x):
    with pj.tile(vec=(16, 300)):
        return jnp.where(jnp.arange(x.shape[0])[:, None] % 3 == 0, x, 0.0) + jnp.sum(x, 1, keepdims=True)


def _lookup(x, w):
    with pj.tile(vec=(16, 300)):
        return w[jnp.clip((x[:, 0] * 10).astype(jnp.int32), 0, w.shape[0] - 1)]


@pytest.mark.parametrize("fn", [_plus_index, _every_third_row])
def test_an_iota_of_the_rows_is_right_past_the_first_tile_under_jit(fn):
    k = pj.kernel(fn, polymorphic_shapes=("m, 300",))
    for m in (7, 513):
        x = np.random.default_rng(m).uniform(-1, 1, (m, 300)).astype(np.float32)
        want = np.asarray(fn(jnp.asarray(x)))
        np.testing.assert_allclose(np.asarray(jax.jit(k)(x)), want, rtol=1e-5, atol=1e-5)   # sums in order
        np.testing.assert_allclose(np.asarray(k(x)), want, rtol=1e-5, atol=1e-5)
    assert k.compiles == 1
    assert "computes with its block's row index" in k.compiled_for(x).replay()


def test_a_row_vector_under_a_vec_of_300_columns_takes_a_tile_of_every_template():
    w = np.random.default_rng(0).uniform(-1, 1, (300, 32)).astype(np.float32)
    k = pj.kernel(_lookup, polymorphic_shapes=("m, 300", None))
    for m in (5, 300):
        x = np.random.default_rng(m).uniform(-1, 1, (m, 300)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(k(x, w)), np.asarray(_lookup(x, w)))
    assert k.compiles == 1
