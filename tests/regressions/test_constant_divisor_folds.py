"""Integer division by a constant (``x // 2``, ``lax.div``) left scalar ops on the constant divisor in the
Block graph (``pto.eq(2, 0)``, ``pto.where``, ``pto.cast``): a polymorphic kernel refused them as "control
flow on the host". The divisor's terms fold at the Tensor level now; every divisor, zero and negative
ones included, still divides as XLA does."""
import jax
import numpy as np
import pytest
from jax import lax

import ptojax as pj


@pytest.mark.parametrize("dtype, divisor", [(np.int32, 2), (np.int32, -3), (np.int32, 0), (np.int8, -1), (np.int8, 7)])
def test_constant_divisors_fold_and_divide_as_xla(dtype, divisor):
    x = (np.arange(17 * 64, dtype=np.int32).reshape(17, 64) - 500).astype(dtype)
    if dtype == np.int8:
        x[0, :3] = [-128, 127, -1]

    def floor(a):
        return a // np.asarray(divisor, dtype) if divisor else a // np.asarray(1, dtype)

    def trunc(a):
        return lax.div(a, np.asarray(divisor, dtype))
    for fn in (floor, trunc):
        want = np.asarray(jax.jit(fn)(x))
        block = pj.kernel(fn).lower(x).as_text("block")
        assert not [line for line in block.splitlines() if "[] = pto." in line], block
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn)(x)), want)
        np.testing.assert_array_equal(np.asarray(pj.kernel(fn, polymorphic_shapes=("m, 64",))(x)), want)
