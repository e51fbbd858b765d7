"""``argmax`` / ``argmin`` under a user ``vec`` tile that splits the row read it in the tile's column chunks
(the extremum by a row loop, then the first index holding it), as ``max`` / ``sum`` do: 11 rows of 2 048
float32 columns under vec (11, 1024) were one whole-row tile that needed 363 264 bytes of UB, refused at
realize, with advice (fewer rows) that the user's split made moot."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


def _rows(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.int32:
        return rng.integers(-50, 50, shape).astype(np.int32)        # many ties
    x = np.round(rng.standard_normal(shape) * 4).astype(dtype)       # ties too
    x.reshape(-1, shape[-1])[1, 7] = np.nan
    x.reshape(-1, shape[-1])[2, shape[-1] - 3] = np.inf
    return x


@pytest.mark.parametrize("fn", [jnp.argmax, jnp.argmin])
@pytest.mark.parametrize("shape, vec, dtype", [((11, 2048), (11, 1024), np.float32),
                                               ((64, 2048), (64, 256), np.float32),
                                               ((3, 5, 1536), (5, 512), jnp.bfloat16),
                                               ((9, 2048), (9, 1024), np.int32)])
def test_equals_xla_under_a_tile_that_splits_the_row(fn, shape, vec, dtype):
    def kernel(x):
        with pj.tile(vec=vec):
            return fn(x, -1), fn(x, -1, keepdims=True)

    x = _rows(shape, dtype, seed=len(shape) + vec[-1])
    got = pj.kernel(kernel)(x)
    want = jax.jit(kernel)(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
