"""Regressions from a probe of state, caching and aliasing.

``Compiled.run`` returned NumPy outputs that were the caller's input (a kernel returning an argument, or
a reshape of it) or one another (``z = x + y; return z, z``): writing one wrote the other. Each output
owns its memory now, as eager calls' and ``jax.jit``'s do (donated arguments are still updated in place).

A keyword argument after a parameter left at its default (``fn(x, act="relu", scale=None)`` called as
``f(x, scale=s)``) made the default a traced argument: "argument 'relu' is not an array or a number",
naming an argument the caller never passed. Such defaults stay Python values now, as under ``jax.jit``.
Big-endian NumPy data is taken in the machine's byte order.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

X = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
Y = np.ones((32, 32), np.float32)


@pytest.mark.parametrize("fn", [lambda x, y: (x, x + y), lambda x, y: (x.reshape(-1), x + y),
                                lambda x, y: ((z := x + y), z)], ids=["x", "reshape", "twice"])
def test_run_returns_outputs_that_own_their_memory(fn):
    x, y = X.copy(), Y.copy()
    (a, b), _ = pj.kernel(fn).lower(x, y).compile().run(x, y)
    for out in (a, b):
        assert not np.shares_memory(out, x) and not np.shares_memory(out, y)
    assert not np.shares_memory(a, b)
    want_a, want_b = (np.asarray(v) for v in jax.jit(fn)(X, Y))
    a[...] = -1
    np.testing.assert_array_equal(x, X)
    np.testing.assert_array_equal(b, want_b)
    np.testing.assert_array_equal(np.asarray(jax.jit(fn)(X, Y)[0]), want_a)


def act_then_scale(x, act="relu", alpha=0.5, scale=None):
    y = jax.nn.relu(x) if act == "relu" else jnp.tanh(x)
    if alpha > 0:                                       # Python control flow on a default
        y = y * alpha
    return y if scale is None else y * scale


def test_a_keyword_after_defaults_keeps_them_python_values():
    x = np.linspace(-1, 1, 32 * 32, dtype=np.float32).reshape(32, 32)
    s = np.full((32, 32), 2.0, np.float32)
    f = pj.kernel(act_then_scale)
    for kwargs in ({"scale": s}, {}):
        want = jax.jit(act_then_scale)(x, **kwargs)
        np.testing.assert_array_equal(np.asarray(f(x, **kwargs)), np.asarray(want), err_msg=str(kwargs))
        np.testing.assert_array_equal(np.asarray(jax.jit(f)(x, **kwargs)), np.asarray(want), err_msg=str(kwargs))
    compiled = f.lower(x, scale=s).compile()        # called as lowered: (x, scale=s); (x, s) would be act=s
    np.testing.assert_array_equal(compiled(x, scale=s), np.asarray(jax.jit(act_then_scale)(x, scale=s)))
    with pytest.raises(pj.PtoArgumentError, match=r"lowered for calls act_then_scale\(x, scale=\.\.\.\)"):
        compiled(x, s)
    compiled = pj.kernel(lambda x, alpha=0.5, scale=None: x * alpha * scale).lower(x, 0.5, s).compile()
    np.testing.assert_array_equal(compiled(x, 0.5, s), x * 0.5 * s)
    with pytest.raises(pj.PtoArgumentError, match=r"a keyword argument follows parameters left at their defaults "
                                                  r"\(0.5\), which this compile takes as arguments"):
        compiled(x, scale=s)


def test_big_endian_data_is_taken_in_the_machines_byte_order():
    """A ``>f4`` array raised JAX's bare "dtype('>f4') is not a valid dtype for JAX type promotion"."""
    x = np.arange(256, dtype=">f4").reshape(8, 32)
    np.testing.assert_array_equal(np.asarray(pj.kernel(lambda x: x * 2)(x)), x.astype("<f4") * 2)
