"""backend="xla" keeps the Tensor level's log1p / expm1 accurate for small arguments: XLA's simplifier
folded ``(x + 1) - 1`` to ``x`` and ``log(exp(x))`` to ``x``, the roundings those sequences compensate,
so ``log1p(1e-7)`` came out 1.19e-7 (and expm1, softplus, log_sigmoid, sinh, atanh built on them up to
93 % off); the sim backend was right."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

SMALL = np.array([[1e-7, 3.7562073e-4, 1.6360798e-4, 6.1606116e-8, -6.2e-4, -2.5e-6, 1e-30, 0.0]], np.float32)
CASES = [("log1p", jnp.log1p, np.log1p, SMALL),
         ("expm1", jnp.expm1, np.expm1, SMALL),
         ("sinh", jnp.sinh, np.sinh, SMALL),
         ("arctanh", jnp.arctanh, np.arctanh, SMALL),
         ("softplus", jax.nn.softplus, lambda v: np.logaddexp(0.0, v), SMALL - np.float32(16.6)),
         ("log_sigmoid", jax.nn.log_sigmoid, lambda v: -np.logaddexp(0.0, -v), SMALL + np.float32(16.6))]


@pytest.mark.parametrize("name,fn,truth,x", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("jit", [False, True])
def test_small_arguments_on_the_xla_backend(name, fn, truth, x, jit):
    f = pj.kernel(fn, backend="xla")
    got = np.asarray((jax.jit(f) if jit else f)(x), np.float64)
    want = truth(x.astype(np.float64))
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert np.all(np.abs(got - want) <= 8 * ulp), (name, got, want)
