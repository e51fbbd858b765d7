"""Findings of a probe of bit casts: ``jnp.ldexp`` was up to 2 ulp off (its ``2.0 ** e`` went through
``exp(e log 2)``), and 16-bit floats' bit tricks failed naming an int16 ``pto.where`` the user never wrote.
Its first fix (exponent bits through a GM bit cast) cost a program boundary: an RMSNorm whose weight was
scaled by ``2.0 ** e`` became 4 block calls (+26 %); the exact form (powers of two rounded from ``exp``)
keeps one program but takes three exponentials to ``pow``'s two, so only ``jnp.ldexp`` takes it."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj
from ptojax.ascend import crosscheck as xc
from vendor_tools import needed, tools  # noqa: F401


def _ulps(got, want):
    return np.abs(np.asarray(got, np.float32).view(np.int32).astype(np.int64) - want.view(np.int32))


def test_ldexp_is_exact_eagerly_and_jitted():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((8, 128)) * 1e3).astype(np.float32)
    e = rng.integers(-120, 120, (8, 128)).astype(np.int32)
    x[0, :4], e[0, :4] = [1.0, 3.0, 0.7, -498.80817], [20, 5, 3, 52]       # the probe's: 1 ulp off each
    want = np.ldexp(x, e)
    normal = np.isfinite(want) & (np.abs(want) >= np.finfo(np.float32).tiny)   # (jitted: XLA flushes the rest)
    kernel = pj.kernel(jnp.ldexp)
    np.testing.assert_array_equal(np.asarray(kernel(x, e)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x, e))[normal], want[normal])
    assert all(c.status == "exact" for c in xc.crosscheck(kernel.lower(x, e).compile().code))


def test_ldexps_power_of_two_is_exact_for_integers_and_plain_powers_keep_one_program():
    """``jnp.ldexp(1, e)`` is ``2 ** e`` exactly for every ``e`` from -149 (subnormal) to 128 (inf); its
    scale within 1 ulp of float64 for non-integral exponents too (:func:`libm.power_of_two`). A plain
    ``2.0 ** y`` keeps ``pow``'s form (within 2 ulp): one program, also where it scales a norm's weight."""
    from ptojax.lowering import libm

    e = np.arange(-160, 140, dtype=np.int32).reshape(1, -1)
    ones = np.ones(e.shape, np.float32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(jnp.ldexp)(ones, e)), np.ldexp(ones, e))
    rng = np.random.default_rng(1)
    y = np.concatenate([rng.uniform(-125, 127, 4096), rng.uniform(-4, 4, 4096)]).astype(np.float32).reshape(1, -1)
    want = np.exp2(y.astype(np.float64)).astype(np.float32)
    assert _ulps(pj.kernel(libm.power_of_two)(y), want).max() <= 1
    assert _ulps(pj.kernel(lambda y: 2.0 ** y)(y), want).max() <= 2
    assert pj.lower(lambda y: 2.0 ** y, y).as_text("block").count("block_call[") == 1

    def scaled_norm(x, w, e):
        a = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)
        return a * (w * 2.0 ** e)

    x, w, e = np.ones((77, 256), np.float32), np.ones(256, np.float32), np.arange(256, dtype=np.float32) % 8 - 4
    assert pj.lower(scaled_norm, x, w, e).as_text("block").count("block_call[") == 2
    for dtype in (np.float16, ml_dtypes.bfloat16):
        small = np.arange(-30, 16, dtype=np.float32).astype(dtype).reshape(1, -1)
        np.testing.assert_array_equal(np.asarray(pj.kernel(lambda y: 2.0 ** y)(small)).astype(np.float32),
                                      np.exp2(small.astype(np.float64)).astype(dtype).astype(np.float32))


def test_float32_sign_bits_and_a_16_bit_float_refusal_that_says_what_to_do():
    x = np.float32([[-0.0, 0.0, -1.0, 2.0, np.inf, -np.inf, 3e-39, -3e-39]])
    np.testing.assert_array_equal(np.asarray(pj.kernel(jnp.signbit)(x)), np.signbit(x))
    np.testing.assert_array_equal(np.asarray(pj.kernel(lambda a: jnp.copysign(a, -a))(x)), np.copysign(x, -x))
    for fn in (jnp.frexp, jnp.signbit, lambda a: jnp.copysign(a, -a)):
        with pytest.raises(pj.PtoDtypeError, match="int16.*cast to float32 first"):
            pj.kernel(fn)(x.astype(np.float16))
