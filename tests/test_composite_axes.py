"""``pj.ops.softmax`` and ``pj.ops.quantize`` in a kernel along any axis: the instructions take the last
axis; another axis (or ``quantize``'s ``axis=None``, per tensor) runs as the op's reference ops (it
failed when the programs were realised: "tsoftmax over axes [0] (no real PTO form yet)")."""
import jax
import numpy as np
import pytest

import ptojax as pj
from helpers import BF16, F16, F32, assert_close, assert_quantized, np_quantize, np_softmax, rand


def _runs(fn, *args):
    """The kernel's results eagerly and under ``jax.jit``, which must agree bit for bit."""
    kernel = pj.kernel(fn)
    eager, jitted = kernel(*args), jax.jit(kernel)(*args)
    for e, j in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted)):
        np.testing.assert_array_equal(np.asarray(e), np.asarray(j))
    return eager


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
@pytest.mark.parametrize("shape,axis", [((3, 7), 0), ((3, 7), -2), ((2, 5, 33), 1), ((4, 3, 6), 0), ((1, 1), 0)])
def test_softmax_along_a_leading_axis(shape, axis, dtype):
    x = rand(shape, dtype, seed=3, low=-6, high=6)
    got = _runs(lambda a: pj.ops.softmax(a, axis=axis), x)
    assert got.dtype == dtype and got.shape == shape
    assert_close(got, np_softmax(x, axis).astype(dtype), dtype)


@pytest.mark.parametrize("dtype", [F32, F16])
@pytest.mark.parametrize("shape,axis", [((3, 7), 0), ((2, 5, 33), 1), ((2, 5, 33), (0, 1)), ((4, 40), None),
                                        ((2, 3, 8), None)])
def test_quantize_along_other_axes_and_per_tensor(shape, axis, dtype):
    x = rand(shape, dtype, seed=4)
    q, scale = _runs(lambda a: pj.ops.quantize(a, axis=axis), x)
    axes = None if axis is None else tuple(np.atleast_1d(axis) % len(shape))
    raw, want_scale = np_quantize(x, axes)
    assert q.shape == shape and scale.shape == want_scale.shape
    assert_quantized(q, raw)
    assert_close(scale, want_scale.astype(F32), F32)


def test_softmax_along_a_leading_axis_differentiates():
    x = rand((6, 16), F32, seed=5)
    loss = lambda fn: lambda a: (fn(a) ** 2).sum()  # noqa: E731
    want = jax.grad(loss(lambda a: jax.nn.softmax(a, axis=0)))(x)
    got = jax.grad(loss(lambda a: pj.ops.softmax(a, axis=0)))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-7)
