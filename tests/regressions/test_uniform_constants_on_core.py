"""An elementwise op's constant operand of one value throughout (jnp.where's -inf fill, zeros_like,
full_like) is a scalar of the op's tiles, not a GM tensor the kernel reads: a (4, 64, 64) -inf fill was
a 64 KiB constant input read tile by tile beside the scores."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj
from fuzz import check_real_text

FNS = {
    "where fill": lambda s, t: jnp.where(t > 0, s, -jnp.inf),
    "where first": lambda s, t: jnp.where(t > 0, 0.0, s),
    "where both": lambda s, t: jnp.where(t > 0, 1.0, 0.0) * s,
    "zeros_like": lambda s, t: s + jnp.zeros_like(s) * t,
    "full minus": lambda s, t: jnp.full_like(s, 3.0) - s,
    "full over": lambda s, t: jnp.full_like(s, 3.0) / s,
    "base": lambda s, t: jnp.full_like(s, 2.0) ** s,
    "compare": lambda s, t: (jnp.full_like(s, 0.5) < s).astype(jnp.float32),
    "int": lambda s, t: jnp.full(s.shape, 7, jnp.int32) * (t > 0).astype(jnp.int32),
}


@pytest.mark.parametrize("name", FNS)
def test_a_uniform_constant_is_no_gm_input(name):
    rng = np.random.default_rng(0)
    s, t = (rng.standard_normal((4, 64, 64)).astype(np.float32) for _ in range(2))
    fn = FNS[name]
    graph = pj.lower(fn, s, t).as_text("block").split("\n\n")[-1]
    assert "= constant" not in graph, graph
    check_real_text(fn, (s, t), archs=("a3",), levels=("level2",))
    np.testing.assert_array_equal(np.asarray(jax.jit(pj.kernel(fn))(s, t)), np.asarray(pj.kernel(fn)(s, t)))


def test_a_causal_mask_still_reads_its_mask_but_not_its_fill():
    def fn(s):
        mask = jnp.arange(64)[:, None] >= jnp.arange(64)[None, :]
        return jax.nn.softmax(jnp.where(mask, s, -jnp.inf), -1)

    s = np.random.default_rng(1).standard_normal((4, 64, 64)).astype(np.float32)
    graph = pj.lower(fn, s).as_text("block").split("\n\n")[-1]
    assert graph.count("= constant") == 1 and "bool[64,64] = constant" in graph   # one head's mask, broadcast
    np.testing.assert_allclose(np.asarray(pj.kernel(fn)(s)), np.asarray(jax.jit(fn)(s)), rtol=2e-6, atol=1e-7)
