"""Every op traces to exactly one eqn named after it, and the catalogue is complete."""
import jax
import jax.numpy as jnp
import pytest

import ptojax as pj
from op_cases import CASES
from ptojax.primitives import OPS


def test_every_op_has_a_case():
    assert set(CASES) == set(OPS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_eqn_named_after_the_op(name):
    fn, args = CASES[name]
    eqns = jax.make_jaxpr(fn)(*args).jaxpr.eqns
    assert [e.primitive.name for e in eqns] == [f"pto.{name}"]
    assert OPS[name].primitive is eqns[0].primitive


def test_kernel_body_traces_op_by_op():
    def body(a, b, w):
        x = pj.ops.add(pj.ops.mul(a, 2.0), b)
        y = pj.ops.matmul(x, w)
        return pj.ops.sum(pj.ops.relu(y), -1)

    a = b = jnp.ones((8, 16), jnp.float16)
    w = jnp.ones((16, 4), jnp.float16)
    jaxpr = jax.make_jaxpr(body)(a, b, w).jaxpr
    assert [e.primitive.name for e in jaxpr.eqns] == ["pto.mul", "pto.add", "pto.matmul", "pto.relu", "pto.sum"]
    assert jaxpr.outvars[0].aval.shape == (8,)
    assert jaxpr.outvars[0].aval.dtype == jnp.float32  # fp16 matmul accumulates in fp32


def test_scalar_operand_takes_the_tensor_dtype():
    jaxpr = jax.make_jaxpr(lambda a: pj.ops.mul(a, 2))(jnp.ones(3, jnp.bfloat16)).jaxpr
    (eqn,) = jaxpr.eqns
    assert eqn.invars[1].aval.dtype == jnp.bfloat16 and eqn.outvars[0].aval.dtype == jnp.bfloat16


def test_eval_shape_uses_the_shape_rule_only():
    out = jax.eval_shape(lambda a, b: pj.ops.matmul(a, b, transpose_a=True),
                         jax.ShapeDtypeStruct((5, 64, 32), jnp.int8), jax.ShapeDtypeStruct((64, 16), jnp.int8))
    assert out.shape == (5, 32, 16) and out.dtype == jnp.int32
