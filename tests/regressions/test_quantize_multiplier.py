"""quantize's rounding as docs/ops.md now states it: ``rint(x * m)`` in float32 with ``m = 127 / max|x|``
rounded to float32 (PyPTO's golden), which differs from ``x * 127 / max|x|`` computed exactly at a half;
and the multiplier's overflow below ``127 / FLT_MAX`` saturates, as the multiplier does in PyPTO."""
import jax
import numpy as np

import ptojax as pj


def _golden(x):
    amax = np.max(np.abs(x), axis=-1, keepdims=True)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        m = np.where(amax > 0, np.float32(127.0) / np.where(amax > 0, amax, np.float32(1)), np.float32(0))
        return np.clip(np.rint(x * m.astype(np.float32)), -128, 127).astype(np.int8)


def test_quantize_rounds_by_the_float32_multiplier():
    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 1] = np.float32(3.623624), np.float32(0.9273054)  # x1 * 127 / amax = 32.5000008 exactly
    for run in (pj.kernel(lambda v: pj.ops.quantize(v, -1)), jax.jit(pj.kernel(lambda v: pj.ops.quantize(v, -1)))):
        q = np.asarray(run(x)[0])
        np.testing.assert_array_equal(q, _golden(x))
        assert q[0, 1] == 32                                           # not rint(32.5000008) = 33


def test_a_multiplier_that_overflows_saturates_as_documented():
    x = np.zeros((1, 32), np.float32)
    x[0, :4] = [2e-37, -1e-37, 5e-38, -2e-37]                          # max|x| < 127 / FLT_MAX: m = inf
    q, scale = pj.kernel(lambda v: pj.ops.quantize(v, -1))(x)
    np.testing.assert_array_equal(np.asarray(q), _golden(x))
    assert list(np.asarray(q)[0, :5]) == [127, -128, 127, -128, 0]
    np.testing.assert_allclose(np.asarray(scale), np.float32(2e-37) / np.float32(127), rtol=1e-6)
