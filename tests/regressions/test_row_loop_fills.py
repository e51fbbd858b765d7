"""A column-tiled op of a row loop that broadcasts a scalar, a column or a row to its tile (``where(x > 0, x,
s)`` with a traced 0-d ``s``) keeps the fill at the column tile's width when the loop reads its rows in
narrower chunks (the UB does not hold the vec tile's columns for every member). Before, the fill stayed
at the vec tile's width: an internal "pto.where: shapes (8, 1024), (8, 1024), (8, 2048) do not broadcast"."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


def _fill_of(kind, x):
    rng = np.random.default_rng(1)
    if kind == "scalar":
        return np.float32(0.5).astype(x.dtype)
    if kind == "column":
        return rng.standard_normal((x.shape[0], 1)).astype(x.dtype)
    return rng.standard_normal((1, x.shape[1])).astype(x.dtype)


@pytest.mark.parametrize("kind", ["scalar", "column", "row"])
@pytest.mark.parametrize("vec,cols", [((8, 2048), 8192), ((16, 1024), 4096)])
def test_where_with_a_fill_beside_a_row_sum(kind, vec, cols):
    def fn(x, s):
        with pj.tile(vec=vec):
            return jnp.where(x > 0, x, s), jnp.sum(x, axis=-1, keepdims=True)

    x = np.random.default_rng(0).standard_normal((2 * vec[0], cols)).astype(np.float32)
    s = _fill_of(kind, x)
    a, m = pj.kernel(fn)(x, s)
    np.testing.assert_array_equal(np.asarray(a), np.where(x > 0, x, s))
    np.testing.assert_allclose(np.asarray(m), np.sum(x.astype(np.float64), -1, keepdims=True), rtol=1e-5, atol=1e-4)
