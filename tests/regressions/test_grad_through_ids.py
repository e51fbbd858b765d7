"""``jax.grad`` inside a kernel of ``x.at[i].set`` (its derivative scatters uint32 update ids into zeros
to see which write wins) and of ``jnp.argsort`` (a sort with a second, uint32, iota payload): both
were refused, naming a uint32 the user never wrote or "argsort" as the unsupported call."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

X = np.random.default_rng(0).normal(size=(16, 32)).astype(np.float32)
W = np.arange(32, dtype=np.float32)

CASES = {
    "set rows, repeated": (lambda a, i: jax.grad(lambda z: jnp.sum(z.at[i].set(z[0] * 2) ** 2))(a),
                           np.array([3, 7, 3], np.int32)),
    "set pairs, one out of range": (lambda a, i: jax.grad(lambda z: jnp.sum(z.at[i, i + 1].set(z[0, :3] * 2) ** 2))(a),
                                    np.array([3, 40, 3], np.int32)),
    "argsort then take": (lambda a, i: jax.grad(lambda z: jnp.sum(
        jnp.take_along_axis(z * 2, jnp.argsort(z, axis=1, descending=True), axis=1) * W))(a), None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradient_equals_jax(name):
    fn, i = CASES[name]
    args = (X,) if i is None else (X, i)
    f = fn if i is not None else (lambda a: fn(a, None))
    want = np.asarray(f(*map(jnp.asarray, args)))
    np.testing.assert_allclose(np.asarray(pj.kernel(f)(*args)), want, rtol=1e-6, atol=1e-6)


def test_a_sort_of_another_payload_names_what_is_translated():
    with pytest.raises(pj.errors.PtoUnsupportedError, match=r"sorts 1 key\(s\) with 1 payload\(s\); it is translated "
                                                           r"for one key whose payloads are iotas"):
        pj.kernel(lambda a, b: jax.lax.sort((a, b), num_keys=1)[1])(X, X)
