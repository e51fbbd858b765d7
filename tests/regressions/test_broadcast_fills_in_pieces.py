"""A tile broadcast into a program from a smaller operand (a traced 0-d scalar, a Python scalar past the
folding size, a (1, N) row mask, an (M, 1) column) no longer stops the program from computing each tile
in pieces: only a scalar's fill was cut so. Before, such a group was split (the fill went through GM as
a whole tensor) and failed with internal names — "@expand needs 256064 bytes of UB", "@expand_where_sum
needs 280608 bytes", "cannot place a 65536-byte tile in UB: 49408 of 196608 bytes are live" — or was
refused at partition, under vec tiles that fit the UB by themselves."""
import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj
from fuzz import check_real_text

R = np.random.default_rng(0)


def _sum64(y):
    return np.sum(np.asarray(y, np.float64), axis=-1, keepdims=True)


def _close_sum(got, want, n):          # a row sum adds left to right: its error grows with the row (docs/ops.md)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=n * 2.0 ** -24, atol=1e-3)


def test_traced_scalar_fill_and_its_row_sum():
    def fn(x, s):
        with pj.tile(vec=(8, 4000)):
            y = jnp.where(x > 0, x, s)
            return y, jnp.sum(y, axis=-1)

    x = R.standard_normal((16, 5000)).astype(np.float32)
    y, m = pj.kernel(fn)(x, np.float32(0.5))
    want = np.where(x > 0, x, np.float32(0.5))
    np.testing.assert_array_equal(np.asarray(y), want)
    _close_sum(m, _sum64(want)[:, 0], 5000)


def test_python_scalar_fill_of_a_large_tensor():
    def fn(x):
        with pj.tile(vec=(8, 4080)):
            return jnp.where(x > 0, x, -1e4)

    x = R.standard_normal((400, 4080)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x)), np.where(x > 0, x, np.float32(-1e4)))


def test_row_mask_with_a_row_sum_and_a_masked_softmax():
    def summed(x, m):
        with pj.tile(vec=(8, 2048)):
            y = jnp.where(m, x, 0.0)
            return y, jnp.sum(y, axis=-1, keepdims=True)

    def softmax(x, m):
        with pj.tile(vec=(8, 2048)):
            return jax.nn.softmax(jnp.where(m, x, -jnp.inf), axis=-1)

    x = R.standard_normal((8, 2048)).astype(np.float32)
    m = R.uniform(size=(1, 2048)) > 0.3
    y, s = pj.kernel(summed)(x, m)
    want = np.where(m, x, np.float32(0))
    np.testing.assert_array_equal(np.asarray(y), want)
    _close_sum(s, _sum64(want), 2048)
    z = np.where(m, x.astype(np.float64), -np.inf)
    e = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(pj.kernel(softmax)(x, m)), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_half_precision_scalar_fill_cast_and_row_min():
    def fn(x, s):
        with pj.tile(vec=(8, 2048)):
            y = jnp.where(x > 0, x, s).astype(jnp.float32)
            return jnp.min(jnp.where(x > -0.5, y, 0.0), axis=-1, keepdims=True)

    x = R.standard_normal((8, 2048)).astype(np.float16)
    y = np.where(x > 0, x, np.float16(0.75)).astype(np.float32)
    want = np.min(np.where(x > -0.5, y, np.float32(0)), -1, keepdims=True)
    np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x, np.float16(0.75))), want)


def test_column_fill_with_a_row_sum():
    def fn(x, col):
        with pj.tile(vec=(16, 2048)):
            y = jnp.where(x > 0, x, col)
            return y, jnp.sum(y, axis=-1, keepdims=True)

    x = R.standard_normal((100, 2048)).astype(np.float32)
    col = R.uniform(size=(100, 1)).astype(np.float32)
    y, s = pj.kernel(fn)(x, col)
    want = np.where(x > 0, x, col)
    np.testing.assert_array_equal(np.asarray(y), want)
    _close_sum(s, _sum64(want), 2048)


def test_pieces_of_a_column_fill_assemble():
    def fn(x, col):
        with pj.tile(vec=(16, 2048)):
            return jnp.where(x > 0, x, col)

    x = R.standard_normal((32, 2048)).astype(np.float32)
    check_real_text(fn, (x, R.uniform(size=(32, 1)).astype(np.float32)), archs=("a3",), levels=("level2",))
