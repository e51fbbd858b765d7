"""Regressions from a probe of elementwise math at the extremes.

``c ** y`` for a constant ``c`` is ``exp(h log c) exp(t log c + y l)`` (``y = h + t``): past
``|y log c|`` ~ 10^6 one factor overflowed to inf while the other underflowed to 0, and the product was
NaN (``2.0 ** 1e8``, ``2.0 ** -7925059.5``) where JAX gives inf and 0. ``y`` is clamped where the result
is inf or 0 anyway, so that the second factor stays near 1.

``erf(x)`` was ``x P(x²) / Q(x²)``: for ``|x| < 2**-120`` the product ``x P`` is subnormal (up to 36 ulp
off eagerly, and 0 under ``jax.jit``, which flushes subnormals, for a normal input with a normal
result). It is ``x (P / Q)`` now.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


@pytest.mark.parametrize("base", [2.0, 0.5, 1.5, 10.0])
def test_a_constant_to_a_huge_power_is_inf_or_zero(base):
    def f(y):
        with pj.tile(vec=(8, 64)):
            return base ** y

    y = np.zeros((8, 64), np.float32)
    y[0] = np.geomspace(1e3, 1e9, 64, dtype=np.float32)
    y[1] = -y[0]
    y[2, :4] = [np.inf, -np.inf, np.nan, 2.0 ** 100]
    want = np.asarray(jax.jit(f)(y))
    for run in (pj.kernel(f), jax.jit(pj.kernel(f))):
        got = np.asarray(run(y))
        assert not np.isnan(got[:2]).any(), got[:2]
        big = np.abs(y * np.log(np.float32(base))) > 100         # far from the overflow and underflow edges
        np.testing.assert_array_equal(got[big], want[big])
        assert np.isnan(got[2, 2])


def test_erf_of_tiny_normal_arguments():
    def f(x):
        with pj.tile(vec=(8, 64)):
            return jax.scipy.special.erf(x)

    x = np.ones((8, 64), np.float32)
    x[0] = np.float32(2.0 ** -126) * np.linspace(1, 1000, 64, dtype=np.float32)
    x[1] = -x[0]
    exact = np.array([np.float32(np.float64(v) * 2 / np.sqrt(np.pi)) for v in x[:2].ravel()]).reshape(2, 64)
    for run in (pj.kernel(f), jax.jit(pj.kernel(f))):
        got = np.asarray(run(x))[:2]
        ulp = np.abs(got.view(np.int32).astype(np.int64) - exact.view(np.int32).astype(np.int64))
        assert ulp.max() <= 7, ulp.max()
