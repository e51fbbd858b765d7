"""Finding of a probe of gradients (100 pj.nn cases on both backends, 97 pj.ops cases, all within tolerance):
``pj.ops.pad`` made a traced pad value a constant (``value.item()``): its gradient came out 0 without
``jax.jit`` and a JAX ``ConcretizationTypeError`` under ``jax.jit`` / ``jax.vmap``. A traced value is refused
by name now; a number pads as before, differentiably in ``x``."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

X = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
PADS = ((1, 0), (2, 3))


@pytest.mark.parametrize("transform, value", [
    (lambda f: jax.grad(lambda v: jnp.sum(f(v))), jnp.float32(1.5)),
    (jax.jit, jnp.float32(1.5)),
    (jax.vmap, jnp.ones((3,), jnp.float32)),
])
def test_a_traced_pad_value_is_refused_by_name(transform, value):
    with pytest.raises(pj.PtoArgumentError, match="pad value must be a number known when the kernel is traced"):
        transform(lambda v: pj.ops.pad(X, PADS, v))(value)


def test_a_number_pads_and_differentiates_in_x():
    got = jax.grad(lambda x: jnp.sum(pj.ops.pad(x, PADS, 1.5) ** 2))(X)
    np.testing.assert_allclose(got, 2 * X)
    np.testing.assert_array_equal(pj.ops.pad(X, PADS, 1.5), jnp.pad(X, PADS, constant_values=1.5))


def test_abs_and_clip_take_jnps_gradient_at_their_kinks():
    """``pj.ops.abs`` gave 0 at 0 (jnp: 1) and ``pj.ops.clip`` 1 on a bound (jnp, a min of a max: 1/2)."""
    x = jnp.asarray([0.0, 1.0, -2.0, 2.0, 0.5, -1.0], jnp.float32)
    lo, hi = jnp.full(6, -1.0).at[4].set(0.5), jnp.full(6, 2.0).at[4].set(0.5)     # x == lo == hi at 4
    w = jnp.arange(1.0, 7.0)
    np.testing.assert_array_equal(jax.grad(lambda a: jnp.sum(pj.ops.abs(a) * w))(x),
                                  jax.grad(lambda a: jnp.sum(jnp.abs(a) * w))(x))
    for k in range(3):
        np.testing.assert_array_equal(jax.grad(lambda *v: jnp.sum(pj.ops.clip(*v) * w), k)(x, lo, hi),
                                      jax.grad(lambda *v: jnp.sum(jnp.clip(*v) * w), k)(x, lo, hi))
