"""``jax.vmap`` of a kernel calling ``jnp.argsort`` past 4 096 elements per batch: the argsort's iota,
broadcast over the batch, stays a broadcast of a constant (not folded element by element), and the sort
translation took it for a payload it cannot sort ("sorts 1 key(s) with 1 payload(s)") although every
per-example call worked. It counts by its value now."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj


@pytest.mark.parametrize("descending", [False, True])
def test_vmapped_argsort_of_6400_values_per_example(descending):
    k = pj.kernel(lambda a: jnp.argsort(a, axis=-1, descending=descending))
    x = np.random.default_rng(0).standard_normal((2, 100, 64)).astype(np.float32)
    want = np.argsort(-x if descending else x, -1, kind="stable")
    np.testing.assert_array_equal(np.asarray(jax.vmap(k)(x)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(k))(x)), want)
