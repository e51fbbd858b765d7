"""Finding of a probe of control flow in kernels (about 460 comparisons with jax.jit, none wrong): ``jnp.where``
of a traced scalar condition and two Python numbers (``jnp.where(jnp.sum(x) > 0, 1, 0)``, a flag carried
through ``lax.scan``) was refused: "pto.where: needs at least one tensor operand, got scalars"."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

X = np.linspace(-1, 2, 8 * 32, dtype=np.float32).reshape(8, 32)


def _flag(x):
    def body(c, r):
        done = c | (jnp.max(r) > 1.5)
        return done, jnp.where(done, 1, 0)
    return jax.lax.scan(body, jnp.bool_(False), x)


@pytest.mark.parametrize("fn, args", [
    (lambda x: jnp.where(jnp.sum(x) > 0, 1, 0), (X,)),
    (lambda x, p: jnp.where(p, 1.0, 2.0) * x, (X, np.bool_(False))),
    (lambda x: jnp.where(x > 0, 3, -2.5), (X,)),
    (_flag, (X,)),
], ids=["sum > 0", "argument", "tensor condition", "scan flag"])
def test_where_of_two_numbers_takes_jaxs_dtype(fn, args):
    want = jax.tree.leaves(jax.jit(fn)(*args))
    for got in (pj.kernel(fn)(*args), jax.jit(pj.kernel(fn))(*args)):
        for g, w in zip(jax.tree.leaves(got), want):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
