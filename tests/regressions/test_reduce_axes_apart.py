"""A reduction over axes that are not adjacent of a tensor one tile holds (``jnp.sum(x, axis=(0, 2))``
of (3, 4, 5, 6)) was refused at realize ("pto.tsum over axes [0, 2] ... no real PTO form yet", or "no
copy of a 1x20 tile into a 4x5 one" for (0, 3)); it reduces one run of adjacent axes at a time."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


@pytest.mark.parametrize("shape, fn", [((3, 4, 5, 6), jnp.sum), ((3, 4, 5, 6), jax.nn.logsumexp),
                                       ((2, 3, 4, 5, 6), jnp.max)])
def test_every_pair_of_axes_apart_equals_jax(shape, fn):
    x = np.random.default_rng(len(shape)).uniform(-1, 1, shape).astype(np.float32)
    for axes in itertools.combinations(range(len(shape)), 2):
        if axes[1] - axes[0] == 1:
            continue
        for keepdims in (False, True):
            f = pj.kernel(lambda v: fn(v, axis=axes, keepdims=keepdims))
            np.testing.assert_allclose(np.asarray(f(x)), np.asarray(fn(x, axis=axes, keepdims=keepdims)),
                                       rtol=1e-5, atol=1e-5, err_msg=str((axes, keepdims)))
