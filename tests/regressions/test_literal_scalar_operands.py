"""Regressions from a sweep of the jnp API: a Python scalar that JAX keeps as a literal operand.

- ``jnp.dot(a, 2.0)`` (a ``dot_general`` with a 0-d literal) failed with AttributeError ('TypedFloat' has no
  'ndim'); a product by a scalar is an elementwise product now (a logical and for bools).
- ``(a > 0) == False`` and ``jnp.where(True, a, -a)`` (a bool literal of ``eq`` / ``select_n``) failed with
  AttributeError ('bool' has no 'dtype').
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

X = np.linspace(-1, 1, 256, dtype=np.float32).reshape(8, 32)


@pytest.mark.parametrize("fn", [
    lambda a: jnp.dot(a, 2.0), lambda a: jnp.dot(2.0, a), lambda a: jnp.dot(a.astype(jnp.int32), 3),
    lambda a: jnp.dot(a > 0, True), lambda a: (a > 0) == False, lambda a: jnp.where(True, a, -a),  # noqa: E712
    lambda a: jax.lax.select_n(True, a, -a),
], ids=["dot-f32", "dot-left", "dot-int", "dot-bool", "eq-bool", "where", "select_n"])
def test_a_literal_scalar_operand_is_taken_as_jax_takes_it(fn):
    want = np.asarray(jax.jit(fn)(X))
    got = np.asarray(pj.kernel(fn)(X))
    assert got.dtype == want.dtype and np.array_equal(got, want)
