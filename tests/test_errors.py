"""The error family: types, trace-time raising, and messages that name the op and the values."""
import jax
import jax.numpy as jnp
import pytest

import ptojax as pj


@pytest.mark.parametrize("cls,base", [(pj.PtoShapeError, ValueError), (pj.PtoDtypeError, TypeError),
                                      (pj.PtoArgumentError, ValueError),
                                      (pj.PtoUnsupportedError, NotImplementedError)])
def test_error_types_derive_from_builtins(cls, base):
    assert issubclass(cls, pj.PtoError) and issubclass(cls, base)


def test_shape_error_is_raised_while_tracing_not_running():
    calls = []

    def f(a, b):
        calls.append(1)
        return pj.ops.matmul(a, b)

    with pytest.raises(pj.PtoShapeError) as err:
        jax.jit(f).lower(jax.ShapeDtypeStruct((8, 64), jnp.float16), jax.ShapeDtypeStruct((32, 16), jnp.float16))
    assert calls == [1]
    assert str(err.value) == ("pto.matmul: contracting dims differ: a (8, 64) gives K=64, b (32, 16) gives K=32 "
                              "(transpose_a=False, transpose_b=False)")  # quoted verbatim in README.md


def test_dtype_error_names_the_op_and_both_operands():
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.sub: operands must share one dtype, got float16\[4\], "
                                               r"bfloat16\[4\]"):
        jax.make_jaxpr(pj.ops.sub)(jnp.ones(4, jnp.float16), jnp.ones(4, jnp.bfloat16))


def test_unsupported_dtype_is_rejected():
    with pytest.raises(pj.PtoDtypeError, match=r"pto\.exp: operand of dtype uint8 \(shape \(3,\)\) is not supported"):
        pj.ops.exp(jnp.ones(3, jnp.uint8))


def test_scalars_only_is_an_argument_error():
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.add: needs at least one tensor operand"):
        pj.ops.add(1.0, 2.0)


def test_wrong_operand_count():
    with pytest.raises(pj.PtoArgumentError, match=r"pto\.mul: takes 2 operands, got 3"):
        pj.ops.mul(jnp.ones(2), jnp.ones(2), jnp.ones(2))
