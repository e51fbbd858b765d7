"""Comparisons, max and min of bool operands (False < True) were refused (``pto.lt: operand has dtype
bool``): the vector units compare numbers. They translate to logic on the masks now."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

rng = np.random.default_rng(0)
A, B = rng.random((7, 33)) < 0.5, rng.random((7, 33)) < 0.5
A[3] = False


@pytest.mark.parametrize("name, fn", [
    ("lt", lambda a, b: a < b), ("le", lambda a, b: a <= b), ("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b),
    ("maximum", jnp.maximum), ("minimum", jnp.minimum), ("maximum-literal", lambda a, b: jnp.maximum(a, True)),
    ("lt-literal", lambda a, b: a < np.bool_(True)), ("select", lambda a, b: jnp.where(a > b, 1.0, 2.0)),
    ("max-rows", lambda a, b: jnp.max(a, axis=1)), ("min-cols", lambda a, b: jnp.min(a | b, axis=0)),
    ("max-all", lambda a, b: jnp.max(a))])
def test_bool_order_matches_jax(name, fn):
    want = np.asarray(fn(A, B))
    kernel = pj.kernel(fn)
    np.testing.assert_array_equal(np.asarray(kernel(A, B)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(A, B)), want)
