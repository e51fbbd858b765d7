"""A small constant array broadcast over a large tensor (a chunked scan's causal mask, 16 x 16) stays a
broadcast that the tiles expand: the block level held two 524 288-element bool constants, read from GM by
every task, and under jax.jit XLA spent seconds constant-folding them."""
import re

import jax
import jax.numpy as jnp
import numpy as np

import ptojax as pj


def chunk_weights(lc, bc):
    seg = lc[:, :, None] - lc[:, None, :]
    mask = jnp.tril(jnp.ones((16, 16), bool))[None, :, :, None, None]
    w = jnp.where(mask, jnp.exp(jnp.where(mask, seg, 0.0)), 0.0)
    return jnp.sum(w * bc[:, None], axis=2)


def test_a_broadcast_causal_mask_is_not_folded_to_its_full_size():
    rng = np.random.default_rng(0)
    lc, bc = (rng.normal(size=(4, 16, 32, 16)).astype(np.float32) for _ in range(2))
    kernel = pj.kernel(chunk_weights)
    want = np.asarray(jax.jit(chunk_weights)(lc, bc))
    np.testing.assert_allclose(np.asarray(kernel(lc, bc)), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jax.jit(kernel)(lc, bc)), want, rtol=1e-5, atol=1e-5)
    text = kernel.lower(lc, bc).as_text("block")
    sizes = [int(np.prod([int(d) for d in m.group(1).split(",") if d] or [1]))
             for m in re.finditer(r"%\d+:\w+\[([\d,]*)\] = constant", text)]
    assert sizes and max(sizes) <= 4096, sizes
