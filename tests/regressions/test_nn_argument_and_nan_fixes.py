"""pj.nn (probe of the training ops): eps of the norms checked (-1 and NaN gave NaN outputs, None a bare
TypeError, '1e-6' and True were taken); softmax's axis must be one int (None, tuples and 1.0 were
"out of range", True was axis 1); a NaN query row keeps flash attention's dK NaN only where jnp's is
(every key's was NaN: masked scores' gradient was NaN * 0, where jnp.where's is 0)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

X = np.random.default_rng(0).normal(size=(4, 16)).astype(np.float32)
G = np.ones(16, np.float32)


@pytest.mark.parametrize("eps", [-1.0, float("nan"), float("inf"), None, "1e-6", True])
def test_norm_eps_is_a_non_negative_finite_number(eps):
    for call in (lambda: pj.nn.rms_norm(X, G, eps=eps), lambda: pj.nn.layer_norm(X, G, G, eps=eps)):
        with pytest.raises(pj.PtoArgumentError, match=r"pj.nn.(rms|layer)_norm: eps must be a non-negative finite "
                                                      r"number, got "):
            call()


def test_norm_eps_of_numpy_floats_computes():
    got = pj.nn.rms_norm(X, G, eps=np.float32(1e-5))
    want = X / np.sqrt(np.mean(X * X, axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("axis", [None, (0, 1), 1.0, True])
def test_softmax_axis_must_be_one_int(axis):
    with pytest.raises(pj.PtoArgumentError, match=r"pj.nn.softmax: axis must be one int, got "):
        pj.nn.softmax(X, axis=axis)
    with pytest.raises(pj.PtoArgumentError, match=r"pj.nn.softmax: axis 2 is out of range for a rank-2 input"):
        pj.nn.softmax(X, axis=2)


@pytest.mark.parametrize("backend", ["sim", "xla"])
def test_a_nan_query_row_spreads_into_dk_as_in_jnp(backend):
    rng = np.random.default_rng(0)
    h, s, d = 1, 17, 16
    q, k, v = (jnp.asarray(rng.normal(size=(h, s, d)), jnp.float32) for _ in range(3))
    q = q.at[0, 5, 3].set(jnp.nan)                 # query 5 attends keys 0..5 only

    def ref(q, k, v):
        scores = jnp.einsum("hqd,hkd->hqk", q, k) / np.sqrt(d)
        scores = jnp.where(np.tril(np.ones((s, s), bool)), scores, -jnp.inf)
        return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(scores, -1), v)

    def grads(f):
        return jax.grad(lambda q, k, v: jnp.sum(f(q, k, v) * 0.5), argnums=(0, 1, 2))(q, k, v)

    for got, want in zip(grads(lambda *a: pj.nn.flash_attention(*a, backend=backend)), grads(ref)):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(np.nan_to_num(got), np.nan_to_num(want), rtol=2e-5, atol=2e-6)
