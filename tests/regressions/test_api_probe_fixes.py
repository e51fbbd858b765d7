"""Findings of a probe of jax.numpy / lax coverage: a boolean mask's index escaped as JAX's own error;
``lax.reduce_window`` by max / min and ``lax.top_k`` refused bool operands that ``jnp.max`` and
``jnp.sort`` take; a sort along a leading axis of more than about a thousand elements overfilled the UB
(its tile keeps the axis whole beside the last dim padded to 32 bytes), with advice that could not help."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import ptojax as pj


@pytest.mark.parametrize("fn", [lambda a: a[a > 0], lambda a: a.at[a > 0].set(0.0)], ids=["select", "update"])
def test_a_boolean_mask_index_is_an_argument_error_with_the_shape_keeping_rewrite(fn):
    x = np.arange(35, dtype=np.float32).reshape(5, 7) - 17
    with pytest.raises(pj.PtoArgumentError, match=r"NonConcreteBooleanIndexError.*jnp\.where\(mask, x, fill\)"):
        pj.kernel(fn)(x)


@pytest.mark.parametrize("fn", [
    lambda a: lax.reduce_window(a, False, lax.max, (2, 2), (1, 1), "VALID"),
    lambda a: lax.reduce_window(a, True, lax.min, (2, 3), (2, 1), "SAME"),
    lambda a: lax.reduce_window(a, True, lax.max, (2, 2), (1, 1), "VALID"),         # an init that is no identity
    lambda a: lax.top_k(a, 5)], ids=["max-pool", "min-pool-same", "max-init-true", "top-k"])
def test_bool_windows_and_top_k_translate(fn):
    m = np.random.default_rng(1).random((6, 9)) < 0.4
    for got, want in zip(jax.tree.leaves(pj.kernel(fn)(m)), jax.tree.leaves(jax.jit(fn)(m))):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.int8, np.bool_])
@pytest.mark.parametrize("shape, axis", [((3000, 3), 0), ((2049, 1), 0), ((4, 1000, 5), 1), ((600, 7), 0),
                                         ((100, 3), 0)])
def test_a_sort_along_a_long_leading_axis_sorts_the_rows_of_its_transpose(dtype, shape, axis):
    x = np.random.default_rng(0).integers(-50, 50, shape).astype(dtype)

    def f(a):
        return jnp.sort(a, axis=axis), jnp.argsort(a, axis=axis, stable=True)

    for got, want in zip(pj.kernel(f)(x), jax.jit(f)(x)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("fn, named", [(lambda a, i: a.at[i].multiply(2.0), "multiply"),
                                       (lambda a, i: a.at[i].min(0.5), "min"), (lambda a, i: a.at[i].max(3.0), "max")])
def test_a_combining_scatter_is_refused_with_its_rewrite(fn, named):
    """``x.at[i].multiply`` / ``.min`` / ``.max`` named ``lax.scatter_mul`` and no rewrite, where the docs
    promise one."""
    with pytest.raises(pj.PtoUnsupportedError, match=rf"x\.at\[i\]\.{named}\).*atomic add only; gather the rows"):
        pj.kernel(fn)(np.ones((5, 4), np.float32), np.array([0, 2]))
