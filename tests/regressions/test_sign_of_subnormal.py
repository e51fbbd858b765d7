"""jnp.sign under jax.jit(pj.kernel): a subnormal that XLA:CPU flushes to zero compares neither above
nor below 0, and the fallback returned x itself (sign(1e-40) was 1e-40); now x * 0 (±0, NaN kept)."""
import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj


def test_sign_is_one_of_minus_one_zero_one_or_nan():
    x = np.array([[1e-40, -1e-40, 2.0, -3.0, 0.0, -0.0, np.nan, 1.17e-38]], np.float32)
    jitted = np.asarray(jax.jit(pj.kernel(jnp.sign))(x))
    assert np.all(np.isnan(jitted) | np.isin(jitted, [-1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(jitted, np.asarray(jax.jit(jnp.sign)(x)))     # XLA flushes as well
    np.testing.assert_array_equal(np.signbit(jitted), np.signbit(x))
    eager = np.asarray(pj.kernel(jnp.sign)(x))                                    # IEEE: subnormals kept
    np.testing.assert_array_equal(eager, np.sign(x))
    np.testing.assert_array_equal(np.signbit(eager), np.signbit(x))


def test_integer_sign():
    x = np.array([[-7, 0, 3, np.iinfo(np.int32).min]], np.int32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(jnp.sign)(x)), np.sign(x))
