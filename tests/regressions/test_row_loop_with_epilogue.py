"""A last-axis reduction followed by ops on its per-row result (``jnp.mean``: a sum then a divide;
``max(x, -1) + 1``) under a user ``vec`` tile that splits the row: one row loop over column chunks with
the epilogue in it, as the bare reduction gets. It was refused (``needs 265 056 bytes of UB``; at vec
(24, 512) at realize, at (16, 512) by 64 bytes), with advice (fewer rows) that did not help."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

BODIES = {"mean": lambda x: jnp.mean(x, -1),
          "sum / 1000": lambda x: jnp.sum(x, -1) / 1000.0,
          "max + 1, keepdims": lambda x: jnp.max(x, -1, keepdims=True) + 1.0,
          "max + 1": lambda x: jnp.max(x, -1) + 1.0}


@pytest.mark.parametrize("shape, vec", [((33, 1000), (64, 512)), ((33, 1000), (24, 512)), ((33, 1024), (16, 512))])
@pytest.mark.parametrize("name", sorted(BODIES))
def test_equals_xla(name, shape, vec):
    def fn(x):
        with pj.tile(vec=vec):
            return BODIES[name](x)

    x = np.random.default_rng(len(name)).normal(size=shape).astype(np.float32)
    np.testing.assert_allclose(pj.kernel(fn)(x), jax.jit(fn)(x), rtol=2e-6, atol=2e-5)
