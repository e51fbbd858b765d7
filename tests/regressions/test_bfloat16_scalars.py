"""bfloat16 scalars (ml_dtypes', no NumPy floating type) are float scalars: ``jnp.sign`` of bfloat16
(and ``//``, ``logsumexp``, built on it) was refused inside a kernel as "scalar -1 of type bfloat16 is
not a bool, int or float", a scalar the lowering itself made."""
import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import ml_dtypes
import numpy as np
import pytest

import ptojax as pj

X = np.array([[-2.5, -0.0, 0.0, 1.5, 3.0, -1.0, 0.25, 7.0]], ml_dtypes.bfloat16)


@pytest.mark.parametrize("fn", [jnp.sign, lambda v: v // 1.5, lambda v: jss.logsumexp(v, axis=-1)],
                         ids=["sign", "floor_divide", "logsumexp"])
def test_bfloat16_functions_built_on_sign_compute_as_jit(fn):
    want = np.asarray(jax.jit(fn)(X)).astype(np.float32)
    for f in (pj.kernel(fn), jax.jit(pj.kernel(fn))):
        got = np.asarray(f(X))
        assert got.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(got.astype(np.float32), want)


def test_bfloat16_scalars_are_float_scalars_of_the_ops():
    x = np.ones((4, 8), ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(pj.ops.add(x, ml_dtypes.bfloat16(2)), np.float32), 3.0)
    np.testing.assert_array_equal(np.asarray(pj.ops.pad(x, ((0, 1), (0, 0)), value=ml_dtypes.bfloat16(2.5))[-1],
                                             np.float32), 2.5)
    assert pj.ops.rms_norm(x, np.ones(8, ml_dtypes.bfloat16), eps=ml_dtypes.bfloat16(1e-5)).dtype == x.dtype
    with pytest.raises(pj.PtoArgumentError, match="pto.pad: float pad value 2.5 for a int32 tensor"):
        pj.ops.pad(np.ones((2, 2), np.int32), ((0, 1), (0, 0)), value=ml_dtypes.bfloat16(2.5))
    with pytest.raises(pj.PtoDtypeError, match="float scalar 2.5 cannot combine with a int32 tensor"):
        pj.ops.add(np.ones((2, 2), np.int32), ml_dtypes.bfloat16(2.5))
