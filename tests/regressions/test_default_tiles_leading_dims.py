"""Default vector tiles of rank-3+ tensors: where the rows take their whole dim, the leading dims fill the
tile too, as a 2-D tensor's rows do (a (256, 2, 4, 64) repeat was 512 tasks of 1 KiB, 258 us; a (64, 4, 64)
softmax 64 tasks, 24.2 us against 8.4 us for the same bytes as (256, 64))."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ptojax as pj

CASES = {
    "repeat": (lambda k: jnp.repeat(k, 4, axis=1) * 2.0, (256, 2, 64)),
    "softmax": (lambda x: jax.nn.softmax(x, -1), (64, 4, 64)),
    "rope": (lambda x: jnp.concatenate([-x[..., 32:], x[..., :32]], -1) * 0.5 + x, (64, 4, 64)),
    "sum": (lambda x: jnp.sum(x, -1), (64, 4, 64)),
    "sum over heads": (lambda x: jnp.sum(x, 1), (64, 4, 64)),
    "transpose": (lambda x: jnp.transpose(x, (1, 0, 2)) + 1.0, (64, 4, 64)),
}


@pytest.mark.parametrize("name", CASES)
def test_rank3_default_tiles_match_xla_and_the_2d_form(name):
    fn, shape = CASES[name]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    kernel = pj.kernel(fn)
    np.testing.assert_allclose(np.asarray(kernel(x)), np.asarray(jax.jit(fn)(x)), rtol=2e-6, atol=2e-6)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), np.asarray(kernel(x)))
    compiled = kernel.lower(x).compile()
    compiled.ptoas()
    assert compiled.profile().tasks <= 32


def test_a_rank3_softmax_costs_what_its_2d_form_costs():
    """The same contiguous rows as (64, 4, 64) or (256, 64): the same tiles, the same predicted time."""
    soft = lambda x: jax.nn.softmax(x, -1)  # noqa: E731
    us = [pj.kernel(soft).lower(jax.ShapeDtypeStruct(s, jnp.float32)).compile().profile().makespan_us
          for s in ((64, 4, 64), (256, 64))]
    assert us[0] <= 1.05 * us[1]


def test_a_transpose_and_its_neighbours_share_one_tile():
    fn = CASES["transpose"][0]
    low = pj.lower(fn, jax.ShapeDtypeStruct((64, 4, 64), jnp.float32))
    assert len(low.programs) == 1, [p.name for p in low.programs]
