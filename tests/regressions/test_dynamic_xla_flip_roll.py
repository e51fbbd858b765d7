"""Regression: ``backend="xla"`` kernels with ``jnp.flip`` / ``jnp.roll`` along a symbolic row count did not
export, though plain ``jax.export`` of the same functions does.

``jnp.flip`` (``lax.rev``) became a gather of ``np.arange(m - 1, -1, -1)``, which cannot take a symbolic
``m`` (the error blamed a traced argument and advised ``functools.partial``); ``jnp.roll`` slices at the
symbolic offset ``mod(-1, m)``, which ``pj.ops.view`` turned into an ``int`` (a raw
``InconclusiveDimensionOperation``). The reversed indices along a symbolic axis are now
``m - 1 - iota(m)`` (the iota made on the cores), and a view keeps a symbolic offset (its shape rule
decides the bounds, its XLA reference slices at it as ``lax.slice`` does)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

CASES = {
    "flip rows": (lambda x: jnp.flip(x, 0), lambda x: x[::-1]),
    "flip both axes": (lambda x: jnp.flip(x), lambda x: x[::-1, ::-1]),
    "roll 1": (lambda x: jnp.roll(x, 1, 0), lambda x: np.roll(x, 1, 0)),
    "roll -3": (lambda x: jnp.roll(x, -3, 0), lambda x: np.roll(x, -3, 0)),
    "flip then roll, times 2": (lambda x: jnp.roll(jnp.flip(x, 0), 2, 0) * 2.0, lambda x: np.roll(x[::-1], 2, 0) * 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_xla_kernel_exports_with_symbolic_rows(name):
    fn, ref = CASES[name]
    m, = jax.export.symbolic_shape("m")
    spec = jax.ShapeDtypeStruct((m, 64), jnp.float32)
    exported = jax.export.export(jax.jit(pj.kernel(fn, backend="xla")))(spec)
    for rows in (1, 5, 17):
        x = np.random.default_rng(rows).standard_normal((rows, 64)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(exported.call(x)), ref(x))
        np.testing.assert_array_equal(np.asarray(exported.call(x)), np.asarray(jax.jit(fn)(x)))


def test_static_flip_is_unchanged():
    x = np.random.default_rng(0).standard_normal((9, 64)).astype(np.float32)
    for backend in ("xla", "sim"):
        np.testing.assert_array_equal(np.asarray(pj.kernel(lambda x: jnp.flip(x, 0), backend=backend)(x)), x[::-1])
