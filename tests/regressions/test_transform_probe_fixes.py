"""Findings of a probe of JAX transforms around kernels (about 330 cases of jit, vmap, grad, control flow,
shard_map and dtypes; no wrong number):

- ``jax.jit(pj.kernel(f), static_argnames="act")(x, act="relu")`` was refused ("'relu' is not an array or a
  number"): ``pj.kernel`` takes ``static_argnames`` / ``static_argnums`` now (``test_x64_and_arguments.py``).
- The kernel ``jax.vmap`` makes of a kernel with ``donate_argnums`` kept the argument positions for its
  flat leaves: ``fn(params, cache, ...)`` with ``params`` a dict of two arrays donated ``params["b"]``, not
  the cache."""
import jax
import numpy as np

import ptojax as pj
from ptojax.kernel import _BATCHED


def test_vmap_donates_the_leaves_of_the_donated_argument():
    def update(p, cache, v):
        return cache.at[0].set(v * p["a"] + p["b"])

    k = pj.kernel(update, donate_argnums=1)
    p = {"a": np.ones((64,), np.float32), "b": np.full((64,), 2, np.float32)}
    cache, v = np.zeros((2, 16, 64), np.float32), np.ones((2, 64), np.float32)
    out = jax.vmap(k, in_axes=(None, 0, 0))(p, cache, v)
    np.testing.assert_array_equal(np.asarray(out)[:, 0], np.full((2, 64), 3, np.float32))
    compiled = k.compiled_for(p, cache[0], v[0])
    (inner, _), = _BATCHED[compiled].values()
    assert inner.options.donate_argnums == (2,)        # the cache is the third flat leaf (after p's two)
