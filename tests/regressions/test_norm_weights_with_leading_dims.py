"""``pj.ops.rms_norm`` / ``layer_norm`` with weights of leading dims ((B, 1, N) or (M, N): what ``jax.vmap``
of a norm with a batched weight makes) apply each row its own weight. The norm's tile rule applied the
weight tile's first row to every row: jax.vmap(kernel) differed from the per-example calls (max 4.8),
and with x unbatched the lowering failed ("does not fit the destination's valid region")."""
import jax
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj

R = np.random.default_rng(0)


def _rms(x, g):
    x = np.asarray(x, np.float64)
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6) * np.asarray(g, np.float64)


def _ln(x, g, b):
    x = np.asarray(x, np.float64)
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * np.asarray(g, np.float64) + np.asarray(b, np.float64)


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (ml_dtypes.bfloat16, 2e-2)])
@pytest.mark.parametrize("wshape", [(2, 1, 16), (4, 16), (2, 4, 16)])
def test_weights_per_batch_or_row(dtype, tol, wshape):
    x = R.standard_normal((2, 4, 16)).astype(dtype)
    g, b = R.standard_normal(wshape).astype(dtype), R.standard_normal(wshape).astype(dtype)
    rms = pj.kernel(lambda x, g: pj.ops.rms_norm(x, g))(x, g)
    ln = pj.kernel(lambda x, g, b: pj.ops.layer_norm(x, g, b))(x, g, b)
    beta = pj.kernel(lambda x, b: pj.ops.layer_norm(x, None, b))(x, b)
    np.testing.assert_allclose(np.asarray(rms, np.float64), _rms(x, g), rtol=tol, atol=tol)
    np.testing.assert_allclose(np.asarray(ln, np.float64), _ln(x, g, b), rtol=tol, atol=tol)
    np.testing.assert_allclose(np.asarray(beta, np.float64), _ln(x, 1.0, b), rtol=tol, atol=tol)


def test_vmap_with_a_batched_weight():
    k = pj.kernel(lambda x, g: pj.ops.rms_norm(x, g))
    x = R.standard_normal((2, 4, 16)).astype(np.float32)
    g = R.standard_normal((2, 16)).astype(np.float32)
    want = _rms(x, g[:, None, :])
    np.testing.assert_allclose(np.asarray(jax.vmap(k)(x, g)), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(k))(x, g)), want, rtol=1e-5, atol=1e-5)
    shared = np.asarray(jax.vmap(k, in_axes=(None, 0))(x[0], g))
    np.testing.assert_allclose(shared, _rms(x[0][None], g[:, None, :]), rtol=1e-5, atol=1e-5)
