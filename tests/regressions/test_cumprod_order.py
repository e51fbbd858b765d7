"""A float ``cumprod`` in a kernel is XLA:CPU's, bit for bit: Hillis and Steele's scan multiplied later
entries together first, so ``[0, 1e20, 1e20, 2]`` gave ``[0, 0, nan, 0]`` (1e20 * 1e20 overflowed
before the 0 reached it) and ``[1e-30, 1e-30, 1e30, 1e30]`` a NaN where XLA gives 0."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

SPECIAL = np.array([[0.0, 1e20, 1e20, 2.0], [np.inf, 1e-30, 1e-30, 2.0], [1e-30, 1e-30, 1e30, 1e30],
                    [1e20, 1e20, 0.0, 1.0]], np.float32)


@pytest.mark.parametrize("reverse", [False, True])
def test_products_that_overflow_or_underflow_are_xlas(reverse):
    f = pj.kernel(lambda a: jax.lax.cumprod(a, 1, reverse=reverse))
    want = np.asarray(jax.lax.cumprod(jnp.asarray(SPECIAL), 1, reverse=reverse))
    np.testing.assert_array_equal(np.asarray(f(SPECIAL)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(SPECIAL)), want)


@pytest.mark.parametrize("shape, axis, dtype", [((3, 300), 1, np.float32), ((40, 3), 0, np.float16),
                                                ((2, 17, 3), 1, jnp.bfloat16)])
@pytest.mark.parametrize("reverse", [False, True])
def test_every_bit_equals_xla_over_blocks_and_levels(shape, axis, dtype, reverse):
    x = np.random.default_rng(axis).uniform(0.7, 1.4, shape).astype(dtype)
    want = np.asarray(jax.lax.cumprod(jnp.asarray(x), axis, reverse=reverse))
    got = np.asarray(pj.kernel(lambda a: jax.lax.cumprod(a, axis, reverse=reverse))(x))
    np.testing.assert_array_equal(got.view(np.uint16 if x.itemsize == 2 else np.uint32),
                                  want.view(np.uint16 if x.itemsize == 2 else np.uint32))
