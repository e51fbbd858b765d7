"""jnp.take_along_axis on an array with a unit axis besides the taken one: JAX leaves the unit axis out
of the indices (an offset dim of size 1, not a batching dim), which the gather rule refused while its
message listed take_along_axis as translated."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

CASES = [((2, 1, 3, 7), -1), ((2, 1, 3, 7), 0), ((3, 1, 7), 0), ((3, 1, 7), -1), ((1, 5), -1), ((1, 5), 0),
         ((1, 4, 1, 9), 1)]


@pytest.mark.parametrize("shape,axis", CASES, ids=str)
def test_take_along_axis_with_unit_axes(shape, axis):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    idx = np.argsort(x, axis).astype(np.int32)
    fn = lambda a, i: jnp.take_along_axis(a, i, axis)  # noqa: E731
    want = np.asarray(jax.jit(fn)(x, idx))
    np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x, idx)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(fn))(x, idx)), want)
    weights = np.arange(x.size, dtype=np.float32).reshape(shape)
    grad = jax.grad(lambda a: jnp.sum(jnp.take_along_axis(a, idx, axis) * weights))
    np.testing.assert_array_equal(np.asarray(pj.kernel(grad)(x)), np.asarray(jax.jit(grad)(x)))
